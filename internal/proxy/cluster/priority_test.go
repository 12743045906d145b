package cluster

import (
	"encoding/json"
	"errors"
	"net/netip"
	"os"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/proxy/cluster/lb"
	"github.com/straitmesh/strait/internal/proxy/stats"
)

// group is one LocalityLbEndpoints for groupedCluster: its priority,
// locality weight (0: unset) and endpoint ports on 127.0.0.1.
type group struct {
	priority, weight uint32
	ports            []uint32
}

// groupedCluster is a STATIC ROUND_ROBIN cluster of the groups, with
// outlier detection (every ejection enforced, panic mode off unless edit
// says otherwise).
func groupedCluster(t testing.TB, groups []group, edit func(*clusterv3.Cluster)) *Cluster {
	t.Helper()
	cla := &endpointv3.ClusterLoadAssignment{ClusterName: "c"}
	for _, g := range groups {
		lle := assignment("c", g.ports...).Endpoints[0]
		lle.Priority = g.priority
		lle.Locality = &corev3.Locality{Region: "r", Zone: string(rune('a' + len(cla.Endpoints)))}
		if g.weight > 0 {
			lle.LoadBalancingWeight = wrapperspb.UInt32(g.weight)
		}
		cla.Endpoints = append(cla.Endpoints, lle)
	}
	cfg := &clusterv3.Cluster{Name: "c", ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		LoadAssignment: cla, LbPolicy: clusterv3.Cluster_ROUND_ROBIN,
		OutlierDetection: &clusterv3.OutlierDetection{Consecutive_5Xx: wrapperspb.UInt32(1), EnforcingSuccessRate: wrapperspb.UInt32(0),
			BaseEjectionTime: durationpb.New(3600e9), MaxEjectionPercent: wrapperspb.UInt32(100)},
		CommonLbConfig: &clusterv3.Cluster_CommonLbConfig{HealthyPanicThreshold: &typev3.Percent{Value: 0}},
	}
	if edit != nil {
		edit(cfg)
	}
	c, err := build(cfg, stats.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.close)
	return c
}

func (c *Cluster) hostAt(t *testing.T, port string) *host {
	t.Helper()
	for _, h := range c.hosts.Load().hosts {
		if h.ep.Address == "127.0.0.1:"+port {
			return h
		}
	}
	t.Fatalf("no host at port %s", port)
	return nil
}

// picks counts n picks by port.
func picks(t *testing.T, c *Cluster, n int) map[string]int {
	t.Helper()
	out := map[string]int{}
	for range n {
		ep, err := c.Pick(netip.AddrPort{})
		if err != nil {
			t.Fatalf("pick: %v", err)
		}
		out[ep.Address[len("127.0.0.1:"):]]++
	}
	return out
}

// Priority 0 takes all the load while healthy enough (a host ejected of
// four is still 3/4 × 1.4 ≥ 100 %), spills to priority 1 by its
// availability (two of four ejected: 70 % stays), and hands it all over
// when it has no healthy host; with none healthy anywhere and panic mode
// off, no host is picked.
func TestPriorityFailover(t *testing.T) {
	c := groupedCluster(t, []group{{priority: 0, ports: []uint32{1, 2, 3, 4}}, {priority: 1, ports: []uint32{5}}}, nil)
	if n := picks(t, c, 400); n["5"] != 0 {
		t.Fatalf("healthy priority 0: priority 1 got %d of 400", n["5"])
	}
	c.ReportStatus(Endpoint{h: c.hostAt(t, "1")}, 500)
	if n := picks(t, c, 400); n["5"] != 0 || n["1"] != 0 {
		t.Fatalf("3 of 4 healthy (105 %% with overprovisioning): %v", n)
	}
	c.ReportStatus(Endpoint{h: c.hostAt(t, "2")}, 500)
	n := picks(t, c, 4000)
	if share := float64(n["5"]) / 4000; share < 0.25 || share > 0.35 || n["1"]+n["2"] != 0 {
		t.Fatalf("2 of 4 healthy (70 %%): priority 1 got %.2f of the load (want 0.30), picks %v", share, n)
	}
	c.ReportStatus(Endpoint{h: c.hostAt(t, "3")}, 500)
	c.ReportStatus(Endpoint{h: c.hostAt(t, "4")}, 500)
	if n := picks(t, c, 100); n["5"] != 100 {
		t.Fatalf("priority 0 all ejected: %v", n)
	}
	c.ReportStatus(Endpoint{h: c.hostAt(t, "5")}, 500)
	if _, err := c.Pick(netip.AddrPort{}); !errors.Is(err, ErrNoHealthyUpstream) {
		t.Fatalf("no healthy host, panic off: %v", err)
	}
	// Panic mode on: every host serves again.
	c.panicThreshold = 50
	if n := picks(t, c, 500); len(n) != 5 {
		t.Fatalf("total panic: picks %v, want all five hosts", n)
	}
	if c.Stats.Counter("lb_healthy_panic").Load() == 0 {
		t.Error("lb_healthy_panic not counted")
	}
}

