package route

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func compileRouteT(t *testing.T, r *routev3.Route) *Route {
	t.Helper()
	tb, err := compileOne(&routev3.VirtualHost{Routes: []*routev3.Route{r}})
	if err != nil {
		t.Fatal(err)
	}
	return tb.VirtualHostFor("x").Routes[0]
}

// HasRequestMutation is true when any one of the route's path rewrite,
// host rewrite, request header edits, or a weighted cluster's host rewrite
// or header edits is there, and false with none.
func TestHasRequestMutation(t *testing.T) {
	addHeader := []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "x-a", Value: "1"}}}
	action := func(a *routev3.RouteAction) *routev3.Route {
		if a.ClusterSpecifier == nil {
			a.ClusterSpecifier = &routev3.RouteAction_Cluster{Cluster: "c"}
		}
		return &routev3.Route{Match: prefix("/"), Action: &routev3.Route_Route{Route: a}}
	}
	weighted := func(cw *routev3.WeightedCluster_ClusterWeight) *routev3.RouteAction {
		cw.Name, cw.Weight = "w1", wrapperspb.UInt32(1)
		return &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_WeightedClusters{WeightedClusters: &routev3.WeightedCluster{
			Clusters: []*routev3.WeightedCluster_ClusterWeight{{Name: "w0", Weight: wrapperspb.UInt32(1)}, cw}}}}
	}
	withHeaders := action(&routev3.RouteAction{})
	withHeaders.RequestHeadersToAdd = addHeader
	withRemove := action(&routev3.RouteAction{})
	withRemove.RequestHeadersToRemove = []string{"x-b"}
	withResponseHeaders := action(&routev3.RouteAction{})
	withResponseHeaders.ResponseHeadersToAdd = addHeader

	for _, tc := range []struct {
		name string
		r    *routev3.Route
		want bool
	}{
		{"nothing", action(&routev3.RouteAction{}), false},
		{"response headers only", withResponseHeaders, false},
		{"weighted, plain", action(weighted(&routev3.WeightedCluster_ClusterWeight{})), false},
		{"prefix_rewrite", action(&routev3.RouteAction{PrefixRewrite: "/v2/"}), true},
		{"regex_rewrite", action(&routev3.RouteAction{RegexRewrite: &matcherv3.RegexMatchAndSubstitute{
			Pattern: &matcherv3.RegexMatcher{Regex: "^/a"}, Substitution: "/b"}}), true},
		{"host_rewrite_literal", action(&routev3.RouteAction{HostRewriteSpecifier: &routev3.RouteAction_HostRewriteLiteral{HostRewriteLiteral: "h"}}), true},
		{"request_headers_to_add", withHeaders, true},
		{"request_headers_to_remove", withRemove, true},
		{"weighted host_rewrite_literal", action(weighted(&routev3.WeightedCluster_ClusterWeight{
			HostRewriteSpecifier: &routev3.WeightedCluster_ClusterWeight_HostRewriteLiteral{HostRewriteLiteral: "h"}})), true},
		{"weighted request_headers_to_add", action(weighted(&routev3.WeightedCluster_ClusterWeight{RequestHeadersToAdd: addHeader})), true},
	} {
		if got := compileRouteT(t, tc.r).HasRequestMutation(); got != tc.want {
			t.Errorf("%s: HasRequestMutation() = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// MatchedLen is the matched prefix for a prefix (or path_separated_prefix)
// match, capped at the path, and the whole path for a path or regex match.
func TestMatchedLen(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    *routev3.RouteMatch
		path string
		want int
	}{
		{"prefix", prefix("/api/"), "/api/users", 5},
		{"empty prefix", prefix(""), "/x", 0},
		{"path", &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: "/health"}}, "/health", 7},
		{"regex", &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: "/v[0-9]+/.*"}}}, "/v1/items", 9},
		{"path_separated_prefix", &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_PathSeparatedPrefix{PathSeparatedPrefix: "/api"}}, "/api/users", 4},
		{"path_separated_prefix, whole path", &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_PathSeparatedPrefix{PathSeparatedPrefix: "/api"}}, "/api", 4},
	} {
		r := compileRouteT(t, to("c", tc.m))
		if got := r.MatchedLen(tc.path); got != tc.want {
			t.Errorf("%s: MatchedLen(%q) = %d, want %d", tc.name, tc.path, got, tc.want)
		}
	}
}
