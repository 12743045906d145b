package listener

import (
	"strings"
	"testing"

	udpav1 "github.com/cncf/xds/go/udpa/type/v1"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
	statspb "istio.io/api/envoy/extensions/stats"

	"github.com/straitmesh/strait/internal/proxy/route"
	"github.com/straitmesh/strait/internal/proxy/stats"
)

// TestUnknownNetworkFilterRefused: a network filter Strait does not run
// is refused by name, never skipped; so are Istio's telemetry filters
// without the config or the node metadata they need.
func TestUnknownNetworkFilterRefused(t *testing.T) {
	deps := Deps{Stats: stats.New(), Routes: route.NewStore()}
	for _, name := range []string{"istio.metadata_exchange", "envoy.filters.network.ext_authz"} {
		chain := tcpChain(t, "InboundPassthroughCluster", nil)
		chain.Filters = append([]*listenerv3.Filter{{Name: name}}, chain.Filters...)
		l := &listenerv3.Listener{Name: "virtualInbound", Address: addr("0.0.0.0:15006"), FilterChains: []*listenerv3.FilterChain{chain}}
		if _, err := Build(l, deps); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: err = %v; want one naming the filter", name, err)
		}
	}
}

// Istio's inbound TCP chain (istio.metadata_exchange, istio.stats,
// tcp_proxy, as pilot's buildInboundNetworkFilters writes it) builds with
// the node's metadata and not without; the filters must come before the
// terminal one.
func TestIstioNetworkFilters(t *testing.T) {
	v, _ := structpb.NewStruct(map[string]any{"protocol": "istio-peer-exchange", "enable_discovery": true})
	mxCfg, _ := anypb.New(&udpav1.TypedStruct{TypeUrl: "type.googleapis.com/envoy.tcp.metadataexchange.config.MetadataExchange", Value: v})
	statsCfg, _ := anypb.New(&statspb.PluginConfig{DisableHostHeaderFallback: true})
	mx := &listenerv3.Filter{Name: "istio.metadata_exchange", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mxCfg}}
	st := &listenerv3.Filter{Name: "istio.stats", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: statsCfg}}
	local, err := NewLocal(&corev3.Node{Id: "sidecar~1.2.3.4~a.ns~ns.svc.cluster.local"})
	if err != nil {
		t.Fatal(err)
	}
	build := func(d Deps, filters ...*listenerv3.Filter) error {
		chain := tcpChain(t, "inbound|80||", nil)
		chain.Filters = append(filters, chain.Filters...)
		_, err := Build(&listenerv3.Listener{Name: "virtualInbound", Address: addr("0.0.0.0:15006"), FilterChains: []*listenerv3.FilterChain{chain}}, d)
		return err
	}
	with := Deps{Stats: stats.New(), Routes: route.NewStore(), Local: local}
	if err := build(with, mx, st); err != nil {
		t.Errorf("Istio's chain: %v", err)
	}
	chain := tcpChain(t, "inbound|80||", nil)
	chain.Filters = append(chain.Filters, st)
	if _, err := Build(&listenerv3.Listener{Name: "l", Address: addr("0.0.0.0:15006"), FilterChains: []*listenerv3.FilterChain{chain}}, with); err == nil {
		t.Error("istio.stats after tcp_proxy accepted")
	}
}
