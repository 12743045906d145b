package gen

import (
	"slices"
	"testing"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
)

func filterNames(fs []*listener.Filter) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.GetName())
	}
	return out
}

// Istio's places (buildCompleteNetworkFilters,
// buildInboundNetworkFiltersForHTTP): inbound tcp_proxy chains get the
// exchange first and istio.stats after the RBAC filters; inbound HCM
// chains the exchange; outbound tcp_proxy chains istio.stats only;
// running it twice adds nothing.
func TestWithTelemetryOrder(t *testing.T) {
	rbac := &listener.Filter{Name: "envoy.filters.network.rbac"}
	tcp := &listener.Filter{Name: tcpProxyFilterName}
	h := &listener.Filter{Name: hcmFilterName}
	in := &listener.Listener{TrafficDirection: core.TrafficDirection_INBOUND, FilterChains: []*listener.FilterChain{
		{Filters: []*listener.Filter{rbac, tcp}}, {Filters: []*listener.Filter{h}},
	}}
	out := &listener.Listener{TrafficDirection: core.TrafficDirection_OUTBOUND, FilterChains: []*listener.FilterChain{
		{Filters: []*listener.Filter{tcp}}, {Filters: []*listener.Filter{h}},
	}}
	withTelemetry(nil, in, out)
	withTelemetry(nil, in, out)
	for _, c := range []struct {
		got  []*listener.Filter
		want []string
	}{
		{in.FilterChains[0].Filters, []string{mxFilterName, "envoy.filters.network.rbac", statsFilterName, tcpProxyFilterName}},
		{in.FilterChains[1].Filters, []string{mxFilterName, hcmFilterName}},
		{out.FilterChains[0].Filters, []string{statsFilterName, tcpProxyFilterName}},
		{out.FilterChains[1].Filters, []string{hcmFilterName}},
	} {
		if got := filterNames(c.got); !slices.Equal(got, c.want) {
			t.Errorf("got %v, want %v", got, c.want)
		}
	}
}

// The HCM's list: the exchange first, istio.stats just before the router.
func TestWithHTTPTelemetry(t *testing.T) {
	m := &hcm.HttpConnectionManager{HttpFilters: []*hcm.HttpFilter{{Name: "envoy.filters.http.rbac"}, {Name: faultFilterName}, {Name: corsFilterName}, {Name: routerFilterName}}}
	withHTTPTelemetry(m, true, statsConfig(true))
	var got []string
	for _, f := range m.HttpFilters {
		got = append(got, f.GetName())
	}
	want := []string{mxFilterName, "envoy.filters.http.rbac", faultFilterName, corsFilterName, statsFilterName, routerFilterName}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
