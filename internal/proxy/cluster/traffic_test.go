package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/proxy/stats"
)

// Every cluster straitd generates for DestinationRule traffic policies is
// accepted by strait-proxy.
func TestGeneratedTrafficPolicyClustersBuild(t *testing.T) {
	data, err := os.ReadFile("../../xds/gen/testdata/trafficpolicy/golden/client.clusters.json")
	if err != nil {
		t.Fatal(err)
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	for _, r := range raw {
		var c clusterv3.Cluster
		if err := protojson.Unmarshal(r, &c); err != nil {
			t.Fatal(err)
		}
		if _, err := build(&c, stats.New(), nil); err != nil {
			t.Errorf("cluster %s: %v", c.GetName(), err)
		}
	}
}

// staticCluster is a STATIC cluster of n endpoints 127.0.0.1:1.. with
// edit applied.
func staticCluster(t *testing.T, n int, edit func(*clusterv3.Cluster)) *Cluster {
	t.Helper()
	cfg := &clusterv3.Cluster{Name: "c", ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC}}
	ports := make([]uint32, n)
	for i := range ports {
		ports[i] = uint32(i + 1)
	}
	cfg.LoadAssignment = assignment("c", ports...)
	if edit != nil {
		edit(cfg)
	}
	c, err := build(cfg, stats.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestHashPoliciesAreSticky(t *testing.T) {
	for _, p := range []clusterv3.Cluster_LbPolicy{clusterv3.Cluster_RING_HASH, clusterv3.Cluster_MAGLEV} {
		c := staticCluster(t, 5, func(c *clusterv3.Cluster) { c.LbPolicy = p })
		seen := map[string]bool{}
		for k := range uint64(200) {
			h := k * 0x9e3779b97f4a7c15
			first, err := c.PickRequest(netip.AddrPort{}, h, true)
			if err != nil {
				t.Fatal(err)
			}
			c.Finish(first)
			for range 3 {
				again, _ := c.PickRequest(netip.AddrPort{}, h, true)
				c.Finish(again)
				if again.Address != first.Address {
					t.Fatalf("%s: hash %x went to %s then %s", p, h, first.Address, again.Address)
				}
			}
			seen[first.Address] = true
		}
		if len(seen) != 5 {
			t.Errorf("%s: 200 hashes reached %d of 5 hosts", p, len(seen))
		}
	}
}

func TestLeastRequestPrefersIdleHost(t *testing.T) {
	c := staticCluster(t, 2, func(c *clusterv3.Cluster) { c.LbPolicy = clusterv3.Cluster_LEAST_REQUEST })
	busy := c.hosts.Load().hosts[0]
	busy.active.Store(100)
	idle := 0
	for range 200 {
		ep, _ := c.PickRequest(netip.AddrPort{}, 0, false)
		if ep.Address != busy.ep.Address {
			idle++
		}
		c.Finish(ep)
	}
	// Two choices: the busy host wins only when drawn twice (1/4).
	if idle < 120 {
		t.Errorf("idle host picked %d of 200 times; power of two choices should favour it (~150)", idle)
	}
}

func TestWeightedRoundRobin(t *testing.T) {
	s := newHostSet(endpointList{eps: []Endpoint{{Address: "a"}, {Address: "b"}}, weights: []uint32{3, 1}}, nil, lbConfig{policy: clusterv3.Cluster_ROUND_ROBIN})
	n := map[string]int{}
	for range 400 {
		n[s.lb.pick(0, false, nil).ep.Address]++
	}
	if n["a"] != 300 || n["b"] != 100 {
		t.Errorf("weights 3:1 gave %v", n)
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
	bad.mu.Lock()
	bad.od.ejectedUntil = time.Now().Add(-time.Second)
	bad.mu.Unlock()
	if got, err := c.Pick(netip.AddrPort{}); err != nil || got.Address != bad.ep.Address {
		t.Fatalf("after its ejection time: %v, %v", got.Address, err)
	}
	if got := c.Stats.Counter("outlier_detection.ejections_enforced_total").Load(); got != 2 {
		t.Errorf("ejections_enforced_total = %d, want 2", got)
	}
}

func TestPanicModeRoutesToAll(t *testing.T) {
	c := staticCluster(t, 2, func(c *clusterv3.Cluster) {
		c.OutlierDetection = &clusterv3.OutlierDetection{Consecutive_5Xx: wrapperspb.UInt32(1), EnforcingSuccessRate: wrapperspb.UInt32(0)}
	})
	bad := c.hosts.Load().hosts[0]
	c.ReportStatus(Endpoint{h: bad}, 500)
	if !bad.ejected.Load() {
		t.Fatal("not ejected")
	}
	// 1 of 2 healthy is 50 %, not below Envoy's default threshold 50 %.
	for range 20 {
		if got, _ := c.Pick(netip.AddrPort{}); got.Address == bad.ep.Address {
			t.Fatal("picked the ejected host at 50 % healthy")
		}
	}
	c.panicThreshold = 60
	sawBad := false
	for range 50 {
		if got, _ := c.Pick(netip.AddrPort{}); got.Address == bad.ep.Address {
			sawBad = true
		}
	}
	if !sawBad {
		t.Error("panic mode (50 % healthy < 60 %) never picked the ejected host")
	}
}

func TestMaxRequestsOverflow(t *testing.T) {
	c := staticCluster(t, 1, func(c *clusterv3.Cluster) {
		c.CircuitBreakers = &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{MaxRequests: wrapperspb.UInt32(2)}}}
	})
	a, err1 := c.PickRequest(netip.AddrPort{}, 0, false)
	b, err2 := c.PickRequest(netip.AddrPort{}, 0, false)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if _, err := c.PickRequest(netip.AddrPort{}, 0, false); !errors.Is(err, ErrOverflow) {
		t.Fatalf("third request: %v, want ErrOverflow", err)
	}
	if got := c.Stats.Counter("upstream_rq_pending_overflow").Load(); got != 1 {
		t.Errorf("upstream_rq_pending_overflow = %d", got)
	}
	c.Finish(a)
	c.Finish(b)
	if _, err := c.PickRequest(netip.AddrPort{}, 0, false); err != nil {
		t.Fatalf("after Finish: %v", err)
	}
}

// max_connections 1, max_pending_requests 1 on a real upstream: the
// second request waits for the first's connection, the third overflows.
func TestConnectionLimitPending(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := uint32(ln.Addr().(*net.TCPAddr).Port)
	c, err := build(&clusterv3.Cluster{Name: "c", ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		LoadAssignment: assignment("c", port),
		CircuitBreakers: &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{
			MaxConnections: wrapperspb.UInt32(1), MaxPendingRequests: wrapperspb.UInt32(1)}}},
	}, stats.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ep, _ := c.Pick(netip.AddrPort{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	first, err := c.GetConn(ctx, ep)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		uc, err := c.GetConn(ctx, ep)
		if err == nil {
			uc.Close()
		}
		got <- err
	}()
	// Wait until the second request is pending, then a third overflows.
	for c.breaker.pending.Load() != 1 {
		time.Sleep(time.Millisecond)
	}
	if _, err := c.GetConn(ctx, ep); !errors.Is(err, ErrOverflow) {
		t.Fatalf("third request: %v, want ErrOverflow", err)
	}
	first.Close() // frees the slot: the pending request dials
	if err := <-got; err != nil {
		t.Fatalf("pending request: %v", err)
	}
	if c.Stats.Counter("upstream_cx_overflow").Load() < 2 || c.Stats.Counter("upstream_rq_pending_overflow").Load() != 1 {
		t.Errorf("cx_overflow %d, pending_overflow %d", c.Stats.Counter("upstream_cx_overflow").Load(), c.Stats.Counter("upstream_rq_pending_overflow").Load())
	}
}

func TestHTTPHealthCheck(t *testing.T) {
	healthy := make(chan bool, 1)
	healthy <- true
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ok := <-healthy
		healthy <- ok
		if r.URL.Path != "/healthz" || r.Host != "svc" {
			w.WriteHeader(404)
			return
		}
		if !ok {
			w.WriteHeader(503)
		}
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()
	port := uint32(ln.Addr().(*net.TCPAddr).Port)
	c, err := build(&clusterv3.Cluster{Name: "c", ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		LoadAssignment: assignment("c", port),
		CommonLbConfig: &clusterv3.Cluster_CommonLbConfig{HealthyPanicThreshold: &typev3.Percent{Value: 0}},
		HealthChecks: []*corev3.HealthCheck{{
			Timeout: durationpb.New(time.Second), Interval: durationpb.New(20 * time.Millisecond),
			NoTrafficInterval:  durationpb.New(20 * time.Millisecond),
			UnhealthyThreshold: wrapperspb.UInt32(2), HealthyThreshold: wrapperspb.UInt32(2),
			HealthChecker: &corev3.HealthCheck_HttpHealthCheck_{HttpHealthCheck: &corev3.HealthCheck_HttpHealthCheck{Path: "/healthz", Host: "svc"}},
		}},
	}, stats.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	c.activate()
	waitPick := func(wantOK bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, err := c.Pick(netip.AddrPort{})
			if (err == nil) == wantOK {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("host never became healthy=%v (last pick error %v)", wantOK, err)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitPick(true)
	<-healthy
	healthy <- false
	waitPick(false)
	<-healthy
	healthy <- true
	waitPick(true)
}

func TestRefusedClusterFields(t *testing.T) {
	for name, edit := range map[string]func(*clusterv3.Cluster){
		"lb_subset_config": func(c *clusterv3.Cluster) { c.LbSubsetConfig = &clusterv3.Cluster_LbSubsetConfig{} },
		"transport_socket": func(c *clusterv3.Cluster) { c.TransportSocket = &corev3.TransportSocket{Name: "tls"} },
		"lb_policy":        func(c *clusterv3.Cluster) { c.LbPolicy = clusterv3.Cluster_LOAD_BALANCING_POLICY_CONFIG },
		"table_size": func(c *clusterv3.Cluster) {
			c.LbPolicy = clusterv3.Cluster_MAGLEV
			c.LbConfig = &clusterv3.Cluster_MaglevLbConfig_{MaglevLbConfig: &clusterv3.Cluster_MaglevLbConfig{TableSize: wrapperspb.UInt64(1000)}}
		},
		"priority": func(c *clusterv3.Cluster) {
			c.CircuitBreakers = &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{Priority: corev3.RoutingPriority_HIGH}}}
		},
		"enforcing_success_rate": func(c *clusterv3.Cluster) { c.OutlierDetection = &clusterv3.OutlierDetection{} },
		"zone_aware_lb_config": func(c *clusterv3.Cluster) {
			c.CommonLbConfig = &clusterv3.Cluster_CommonLbConfig{LocalityConfigSpecifier: &clusterv3.Cluster_CommonLbConfig_ZoneAwareLbConfig_{}}
		},
		"dns_refresh_rate": func(c *clusterv3.Cluster) { c.DnsRefreshRate = durationpb.New(time.Second) },
	} {
		cfg := &clusterv3.Cluster{Name: "c", ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC}}
		edit(cfg)
		// The manager's build: the transport socket is its part.
		_, err := NewManager(slog.New(slog.DiscardHandler), stats.New()).build(cfg)
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: error %v, want one naming %s", name, err, name)
		}
	}
}

