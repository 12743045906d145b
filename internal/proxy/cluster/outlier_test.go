package cluster

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// A host carries outlier detection state only once it has a report: the
// hosts of a cluster without outlier detection, and hosts never reported
// on, carry none (the state would be a third of each host).
func TestOutlierStateMadeOnFirstReport(t *testing.T) {
	plain := staticCluster(t, 2, nil)
	for range 4 {
		ep, err := plain.Pick(netip.AddrPort{})
		if err != nil {
			t.Fatal(err)
		}
		plain.ReportStatus(ep, 500)
	}
	for i, h := range plain.hosts.Load().hosts {
		if h.od.Load() != nil {
			t.Errorf("host %d of a cluster without outlier detection has outlier state", i)
		}
	}
	c := staticCluster(t, 2, func(c *clusterv3.Cluster) {
		c.OutlierDetection = &clusterv3.OutlierDetection{Consecutive_5Xx: wrapperspb.UInt32(5), EnforcingSuccessRate: wrapperspb.UInt32(0)}
	})
	hs := c.hosts.Load().hosts
	c.ReportStatus(Endpoint{Address: hs[0].ep.Address, h: hs[0]}, 500)
	if hs[0].od.Load() == nil || hs[0].od.Load().s.consecutive5xx != 1 {
		t.Errorf("reported host's outlier state = %+v, want consecutive5xx 1", hs[0].od.Load())
	}
	if hs[1].od.Load() != nil {
		t.Error("a host never reported on has outlier state")
	}
}

func TestOutlierEjectionAndReturn(t *testing.T) {
	c := staticCluster(t, 2, func(c *clusterv3.Cluster) {
		c.OutlierDetection = &clusterv3.OutlierDetection{
			Consecutive_5Xx: wrapperspb.UInt32(2), EnforcingSuccessRate: wrapperspb.UInt32(0),
			BaseEjectionTime: durationpb.New(time.Hour), MaxEjectionPercent: wrapperspb.UInt32(100),
		}
		c.CommonLbConfig = &clusterv3.Cluster_CommonLbConfig{HealthyPanicThreshold: &typev3.Percent{Value: 0}}
	})
	bad := c.hosts.Load().hosts[0]
	ep := Endpoint{Address: bad.ep.Address, h: bad}
	c.ReportStatus(ep, 500)
	c.ReportStatus(ep, 200) // a success resets the count
	c.ReportStatus(ep, 500)
	if bad.ejected.Load() {
		t.Fatal("ejected after 500, 200, 500 with consecutive_5xx 2")
	}
	c.ReportStatus(ep, 503)
	if !bad.ejected.Load() {
		t.Fatal("not ejected after two 5xx in a row")
	}
	for range 50 {
		got, err := c.Pick(netip.AddrPort{})
		if err != nil || got.Address == bad.ep.Address {
			t.Fatalf("picked %v, %v: the ejected host must not be", got.Address, err)
		}
	}
	// The other host ejected too (max 100%): no healthy host, and panic
	// mode is off.
	other := c.hosts.Load().hosts[1]
	oep := Endpoint{Address: other.ep.Address, h: other}
	c.ReportStatus(oep, 500)
	c.ReportStatus(oep, 500)
	if _, err := c.Pick(netip.AddrPort{}); !errors.Is(err, ErrNoHealthyUpstream) {
		t.Fatalf("all hosts ejected without panic mode: %v, want ErrNoHealthyUpstream", err)
	}
	// The ejection time passed: back in service.
	o := bad.od.Load()
	o.mu.Lock()
	o.s.ejectedUntil = time.Now().Add(-time.Second)
	o.mu.Unlock()
	if got, err := c.Pick(netip.AddrPort{}); err != nil || got.Address != bad.ep.Address {
		t.Fatalf("after its ejection time: %v, %v", got.Address, err)
	}
	if got := c.Stats.Counter("outlier_detection.ejections_enforced_total").Load(); got != 2 {
		t.Errorf("ejections_enforced_total = %d, want 2", got)
	}
}

// Local-origin failures: counted as 5xx unless split, then on their own
// counter, reset by a connection that opens.
func TestLocalOriginFailures(t *testing.T) {
	mk := func(split bool) (*Cluster, *host) {
		c := staticCluster(t, 2, func(c *clusterv3.Cluster) {
			c.OutlierDetection = &clusterv3.OutlierDetection{
				Consecutive_5Xx: wrapperspb.UInt32(2), ConsecutiveLocalOriginFailure: wrapperspb.UInt32(2),
				SplitExternalLocalOriginErrors: split, EnforcingSuccessRate: wrapperspb.UInt32(0),
				EnforcingLocalOriginSuccessRate: wrapperspb.UInt32(0), MaxEjectionPercent: wrapperspb.UInt32(100)}
		})
		return c, c.hosts.Load().hosts[0]
	}
	c, h := mk(false)
	ep := Endpoint{h: h}
	c.ReportLocalFailure(ep, LocalConnectFailed)
	c.ReportConnectSuccess(ep) // resets
	c.ReportLocalFailure(ep, LocalTimeout)
	if h.ejected.Load() {
		t.Fatal("not split: ejected although a success came between the failures")
	}
	c.ReportLocalFailure(ep, LocalReset)
	if !h.ejected.Load() {
		t.Fatal("not split: two local failures in a row count as two 5xx")
	}
	c, h = mk(true)
	ep = Endpoint{h: h}
	c.ReportLocalFailure(ep, LocalConnectFailed)
	c.ReportStatus(ep, 503) // external: its own counter
	c.ReportConnectSuccess(ep)
	c.ReportLocalFailure(ep, LocalConnectFailed)
	if h.ejected.Load() {
		t.Fatal("split: ejected although a connection opened between the local failures")
	}
	c.ReportStatus(ep, 500) // the second external 5xx in a row
	if !h.ejected.Load() {
		t.Fatal("split: two external 5xx in a row must eject")
	}
	if got := c.Stats.Counter("outlier_detection.ejections_enforced_consecutive_5xx").Load(); got != 1 {
		t.Errorf("ejections_enforced_consecutive_5xx = %d", got)
	}
}

