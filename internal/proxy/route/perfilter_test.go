package route

import (
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	faultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/straitmesh/strait/internal/proxy/filters/http/cors"
	"github.com/straitmesh/strait/internal/proxy/filters/http/fault"
	"github.com/straitmesh/strait/internal/proxy/http1"
	"github.com/straitmesh/strait/internal/proxy/httpfilter"
)

// testParsers are the fault and CORS filters' per-route parsers (the
// registry, which would give them, imports this package's importers).
type testParsers struct{}

func (testParsers) PerRouteParser(name, _ string) httpfilter.PerRouteParser {
	switch name {
	case fault.Name:
		return fault.Factory{}
	case cors.Name:
		return cors.Factory{}
	}
	return nil
}

// TestPerFilterMerge: a virtual host's typed_per_filter_config reaches
// its routes; a route's replaces it (fault) or is merged over it field by
// field (CORS), and a route may turn off what its virtual host set.
func TestPerFilterMerge(t *testing.T) {
	anyOf := func(m proto.Message) *anypb.Any {
		a, err := anypb.New(m)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	abort := func(code uint32) *faultv3.HTTPFault {
		return &faultv3.HTTPFault{Abort: &faultv3.FaultAbort{ErrorType: &faultv3.FaultAbort_HttpStatus{HttpStatus: code},
			Percentage: &typev3.FractionalPercent{Numerator: 100}}}
	}
	route := func(prefix string, pf map[string]*anypb.Any) *routev3.Route {
		return &routev3.Route{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: prefix}},
			Action:               &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "c"}}},
			TypedPerFilterConfig: pf}
	}
	tab, err := CompileWith(&routev3.RouteConfiguration{Name: "r", VirtualHosts: []*routev3.VirtualHost{{
		Name: "vh", Domains: []string{"*"},
		TypedPerFilterConfig: map[string]*anypb.Any{fault.Name: anyOf(abort(503))},
		Routes: []*routev3.Route{
			route("/inherit", nil),
			route("/override", map[string]*anypb.Any{fault.Name: anyOf(abort(429))}),
			route("/off", map[string]*anypb.Any{fault.Name: anyOf(&routev3.FilterConfig{Disabled: true})}),
		}}}}, testParsers{})
	if err != nil {
		t.Fatal(err)
	}
	status := func(path string) any {
		rt := tab.Match("h", path, nil)
		switch c := rt.Filters.PerFilterConfig(fault.Name).(type) {
		case *fault.Policy:
			return c.Decide(&http1.Headers{}).Status
		case httpfilter.DisabledConfig:
			return "disabled"
		default:
			return c
		}
	}
	for path, want := range map[string]any{"/inherit": 503, "/override": 429, "/off": "disabled"} {
		if got := status(path); got != want {
			t.Errorf("%s: %v, want %v", path, got, want)
		}
	}
}

// TestFilterNamesMatchFilters holds route's copies of the CORS and fault
// filter names (which it names in refusals without importing the filters)
// to the names those filters register under.
func TestFilterNamesMatchFilters(t *testing.T) {
	if corsFilterName != cors.Name {
		t.Errorf("corsFilterName = %q, cors.Name = %q", corsFilterName, cors.Name)
	}
	if faultFilterName != fault.Name {
		t.Errorf("faultFilterName = %q, fault.Name = %q", faultFilterName, fault.Name)
	}
}