func TestAcquireConnection(t *testing.T) {
	c := staticCluster(t, 1, func(c *clusterv3.Cluster) {
		c.CircuitBreakers = &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{MaxConnections: wrapperspb.UInt32(1), TrackRemaining: true}}}
	})
	if !c.AcquireConnection() {
		t.Fatal("first connection refused")
	}
	if c.AcquireConnection() {
		t.Fatal("second connection admitted over max_connections 1")
	}
	if got := c.Stats.Gauge("circuit_breakers.default.cx_open").Load(); got != 1 {
		t.Errorf("cx_open = %d while full", got)
	}
	if got := c.Stats.Gauge("circuit_breakers.default.remaining_cx").Load(); got != 0 {
		t.Errorf("remaining_cx = %d while full", got)
	}
	c.ReleaseConnection()
	if !c.AcquireConnection() {
		t.Fatal("refused after a release")
	}
	if got := c.Stats.Counter("upstream_cx_overflow").Load(); got != 1 {
		t.Errorf("upstream_cx_overflow = %d, want 1", got)
	}
}

// A host that just joined gets min_weight_percent of its weight, then
// more as its window passes, then all of it.
func TestSlowStart(t *testing.T) {
	ss := &slowStart{window: 100 * time.Second, aggression: 1, minWeight: 0.1}
	now := time.Now()
	for _, c := range []struct {
		age  time.Duration
		want float64
	}{{0, 0.1}, {50 * time.Second, 0.5}, {99 * time.Second, 0.99}, {100 * time.Second, 1}, {time.Hour, 1}} {
		if got := ss.factor(now.Add(-c.age), now); got < c.want-1e-9 || got > c.want+1e-9 {
			t.Errorf("factor at %v = %v, want %v", c.age, got, c.want)
		}
	}
	c := staticCluster(t, 2, func(c *clusterv3.Cluster) {
		c.LbConfig = &clusterv3.Cluster_RoundRobinLbConfig_{RoundRobinLbConfig: &clusterv3.Cluster_RoundRobinLbConfig{
			SlowStartConfig: &clusterv3.Cluster_SlowStartConfig{SlowStartWindow: durationpb.New(time.Hour)}}}
	})
	s := c.hosts.Load()
	old, fresh := s.hosts[0], s.hosts[1]
	old.created = time.Now().Add(-2 * time.Hour) // long in the cluster
	n := 0
	for range 1000 {
		if ep, _ := c.Pick(netip.AddrPort{}); ep.Address == fresh.ep.Address {
			n++
		}
	}
	// The fresh host weighs 0.1 against 1: about 91 of 1000.
	if n < 40 || n > 160 {
		t.Errorf("the host in slow start got %d of 1000 picks; want about 91", n)
	}
	// Once its window is over the two share evenly (the round robin).
	fresh.created = old.created
	s.newest = old.created
	n = 0
	for range 1000 {
		if ep, _ := c.Pick(netip.AddrPort{}); ep.Address == fresh.ep.Address {
			n++
		}
	}
	if n != 500 {
		t.Errorf("after the window: %d of 1000 picks, want 500", n)
	}
}

