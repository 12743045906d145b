package cluster

import (
	"net/netip"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/proxy/cluster/lb"
)

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
	s := newHostSet(endpointList{eps: []Endpoint{{Address: "a"}, {Address: "b"}}, weights: []uint32{3, 1}}, nil, lb.Config{Policy: clusterv3.Cluster_ROUND_ROBIN})
	n := map[string]int{}
	for range 400 {
		n[s.lb.Pick(0, false, nil).ep.Address]++
	}
	if n["a"] != 300 || n["b"] != 100 {
		t.Errorf("weights 3:1 gave %v", n)
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
