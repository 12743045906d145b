package cluster

import (
	"fmt"
	"net/netip"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
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
	s := newHostSet(endpointList{eps: []Endpoint{{Address: "a"}, {Address: "b"}}, weights: []uint32{3, 1}}, nil, lbConfig{policy: clusterv3.Cluster_ROUND_ROBIN})
	n := map[string]int{}
	for range 400 {
		n[s.lb.pick(0, false, nil).ep.Address]++
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