// A cluster's health checks start when the manager publishes it, not
// when a CDS response merely builds it.
func TestHealthChecksStartWhenActive(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := uint32(ln.Addr().(*net.TCPAddr).Port)
	ln.Close() // nothing listens: the TCP check fails
	cfg := func(name string) *clusterv3.Cluster {
		return &clusterv3.Cluster{Name: name, ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
			LoadAssignment: assignment(name, port),
			CommonLbConfig: &clusterv3.Cluster_CommonLbConfig{HealthyPanicThreshold: &typev3.Percent{Value: 0}},
			HealthChecks: []*corev3.HealthCheck{{
				Timeout: durationpb.New(time.Second), Interval: durationpb.New(time.Hour),
				UnhealthyThreshold: wrapperspb.UInt32(1), HealthyThreshold: wrapperspb.UInt32(1),
				HealthChecker: &corev3.HealthCheck_TcpHealthCheck_{TcpHealthCheck: &corev3.HealthCheck_TcpHealthCheck{}},
			}}}
	}
	m := NewManager(slog.New(slog.DiscardHandler), stats.New())
	// A response refused for its second cluster starts nothing.
	bad := cfg("bad")
	bad.LbPolicy = clusterv3.Cluster_LOAD_BALANCING_POLICY_CONFIG
	if _, err := m.ApplyCDS("1", []*clusterv3.Cluster{cfg("a"), bad}); err == nil {
		t.Fatal("want the response refused")
	}
	if _, err := m.ApplyCDS("2", []*clusterv3.Cluster{cfg("a")}); err != nil {
		t.Fatal(err)
	}
	c := m.Get("a")
	defer c.close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := c.Stats.Counter("health_check.failure").Load()
		if st > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no health check ran on the active cluster")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := c.Pick(netip.AddrPort{}); !errors.Is(err, ErrNoHealthyUpstream) {
		t.Errorf("pick with the only host failing its check: %v", err)
	}
}

