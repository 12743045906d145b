package hcm

import (
	"io"
	"strings"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	faultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

// TestPerRouteFilterConfig: a route's typed_per_filter_config overrides
// the filter's own config (an abort of another status) or turns the
// filter off (Envoy's FilterConfig{disabled: true}), on the route alone
// and on every codec (route.TestPerFilterMerge: a virtual host's).
func TestPerRouteFilterConfig(t *testing.T) {
	be := headerEcho(t)
	abort := func(code uint32) *faultv3.HTTPFault {
		return &faultv3.HTTPFault{Abort: &faultv3.FaultAbort{
			ErrorType: &faultv3.FaultAbort_HttpStatus{HttpStatus: code}, Percentage: hundred(100)}}
	}
	withPerFilter := func(r *routev3.Route, a *anypb.Any) *routev3.Route {
		r.TypedPerFilterConfig = map[string]*anypb.Any{"envoy.filters.http.fault": a}
		return r
	}
	off := mustAnyT(t, &routev3.FilterConfig{Disabled: true})
	routes := []*routev3.Route{
		withPerFilter(prefixRoute("/override", "be"), mustAnyT(t, abort(429))),
		withPerFilter(prefixRoute("/off", "be"), off),
		withPerFilter(prefixRoute("/wrapped", "be"), mustAnyT(t, &routev3.FilterConfig{Config: mustAnyT(t, abort(418))})),
		prefixRoute("/", "be"),
	}
	addr := startH2Proxy(t, CodecStrait, routes, func(h *hcmv3.HttpConnectionManager) {
		fault := &hcmv3.HttpFilter{Name: "envoy.filters.http.fault", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAnyT(t, abort(503))}}
		h.HttpFilters = append([]*hcmv3.HttpFilter{fault}, h.HttpFilters...)
	}, staticCluster("be", strings.TrimPrefix(be.URL, "http://")))
	for _, cc := range chainClients {
		client := cc.client()
		for path, want := range map[string]int{"/default": 503, "/override": 429, "/off": 200, "/wrapped": 418} {
			resp, err := client.Get("http://" + addr + path)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body) // drained for reuse; the body is not under test
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("%s %s: %d, want %d", cc.name, path, resp.StatusCode, want)
			}
		}
	}
}

// TestPerRouteFilterConfigRefusals: per-route config the filters cannot
// honour is refused when the route table is compiled, naming the filter.
func TestPerRouteFilterConfigRefusals(t *testing.T) {
	for name, a := range map[string]*anypb.Any{
		"envoy.filters.http.rbac":      mustAnyT(t, &faultv3.HTTPFault{}), // RBAC takes no per-route config here
		"envoy.filters.http.fault":     mustAnyT(t, &routev3.FilterConfig{Disabled: true, Config: mustAnyT(t, &faultv3.HTTPFault{})}),
		"envoy.filters.http.jwt_authn": mustAnyT(t, &routev3.FilterConfig{Config: mustAnyT(t, &faultv3.HTTPFault{})}),
	} {
		r := prefixRoute("/", "be")
		r.TypedPerFilterConfig = map[string]*anypb.Any{name: a}
		_, err := Build(&hcmv3.HttpConnectionManager{
			StatPrefix: "test",
			RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
				Name: "r", VirtualHosts: []*routev3.VirtualHost{{Name: "all", Domains: []string{"*"}, Routes: []*routev3.Route{r}}}}},
			HttpFilters: []*hcmv3.HttpFilter{{Name: routerFilter}},
		}, nil)
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v, want an error naming it", name, err)
		}
	}
	// An optional per-route config of a filter Strait does not run is
	// skipped, as Envoy skips it.
	r := prefixRoute("/", "be")
	r.TypedPerFilterConfig = map[string]*anypb.Any{"envoy.filters.http.lua": mustAnyT(t, &routev3.FilterConfig{IsOptional: true, Config: mustAnyT(t, &faultv3.HTTPFault{})})}
	if _, err := Build(&hcmv3.HttpConnectionManager{
		StatPrefix: "test",
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
			Name: "r", VirtualHosts: []*routev3.VirtualHost{{Name: "all", Domains: []string{"*"}, Routes: []*routev3.Route{r}}}}},
		HttpFilters: []*hcmv3.HttpFilter{{Name: routerFilter}},
	}, nil); err != nil {
		t.Errorf("optional per-route config of an unknown filter: %v", err)
	}
}
