package route

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func to(cluster string, m *routev3.RouteMatch) *routev3.Route {
	return &routev3.Route{Match: m, Action: &routev3.Route_Route{Route: &routev3.RouteAction{
		ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: cluster}}}}
}

func prefix(p string) *routev3.RouteMatch {
	return &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: p}}
}

func testTable(t *testing.T) *Table {
	rc := &routev3.RouteConfiguration{Name: "80", VirtualHosts: []*routev3.VirtualHost{
		{Name: "reviews:80", Domains: []string{"reviews.default.svc.cluster.local", "reviews.default.svc.cluster.local:80", "reviews", "reviews:80", "10.0.0.5", "10.0.0.5:80"},
			Routes: []*routev3.Route{
				to("v2", &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"},
					Headers: []*routev3.HeaderMatcher{{Name: "end-user", HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{
						StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "jason"}}}}}}),
				to("debug", &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"},
					Headers: []*routev3.HeaderMatcher{{Name: "x-debug", HeaderMatchSpecifier: &routev3.HeaderMatcher_PresentMatch{PresentMatch: true}}}}),
				to("exact", &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: "/health"}}),
				to("api", prefix("/api/")),
				to("v1", prefix("/")),
			}},
		{Name: "wild-suffix", Domains: []string{"*.example.com"}, Routes: []*routev3.Route{to("suffix", prefix("/"))}},
		{Name: "wild-suffix-longer", Domains: []string{"*.foo.example.com"}, Routes: []*routev3.Route{to("suffix-longer", prefix("/"))}},
		{Name: "wild-prefix", Domains: []string{"api.*"}, Routes: []*routev3.Route{to("prefix", prefix("/"))}},
		{Name: "nomatch", Domains: []string{"only-api"}, Routes: []*routev3.Route{to("x", prefix("/api"))}},
		{Name: "allow_any", Domains: []string{"*"}, Routes: []*routev3.Route{to("PassthroughCluster", prefix("/"))}},
	}}
	tb, err := Compile(rc)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func TestMatch(t *testing.T) {
	tb := testTable(t)
	for _, tc := range []struct {
		host, path string
		hdr        map[string]string
		want       string // "" = no route
	}{
		{"reviews", "/", nil, "v1"},
		{"reviews:80", "/x", nil, "v1"},
		{"Reviews.Default.svc.cluster.local", "/", nil, "v1"},
		{"10.0.0.5:80", "/", nil, "v1"},
		{"reviews:8080", "/", nil, "v1"}, // unknown port: retried without the port
		{"reviews", "/", map[string]string{"end-user": "jason"}, "v2"},
		{"reviews", "/", map[string]string{"end-user": "bob"}, "v1"},
		{"reviews", "/", map[string]string{"x-debug": ""}, "debug"},
		{"reviews", "/health", nil, "exact"},
		{"reviews", "/health/x", nil, "v1"},
		{"reviews", "/api/v1", nil, "api"},
		{"reviews", "/api", nil, "v1"},
		{"a.example.com", "/", nil, "suffix"},
		{"a.foo.example.com", "/", nil, "suffix-longer"},
		{"example.com", "/", nil, "PassthroughCluster"},
		{"api.internal", "/", nil, "prefix"},
		{"unknown:9", "/", nil, "PassthroughCluster"},
		{"only-api", "/web", nil, ""},
	} {
		h := http.Header{}
		for k, v := range tc.hdr {
			h.Set(k, v)
		}
		got := ""
		if r := tb.Match(tc.host, tc.path, h); r != nil {
			got = r.PickCluster()
		}
		if got != tc.want {
			t.Errorf("Match(%q, %q, %v) = %q, want %q", tc.host, tc.path, tc.hdr, got, tc.want)
		}
	}
}

func TestWeightedClusters(t *testing.T) {
	rc := &routev3.RouteConfiguration{Name: "w", VirtualHosts: []*routev3.VirtualHost{{Name: "v", Domains: []string{"*"},
		Routes: []*routev3.Route{{Match: prefix("/"), Action: &routev3.Route_Route{Route: &routev3.RouteAction{
			ClusterSpecifier: &routev3.RouteAction_WeightedClusters{WeightedClusters: &routev3.WeightedCluster{
				Clusters: []*routev3.WeightedCluster_ClusterWeight{
					{Name: "a", Weight: wrapperspb.UInt32(80)}, {Name: "b", Weight: wrapperspb.UInt32(20)}, {Name: "c", Weight: wrapperspb.UInt32(0)},
				}}}}}}}}}}
	tb, err := Compile(rc)
	if err != nil {
		t.Fatal(err)
	}
	r := tb.Match("x", "/", nil)
	n := map[string]int{}
	for range 10000 {
		n[r.PickCluster()]++
	}
	if n["a"] < 7500 || n["a"] > 8500 || n["c"] != 0 {
		t.Errorf("80/20/0 split = %v", n)
	}
}

func TestCompileRejects(t *testing.T) {
	rc := &routev3.RouteConfiguration{Name: "bad", VirtualHosts: []*routev3.VirtualHost{{Name: "v", Domains: []string{"*"},
		Routes: []*routev3.Route{{Match: prefix("/"), Action: &routev3.Route_Redirect{Redirect: &routev3.RedirectAction{SchemeRewriteSpecifier: &routev3.RedirectAction_HttpsRedirect{HttpsRedirect: true},
			PathRewriteSpecifier: &routev3.RedirectAction_RegexRewrite{}}}}}}}}
	if _, err := Compile(rc); err == nil || !strings.Contains(err.Error(), "regex_rewrite") {
		t.Errorf("redirect regex_rewrite: %v, want a refusal naming it", err)
	}
	dup := &routev3.RouteConfiguration{Name: "dup", VirtualHosts: []*routev3.VirtualHost{
		{Name: "a", Domains: []string{"x"}}, {Name: "b", Domains: []string{"x"}}}}
	if _, err := Compile(dup); err == nil {
		t.Error("duplicate domain accepted")
	}
}

func TestRouteTimeouts(t *testing.T) {
	mk := func(a *routev3.RouteAction) *Route {
		a.ClusterSpecifier = &routev3.RouteAction_Cluster{Cluster: "c"}
		tb, err := Compile(&routev3.RouteConfiguration{VirtualHosts: []*routev3.VirtualHost{{Name: "v", Domains: []string{"*"},
			Routes: []*routev3.Route{{Match: prefix("/"), Action: &routev3.Route_Route{Route: a}}}}}})
		if err != nil {
			t.Fatal(err)
		}
		return tb.MatchHeaders("h", "/", nil)
	}
	if r := mk(&routev3.RouteAction{}); r.Timeout != 15*time.Second || r.HasIdleTimeout {
		t.Errorf("default: %v %v, want Envoy's 15 s and no idle override", r.Timeout, r.HasIdleTimeout)
	}
	if r := mk(&routev3.RouteAction{Timeout: durationpb.New(0), IdleTimeout: durationpb.New(time.Minute)}); r.Timeout != 0 || !r.HasIdleTimeout || r.IdleTimeout != time.Minute {
		t.Errorf("istio's 0s: %v %v %v", r.Timeout, r.HasIdleTimeout, r.IdleTimeout)
	}
}