// The net/http pool's dials take max_connections slots, given back on
// Close (once, however often Close is called).
func TestDialSlot(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c := staticCluster(t, 1, func(c *clusterv3.Cluster) {
		c.CircuitBreakers = &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{MaxConnections: wrapperspb.UInt32(1)}}}
	})
	ep := Endpoint{Network: "tcp", Address: ln.Addr().String()}
	ctx := context.Background()
	first, err := c.dialSlot(ctx, ep)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.dialSlot(ctx, ep); !errors.Is(err, ErrOverflow) {
		t.Fatalf("second dial: %v, want ErrOverflow", err)
	}
	first.Close()
	first.Close()
	second, err := c.dialSlot(ctx, ep)
	if err != nil {
		t.Fatalf("after Close: %v", err)
	}
	defer second.Close()
	if got := c.breaker.conns.Load(); got != 1 {
		t.Errorf("open connections counted %d, want 1 (a second Close released twice?)", got)
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
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.od.ejectedUntil.Sub(before).Round(time.Second)
	}
	// back returns h to service as if its ejection ended, then idle
	// passed.
	back := func(idle time.Duration) {
		h.mu.Lock()
		h.od.ejectedUntil = time.Now().Add(-time.Millisecond)
		h.mu.Unlock()
		c.returnIfExpired(h, time.Now())
		if h.ejected.Load() {
			t.Fatal("still ejected after its time")
		}
		h.mu.Lock()
		h.od.lastChange = h.od.lastChange.Add(-idle)
		h.mu.Unlock()
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

func TestTCPKeepaliveConfig(t *testing.T) {
	c := staticCluster(t, 1, func(c *clusterv3.Cluster) {
		c.UpstreamConnectionOptions = &clusterv3.UpstreamConnectionOptions{TcpKeepalive: &corev3.TcpKeepalive{
			KeepaliveTime: wrapperspb.UInt32(60), KeepaliveInterval: wrapperspb.UInt32(10), KeepaliveProbes: wrapperspb.UInt32(3)}}
	})
	want := net.KeepAliveConfig{Enable: true, Idle: time.Minute, Interval: 10 * time.Second, Count: 3}
	if got := c.dialer.KeepAliveConfig; got != want {
		t.Errorf("keepalive %+v, want %+v", got, want)
	}
	c = staticCluster(t, 1, func(c *clusterv3.Cluster) {
		c.UpstreamConnectionOptions = &clusterv3.UpstreamConnectionOptions{TcpKeepalive: &corev3.TcpKeepalive{}}
	})
	want = net.KeepAliveConfig{Enable: true, Idle: -1, Interval: -1, Count: -1}
	if got := c.dialer.KeepAliveConfig; got != want {
		t.Errorf("keepalive without values %+v, want the system's (%+v)", got, want)
	}
}

func hostsOf(weights ...uint32) []*host {
	hs := make([]*host, len(weights))
	for i, w := range weights {
		hs[i] = &host{ep: Endpoint{Network: "tcp", Address: fmt.Sprintf("10.0.0.%d:80", i+1)}, weight: w}
	}
	return hs
}

// Every balancer: weights shape the share (3:1 within a tolerance), and a
// host the filter refuses is never picked; nil when the filter refuses all.
func TestBalancersWeightsAndFilter(t *testing.T) {
	for _, p := range []clusterv3.Cluster_LbPolicy{clusterv3.Cluster_ROUND_ROBIN, clusterv3.Cluster_RANDOM,
		clusterv3.Cluster_RING_HASH, clusterv3.Cluster_MAGLEV, clusterv3.Cluster_LEAST_REQUEST} {
		lb := lbConfig{policy: p, minRing: 1024, maxRing: defaultMaxRingSize, maglevSize: 65537, choiceCount: 2}
		hs := hostsOf(3, 1)
		b := lb.build(hs)
		n := map[*host]int{}
		for i := range uint64(4000) {
			n[b.pick(i*0x9e3779b97f4a7c15, true, nil)]++
		}
		if p != clusterv3.Cluster_LEAST_REQUEST { // no request is in flight: least request ignores weights then
			if share := float64(n[hs[0]]) / 4000; share < 0.65 || share > 0.85 {
				t.Errorf("%s: the weight-3 host got %.2f of the picks, want about 0.75", p, share)
			}
		}
		notFirst := func(h *host) bool { return h != hs[0] }
		for i := range uint64(200) {
			if got := b.pick(i*0x9e3779b97f4a7c15, true, notFirst); got != hs[1] {
				t.Fatalf("%s: picked %v with the filter refusing it", p, got.ep.Address)
			}
		}
		if got := b.pick(1, true, func(*host) bool { return false }); got != nil {
			t.Errorf("%s: picked %v with every host refused", p, got.ep.Address)
		}
	}
	if got := (lbConfig{policy: clusterv3.Cluster_ROUND_ROBIN}).build(nil).pick(0, false, nil); got != nil {
		t.Errorf("empty host set picked %v", got)
	}
}

// Least request weighs active requests by weight: a weight-4 host with 3
// in flight is as loaded as a weight-1 host with none.
func TestLeastRequestWeighted(t *testing.T) {
	hs := hostsOf(4, 1)
	hs[0].active.Store(3)
	if less(hs[0], hs[1]) || less(hs[1], hs[0]) {
		t.Error("(3+1)/4 and (0+1)/1 are equal loads")
	}
	hs[0].active.Store(2)
	if !less(hs[0], hs[1]) {
		t.Error("(2+1)/4 is less than (0+1)/1")
	}
}

func TestPickRequestCountsActive(t *testing.T) {
	c := staticCluster(t, 1, nil)
	h := c.hosts.Load().hosts[0]
	a, _ := c.PickRequest(netip.AddrPort{}, 0, false)
	b, _ := c.PickRequest(netip.AddrPort{}, 0, false)
	if h.active.Load() != 2 || c.breaker.requests.Load() != 2 {
		t.Fatalf("after two picks: active %d, requests %d", h.active.Load(), c.breaker.requests.Load())
	}
	c.Finish(a)
	c.Finish(b)
	c.Finish(Endpoint{}) // not from PickRequest: ignored
	if h.active.Load() != 0 || c.breaker.requests.Load() != 0 {
		t.Fatalf("after Finish: active %d, requests %d", h.active.Load(), c.breaker.requests.Load())
	}
	// Pick (connections) does not count.
	if ep, _ := c.Pick(netip.AddrPort{}); ep.counted || h.active.Load() != 0 {
		t.Error("Pick counted a request")
	}
}

// Health check thresholds: a new host is healthy on its first success;
// then unhealthy_threshold failures in a row take it out and
// healthy_threshold successes in a row bring it back.
func TestHealthThresholds(t *testing.T) {
	c := staticCluster(t, 1, func(c *clusterv3.Cluster) {
		c.HealthChecks = []*corev3.HealthCheck{{Timeout: durationpb.New(time.Second), Interval: durationpb.New(time.Hour),
			UnhealthyThreshold: wrapperspb.UInt32(2), HealthyThreshold: wrapperspb.UInt32(3),
			HealthChecker: &corev3.HealthCheck_TcpHealthCheck_{TcpHealthCheck: &corev3.HealthCheck_TcpHealthCheck{}}}}
	})
	hc, h := c.hc, c.hosts.Load().hosts[0]
	if !h.hcFailed.Load() {
		t.Fatal("a new host must start failed")
	}
	fail := errors.New("down")
	steps := []struct {
		err        error
		wantFailed bool
	}{
		{nil, false},                               // first success
		{fail, false}, {nil, false}, {fail, false}, // never two in a row
		{fail, true},
		{nil, true}, {nil, true}, {fail, true}, {nil, true}, {nil, true},
		{nil, false}, // third success in a row
	}
	for i, s := range steps {
		hc.record(h, s.err)
		if h.hcFailed.Load() != s.wantFailed {
			t.Fatalf("step %d: failed = %v, want %v", i, h.hcFailed.Load(), s.wantFailed)
		}
	}
	if got := c.Stats.Counter("health_check.attempt").Load(); got != uint64(len(steps)) {
		t.Errorf("health_check.attempt = %d, want %d", got, len(steps))
	}
	if got := c.Stats.Counter("health_check.failure").Load(); got != 4 {
		t.Errorf("health_check.failure = %d, want 4", got)
	}
}

// An endpoint update keeps the state of the hosts whose address stays
// (here an ejection) and drops the others.
func TestEndpointUpdateKeepsHostState(t *testing.T) {
	c := staticCluster(t, 2, func(c *clusterv3.Cluster) {
		c.OutlierDetection = &clusterv3.OutlierDetection{Consecutive_5Xx: wrapperspb.UInt32(1),
			EnforcingSuccessRate: wrapperspb.UInt32(0), BaseEjectionTime: durationpb.New(time.Hour)}
	})
	old := c.hosts.Load().hosts
	c.ReportStatus(Endpoint{h: old[0]}, 500)
	c.setEndpoints([]Endpoint{old[0].ep, {Network: "tcp", Address: "127.0.0.1:9"}})
	now := c.hosts.Load().hosts
	if now[0] != old[0] || !now[0].ejected.Load() {
		t.Fatal("the host that stayed lost its state")
	}
	if now[1] == old[1] || now[1].ep.Address != "127.0.0.1:9" {
		t.Fatal("the new host is not a new one")
	}
	if got := c.Endpoints(); len(got) != 2 || got[1].Address != "127.0.0.1:9" {
		t.Fatalf("Endpoints() = %v", got)
	}
}

// TestAltStatName: alt_stat_name names the cluster's stats, as in Envoy.
func TestAltStatName(t *testing.T) {
	st := stats.New()
	cfg := &clusterv3.Cluster{Name: "outbound|80||a.b.svc.cluster.local", AltStatName: "outbound|80||a.b", ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC}}
	c, err := build(cfg, st, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if c.Stats.Name != "outbound|80||a.b" {
		t.Errorf("stats name %q, want the alt_stat_name", c.Stats.Name)
	}
}

// A connect that outlasts connect_timeout counts upstream_cx_connect_fail
// and upstream_cx_connect_timeout; one cut short by the caller's own
// deadline (the request gave up) counts only the failure.
func TestConnectTimeoutStat(t *testing.T) {
	c := staticCluster(t, 1, func(cfg *clusterv3.Cluster) {
		cfg.ConnectTimeout = durationpb.New(time.Nanosecond) // over before the dial starts
	})
	ep := Endpoint{Network: "tcp", Address: "127.0.0.1:1"}
	if _, err := c.Dial(context.Background(), ep); err == nil {
		t.Fatal("dial within 1ns succeeded")
	}
	if got := c.Stats.Counter("upstream_cx_connect_timeout").Load(); got != 1 {
		t.Errorf("upstream_cx_connect_timeout = %d after a connect timeout, want 1", got)
	}
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	if _, err := c.Dial(ctx, ep); err == nil {
		t.Fatal("dial with an expired context succeeded")
	}
	if got := c.Stats.Counter("upstream_cx_connect_timeout").Load(); got != 1 {
		t.Errorf("upstream_cx_connect_timeout = %d after the caller's deadline, want still 1", got)
	}
	if got := c.Stats.CxConnectFail.Load(); got != 2 {
		t.Errorf("upstream_cx_connect_fail = %d, want 2", got)
	}
}