// A priority with fewer healthy hosts than healthy_panic_threshold serves
// its share from all its hosts.
func TestPriorityPanicPerLevel(t *testing.T) {
	c := groupedCluster(t, []group{{priority: 0, ports: []uint32{1, 2, 3, 4}}, {priority: 1, ports: []uint32{5}}}, func(c *clusterv3.Cluster) {
		c.CommonLbConfig.HealthyPanicThreshold = &typev3.Percent{Value: 50}
	})
	for _, p := range []string{"1", "2", "3"} {
		c.ReportStatus(Endpoint{h: c.hostAt(t, p)}, 500)
	}
	// Priority 0: 1 of 4 healthy, 35 % of the load, in panic (25 % < 50 %).
	n := picks(t, c, 2000)
	if n["1"] == 0 || n["5"] < 1000 {
		t.Fatalf("picks %v: priority 0 in panic should use its ejected hosts, priority 1 take about 65 %%", n)
	}
}

// With locality_weighted_lb_config, localities of a priority take load by
// weight × availability; without it, their weights are ignored.
func TestLocalityWeights(t *testing.T) {
	weighted := func(c *clusterv3.Cluster) {
		c.CommonLbConfig.LocalityConfigSpecifier = &clusterv3.Cluster_CommonLbConfig_LocalityWeightedLbConfig_{
			LocalityWeightedLbConfig: &clusterv3.Cluster_CommonLbConfig_LocalityWeightedLbConfig{}}
	}
	groups := []group{{weight: 80, ports: []uint32{1}}, {weight: 20, ports: []uint32{2, 3}}, {weight: 0, ports: []uint32{4}}}
	c := groupedCluster(t, groups, weighted)
	n := picks(t, c, 1000)
	if n["1"] != 800 || n["2"]+n["3"] != 200 || n["2"] != n["3"] || n["4"] != 0 {
		t.Fatalf("weights 80/20/unset: %v, want 800, 100+100, 0", n)
	}
	plain := groupedCluster(t, groups, nil)
	n = picks(t, plain, 1000)
	if n["1"] != 250 || n["4"] != 250 {
		t.Fatalf("without locality_weighted_lb_config the four hosts share: %v", n)
	}

	// A locality with half its hosts ejected has 0.7 of its weight.
	c = groupedCluster(t, []group{{weight: 50, ports: []uint32{1, 2}}, {weight: 50, ports: []uint32{3, 4}}}, weighted)
	c.ReportStatus(Endpoint{h: c.hostAt(t, "1")}, 500)
	n = picks(t, c, 850)
	if n["2"] != 350 || n["3"]+n["4"] != 500 || n["1"] != 0 {
		t.Fatalf("availability 0.7 vs 1: %v, want 350 to the first locality", n)
	}
	// A whole locality ejected: the other takes everything.
	c.ReportStatus(Endpoint{h: c.hostAt(t, "2")}, 500)
	if n = picks(t, c, 100); n["3"]+n["4"] != 100 {
		t.Fatalf("first locality ejected: %v", n)
	}
}