// The ejection time is base_ejection_time × the host's ejection count,
// within max_ejection_time; each interval back in service takes one off
// the count.
func TestEjectionTimeGrowsAndDecays(t *testing.T) {
	c := staticCluster(t, 2, func(c *clusterv3.Cluster) {
		c.OutlierDetection = &clusterv3.OutlierDetection{
			Consecutive_5Xx: wrapperspb.UInt32(1), EnforcingSuccessRate: wrapperspb.UInt32(0),
			Interval: durationpb.New(10 * time.Second), BaseEjectionTime: durationpb.New(30 * time.Second),
			MaxEjectionTime: durationpb.New(70 * time.Second), MaxEjectionPercent: wrapperspb.UInt32(100),
		}
	})
	h := c.hosts.Load().hosts[0]
	ejectFor := func() time.Duration {
		t.Helper()
		before := time.Now()
		c.ReportStatus(Endpoint{h: h}, 500)
		if !h.ejected.Load() {
			t.Fatal("not ejected")
		}
		h.outlier().mu.Lock()
		defer h.outlier().mu.Unlock()
		return h.outlier().s.ejectedUntil.Sub(before).Round(time.Second)
	}
	// back returns h to service as if its ejection ended, then idle
	// passed.
	back := func(idle time.Duration) {
		h.outlier().mu.Lock()
		h.outlier().s.ejectedUntil = time.Now().Add(-time.Millisecond)
		h.outlier().mu.Unlock()
		c.returnIfExpired(h, time.Now())
		if h.ejected.Load() {
			t.Fatal("still ejected after its time")
		}
		h.outlier().mu.Lock()
		h.outlier().s.lastChange = h.outlier().s.lastChange.Add(-idle)
		h.outlier().mu.Unlock()
	}
	if d := ejectFor(); d != 30*time.Second {
		t.Fatalf("first ejection %v, want 30s", d)
	}
	back(0)
	if d := ejectFor(); d != 60*time.Second {
		t.Fatalf("second ejection %v, want 60s", d)
	}
	back(0)
	if d := ejectFor(); d != 70*time.Second {
		t.Fatalf("third ejection %v, want max_ejection_time 70s", d)
	}
	back(25 * time.Second) // two intervals: the count goes from 3 to 1
	if d := ejectFor(); d != 60*time.Second {
		t.Fatalf("after two quiet intervals %v, want 60s (count 2)", d)
	}
	if got := c.Stats.Gauge("outlier_detection.ejections_active").Load(); got != 1 {
		t.Errorf("ejections_active = %d, want 1", got)
	}
}

// max_ejection_percent: past it a host is not ejected (counted as
// ejections_overflow), but one host always may be.
func TestMaxEjectionPercent(t *testing.T) {
	c := staticCluster(t, 3, func(c *clusterv3.Cluster) {
		c.OutlierDetection = &clusterv3.OutlierDetection{ConsecutiveGatewayFailure: wrapperspb.UInt32(2),
			EnforcingConsecutiveGatewayFailure: wrapperspb.UInt32(100), Consecutive_5Xx: wrapperspb.UInt32(0),
			EnforcingSuccessRate: wrapperspb.UInt32(0), MaxEjectionPercent: wrapperspb.UInt32(34)}
	})
	hs := c.hosts.Load().hosts
	for _, h := range hs[:2] {
		c.ReportStatus(Endpoint{h: h}, 502)
		c.ReportStatus(Endpoint{h: h}, 504)
	}
	if !hs[0].ejected.Load() || hs[1].ejected.Load() {
		t.Fatalf("ejected %v %v: want the first (one host always may be) and not the second (2 of 3 > 34%%)", hs[0].ejected.Load(), hs[1].ejected.Load())
	}
	if got := c.Stats.Counter("outlier_detection.ejections_overflow").Load(); got != 1 {
		t.Errorf("ejections_overflow = %d, want 1", got)
	}
	if got := c.Stats.Counter("outlier_detection.ejections_enforced_consecutive_gateway_failure").Load(); got != 1 {
		t.Errorf("gateway ejections = %d, want 1", got)
	}
	// 500 is a 5xx but not a gateway error: it neither counts nor resets
	// the gateway count, so 502, 500, 503 reach the threshold (and
	// overflow again); a 200 resets it.
	h := hs[2]
	c.ReportStatus(Endpoint{h: h}, 502)
	c.ReportStatus(Endpoint{h: h}, 200)
	c.ReportStatus(Endpoint{h: h}, 503)
	if got := c.Stats.Counter("outlier_detection.ejections_overflow").Load(); got != 1 {
		t.Fatalf("a 200 between two gateway errors: ejections_overflow = %d, want still 1", got)
	}
	c.ReportStatus(Endpoint{h: h}, 500)
	c.ReportStatus(Endpoint{h: h}, 504)
	if got := c.Stats.Counter("outlier_detection.ejections_overflow").Load(); got != 2 {
		t.Errorf("503, 500, 504: ejections_overflow = %d, want 2", got)
	}
}
