package route

import (
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func weightedRoute(t *testing.T, weights ...uint32) *Route {
	t.Helper()
	names := []string{"a", "b", "c", "d"}
	var cws []*routev3.WeightedCluster_ClusterWeight
	for i, w := range weights {
		cws = append(cws, &routev3.WeightedCluster_ClusterWeight{Name: names[i], Weight: wrapperspb.UInt32(w)})
	}
	tb, err := compileOne(&routev3.VirtualHost{Routes: []*routev3.Route{{Match: prefix("/"), Action: &routev3.Route_Route{Route: &routev3.RouteAction{
		ClusterSpecifier: &routev3.RouteAction_WeightedClusters{WeightedClusters: &routev3.WeightedCluster{Clusters: cws}}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	return tb.Match("x", "/", nil)
}

// A zero-weight cluster is left out wherever it stands, and the clusters
// after it are kept.
func TestWeightedClustersZeroWeightFirst(t *testing.T) {
	r := weightedRoute(t, 0, 1, 0, 1)
	seen := map[string]int{}
	for range 200 {
		seen[r.PickCluster()]++
	}
	// 200 fair draws between b and d: either missing has odds 2^-199.
	if seen["a"] != 0 || seen["c"] != 0 || seen["b"] == 0 || seen["d"] == 0 {
		t.Errorf("weights 0,1,0,1: picks %v, want b and d only, both", seen)
	}
}

// Weights of 1 each: every cluster is picked, the boundary between two
// clusters' ranges belonging to the later one.
func TestWeightedClustersUnitWeights(t *testing.T) {
	r := weightedRoute(t, 1, 1, 1)
	seen := map[string]int{}
	for range 300 {
		seen[r.PickCluster()]++
	}
	// 300 fair draws among three: one missing has odds below 3*(2/3)^300.
	if len(seen) != 3 || seen["a"] == 0 || seen["b"] == 0 || seen["c"] == 0 {
		t.Errorf("weights 1,1,1: picks %v, want a, b and c", seen)
	}
}