// An overprovisioning factor of 100 spills load as soon as a host is out.
func TestOverprovisioningFactor(t *testing.T) {
	c := groupedCluster(t, []group{{priority: 0, ports: []uint32{1, 2, 3, 4}}, {priority: 1, ports: []uint32{5}}}, func(c *clusterv3.Cluster) {
		c.LoadAssignment.Policy = &endpointv3.ClusterLoadAssignment_Policy{OverprovisioningFactor: wrapperspb.UInt32(100)}
	})
	c.ReportStatus(Endpoint{h: c.hostAt(t, "1")}, 500)
	n := picks(t, c, 4000)
	if share := float64(n["5"]) / 4000; share < 0.2 || share > 0.3 {
		t.Fatalf("3 of 4 healthy at factor 1.0: priority 1 got %.2f, want 0.25", share)
	}
}

// Hosts keep their state (an ejection) when an update regroups them.
func TestPriorityUpdateKeepsHostState(t *testing.T) {
	c := groupedCluster(t, []group{{priority: 0, ports: []uint32{1, 2}}, {priority: 1, ports: []uint32{3}}}, nil)
	c.ReportStatus(Endpoint{h: c.hostAt(t, "1")}, 500)
	l, err := endpointsFrom(&endpointv3.ClusterLoadAssignment{ClusterName: "c", Endpoints: []*endpointv3.LocalityLbEndpoints{
		{Priority: 1, LbEndpoints: assignment("c", 1).Endpoints[0].LbEndpoints},
		{LbEndpoints: assignment("c", 2, 3).Endpoints[0].LbEndpoints},
	}})
	if err != nil {
		t.Fatal(err)
	}
	c.setEndpointList(l)
	if !c.hostAt(t, "1").ejected.Load() {
		t.Fatal("the ejected host lost its state")
	}
	if n := picks(t, c, 100); n["1"] != 0 || n["2"]+n["3"] != 100 {
		t.Fatalf("after the update: %v", n)
	}
}

// LEAST_REQUEST with unequal weights shares idle hosts by weight, and
// favours the host with fewer requests in flight.
func TestWeightedLeastRequest(t *testing.T) {
	s := newHostSet(endpointList{eps: []Endpoint{{Address: "a"}, {Address: "b"}, {Address: "c"}}, weights: []uint32{3, 1, 1}},
		nil, lb.Config{Policy: clusterv3.Cluster_LEAST_REQUEST})
	n := map[string]int{}
	for range 500 {
		n[s.lb.Pick(0, false, nil).ep.Address]++
	}
	if n["a"] != 300 || n["b"] != 100 || n["c"] != 100 {
		t.Fatalf("weights 3:1:1, idle: %v", n)
	}
	s.hosts[0].active.Store(5) // a: 3/6 = 0.5 against 1 for b and c
	n = map[string]int{}
	for range 500 {
		n[s.lb.Pick(0, false, nil).ep.Address]++
	}
	if n["a"] != 100 || n["b"] != 200 {
		t.Fatalf("a busy: %v, want a 100, b 200, c 200", n)
	}
	if h := s.lb.Pick(0, false, func(h *host) bool { return h.ep.Address == "c" }); h == nil || h.ep.Address != "c" {
		t.Fatalf("filtered pick: %v", h)
	}
	if h := s.lb.Pick(0, false, func(*host) bool { return false }); h != nil {
		t.Fatalf("nothing allowed, picked %v", h.ep.Address)
	}
}

// The clusters and load assignments straitd generates for locality load
// balancing are accepted, and the priorities and locality weights reach
// the host set.
func TestGeneratedLocalityConfigBuilds(t *testing.T) {
	var clusters []*clusterv3.Cluster
	readJSON(t, "../../xds/gen/testdata/locality/golden/client-a.clusters.json", func() proto.Message {
		c := &clusterv3.Cluster{}
		clusters = append(clusters, c)
		return c
	})
	var clas []*endpointv3.ClusterLoadAssignment
	readJSON(t, "../../xds/gen/testdata/locality/golden/client-a.endpoints.json", func() proto.Message {
		c := &endpointv3.ClusterLoadAssignment{}
		clas = append(clas, c)
		return c
	})
	byName := map[string]*Cluster{}
	for _, cfg := range clusters {
		c, err := build(cfg, stats.New(), nil)
		if err != nil {
			t.Fatalf("cluster %s: %v", cfg.GetName(), err)
		}
		byName[cfg.GetName()] = c
	}
	levels := map[string]int{}
	for _, cla := range clas {
		c := byName[cla.GetClusterName()]
		l, err := endpointsFrom(cla)
		if err != nil {
			t.Fatalf("assignment %s: %v", cla.GetClusterName(), err)
		}
		c.setEndpointList(l)
		levels[cla.GetClusterName()] = len(c.hosts.Load().levels)
	}
	for name, want := range map[string]int{
		"outbound|80||failover.geo.svc.cluster.local": 5, // subzone, zone, region, failover region, the rest
		"outbound|80||spread.geo.svc.cluster.local":   1, // one priority, weighted localities
		"outbound|80||plain.geo.svc.cluster.local":    0, // one priority, no locality weights
	} {
		if levels[name] != want {
			t.Errorf("%s: %d priority levels, want %d", name, levels[name], want)
		}
	}
}

func readJSON(t *testing.T, path string, next func() proto.Message) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	for _, r := range raw {
		if err := protojson.Unmarshal(r, next()); err != nil {
			t.Fatal(err)
		}
	}
}

// A retry's excluded priorities take no load while another level has a
// healthy host; the picked endpoint names its level.
func TestPickExcluding(t *testing.T) {
	c := groupedCluster(t, []group{{priority: 0, ports: []uint32{1}}, {priority: 1, ports: []uint32{2}}, {priority: 2, ports: []uint32{3}}}, nil)
	for _, tc := range []struct {
		excluded []uint32
		want     string
		priority uint32
	}{
		{nil, "127.0.0.1:1", 0},
		{[]uint32{0}, "127.0.0.1:2", 1},
		{[]uint32{0, 1}, "127.0.0.1:3", 2},
		{[]uint32{1}, "127.0.0.1:1", 0},
		{[]uint32{0, 1, 2}, "127.0.0.1:1", 0}, // nothing left: the exclusion is ignored
		{[]uint32{7}, "127.0.0.1:1", 0},
	} {
		for range 20 {
			ep, err := c.PickExcluding(netip.AddrPort{}, tc.excluded)
			if err != nil || ep.Address != tc.want || ep.Priority() != tc.priority {
				t.Fatalf("excluding %v: %s (priority %d), %v; want %s (priority %d)", tc.excluded, ep.Address, ep.Priority(), err, tc.want, tc.priority)
			}
		}
	}
	// An excluded level whose peers have no healthy host still serves.
	c.ReportStatus(Endpoint{h: c.hostAt(t, "2")}, 500)
	c.ReportStatus(Endpoint{h: c.hostAt(t, "3")}, 500)
	if ep, err := c.PickExcluding(netip.AddrPort{}, []uint32{0}); err != nil || ep.Address != "127.0.0.1:1" {
		t.Fatalf("only priority 0 healthy, excluded: %s, %v", ep.Address, err)
	}
}

// The cost of a pick with priority levels (two levels, outlier detection
// on: the health of every host is read on each pick) against one level.
func BenchmarkPickLevels(b *testing.B) {
	for _, bc := range []struct {
		name   string
		groups []group
	}{
		{"one level", []group{{ports: []uint32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}}}},
		{"two levels", []group{{ports: []uint32{1, 2, 3, 4, 5}}, {priority: 1, ports: []uint32{6, 7, 8, 9, 10}}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := groupedCluster(b, bc.groups, nil)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Pick(netip.AddrPort{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
