package gen

// Istio's telemetry filters, as istiod writes them (pilot/pkg/xds/filters:
// TCPListenerMx, TCPClusterMx, SidecarInboundMetadataFilter,
// SidecarOutboundMetadataFilter; pilot/pkg/model/telemetry.go:
// generateStatsConfig; their places: core/networkfilter.go
// buildCompleteNetworkFilters, core/listener_inbound.go
// buildInboundNetworkFiltersForHTTP, core/listener_builder.go
// buildHTTPConnectionManager, core/cluster_builder.go
// applyMetadataExchange):
//
//   - every tcp_proxy chain gets istio.stats just before its tcp_proxy
//     (after the network RBAC filters), and an inbound one
//     istio.metadata_exchange first;
//   - every inbound HCM chain gets istio.metadata_exchange first;
//   - every outbound service cluster and PassthroughCluster gets the
//     istio.metadata_exchange upstream filter, which acts when the
//     connection's ALPN comes out as istio-peer-exchange (mtls.go offers
//     it);
//   - an HCM lists istio.metadata_exchange first and istio.stats after
//     CORS, before the router (withHTTPTelemetry);
//   - a gateway's listeners (Istio's ListenerClassGateway,
//     withGatewayTelemetry) are a client's: the HCM's exchange is the
//     outbound one (SidecarOutboundMetadataFilter: the gateway's metadata
//     goes upstream, the server's comes back), istio.stats takes the
//     Telemetry API's CLIENT metrics with disable_host_header_fallback
//     (Istio's disableHostHeaderFallback for gateways), and a TCP chain
//     gets istio.stats before its tcp_proxy and, for an ISTIO_MUTUAL
//     server only, istio.metadata_exchange first (gateway.go,
//     buildGatewayNetworkFiltersFromTCPRoutes' includeMx).

import (
	"slices"

	udpa "github.com/cncf/xds/go/udpa/type/v1"
	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
	statspb "istio.io/api/envoy/extensions/stats"
)

const (
	mxFilterName    = "istio.metadata_exchange"
	statsFilterName = "istio.stats"
	// The configs' types (Istio's xdsfilters MetadataExchangeTypeURL and
	// PeerMetadataTypeURL), each carried in a udpa TypedStruct.
	mxNetworkTypeURL = "type.googleapis.com/envoy.tcp.metadataexchange.config.MetadataExchange"
	mxHTTPTypeURL    = "type.googleapis.com/io.istio.http.peer_metadata.Config"
	peerExchangeALPN = "istio-peer-exchange"
)

// typedStruct is Istio's protoconv.TypedStructWithFields.
func typedStruct(typeURL string, fields map[string]any) *anypb.Any {
	v, err := structpb.NewStruct(fields)
	if err != nil {
		panic(err) // the fields are literals of this file
	}
	return mustAny(&udpa.TypedStruct{TypeUrl: typeURL, Value: v})
}

func mxNetworkConfig() *anypb.Any {
	return typedStruct(mxNetworkTypeURL, map[string]any{"protocol": peerExchangeALPN, "enable_discovery": true})
}

// statsConfig is generateStatsConfig's for the default metrics provider:
// inbound (and gateway) listeners do not fall back to the Host header for
// the destination service.
func statsConfig(inbound bool) *statspb.PluginConfig {
	return &statspb.PluginConfig{DisableHostHeaderFallback: inbound}
}

// statsFor is istio.stats' config of a listener under tp (telemetryapi.go),
// nil when its mode records no metrics.
func statsFor(tp *telemetryPolicy, l *listener.Listener) *statspb.PluginConfig {
	if tp == nil {
		return statsConfig(l.GetTrafficDirection() == core.TrafficDirection_INBOUND)
	}
	return tp.metrics[listenerMode(l)]
}

// gatewayStats is istio.stats' config of a gateway listener under tp:
// the CLIENT mode's (Istio's MetricsForClass and workloadMode for
// ListenerClassGateway), with no Host header fallback; nil when that
// mode records no metrics.
func gatewayStats(tp *telemetryPolicy) *statspb.PluginConfig {
	cfg := statsConfig(true)
	if tp != nil {
		if tp.metrics[clientMode] == nil {
			return nil
		}
		cfg = proto.CloneOf(tp.metrics[clientMode])
		cfg.DisableHostHeaderFallback = true
	}
	return cfg
}

// withGatewayTelemetry adds Istio's telemetry filters to the chains of a
// gateway listener l: on an HCM the outbound metadata exchange and
// istio.stats, on a tcp_proxy chain istio.stats before the tcp_proxy (an
// ISTIO_MUTUAL server's chain carries istio.metadata_exchange already,
// gatewayTLSChains). It returns l.
func withGatewayTelemetry(tp *telemetryPolicy, l *listener.Listener) *listener.Listener {
	stats := gatewayStats(tp)
	for _, fc := range l.GetFilterChains() {
		fs := fc.GetFilters()
		if len(fs) == 0 || hasFilter(fs, statsFilterName) {
			continue
		}
		switch last := fs[len(fs)-1]; last.GetName() {
		case tcpProxyFilterName:
			if stats != nil {
				fc.Filters = append(slices.Clone(fs[:len(fs)-1]), statsListenerFilter(stats), last)
			}
		case hcmFilterName:
			addHTTPTelemetry(last, false, stats)
		}
	}
	return l
}

func mxListenerFilter() *listener.Filter {
	return &listener.Filter{Name: mxFilterName, ConfigType: &listener.Filter_TypedConfig{TypedConfig: mxNetworkConfig()}}
}

func statsListenerFilter(cfg *statspb.PluginConfig) *listener.Filter {
	return &listener.Filter{Name: statsFilterName, ConfigType: &listener.Filter_TypedConfig{TypedConfig: mustAny(cfg)}}
}

// withTelemetry adds Istio's network telemetry filters to the chains of
// ls (the listener's traffic_direction says which side it is), istio.stats
// as tp says (nil: the default metrics); it returns ls.
func withTelemetry(tp *telemetryPolicy, ls ...*listener.Listener) []*listener.Listener {
	for _, l := range ls {
		inbound := l.GetTrafficDirection() == core.TrafficDirection_INBOUND
		stats := statsFor(tp, l)
		chains := l.GetFilterChains()
		if l.GetDefaultFilterChain() != nil {
			chains = append(chains[:len(chains):len(chains)], l.GetDefaultFilterChain())
		}
		for _, fc := range chains {
			fs := fc.GetFilters()
			if len(fs) == 0 || hasFilter(fs, statsFilterName) || hasFilter(fs, mxFilterName) {
				continue
			}
			var out []*listener.Filter
			if inbound {
				out = append(out, mxListenerFilter())
			}
			switch fs[len(fs)-1].GetName() {
			case tcpProxyFilterName:
				out = append(out, fs[:len(fs)-1]...)
				if stats != nil {
					out = append(out, statsListenerFilter(stats))
				}
				out = append(out, fs[len(fs)-1])
			case hcmFilterName:
				addHTTPTelemetry(fs[len(fs)-1], inbound, stats)
				if !inbound {
					continue
				}
				out = append(out, fs...)
			default:
				continue
			}
			fc.Filters = out
		}
	}
	return ls
}

func hasFilter(fs []*listener.Filter, name string) bool {
	for _, f := range fs {
		if f.GetName() == name {
			return true
		}
	}
	return false
}

// applyMetadataExchange is Istio's ClusterBuilder.applyMetadataExchange:
// the cluster runs the TCP metadata exchange on connections that
// negotiate it.
func applyMetadataExchange(c *cluster.Cluster) {
	c.Filters = append(c.Filters, &cluster.Filter{Name: mxFilterName, TypedConfig: mxNetworkConfig()})
}

// mxHTTPFilter is istio.metadata_exchange as an HCM lists it: on an
// inbound HCM it reads the client's headers and answers with ours
// (SidecarInboundMetadataFilter); elsewhere it sends ours upstream and
// reads the server's (SidecarOutboundMetadataFilter).
func mxHTTPFilter(inbound bool) *hcm.HttpFilter {
	side := "upstream"
	if inbound {
		side = "downstream"
	}
	cfg := typedStruct(mxHTTPTypeURL, map[string]any{
		side + "_discovery":   []any{map[string]any{"istio_headers": map[string]any{}}, map[string]any{"workload_discovery": map[string]any{}}},
		side + "_propagation": []any{map[string]any{"istio_headers": map[string]any{}}},
	})
	return &hcm.HttpFilter{Name: mxFilterName, ConfigType: &hcm.HttpFilter_TypedConfig{TypedConfig: cfg}}
}

func statsHTTPFilter(cfg *statspb.PluginConfig) *hcm.HttpFilter {
	return &hcm.HttpFilter{Name: statsFilterName, ConfigType: &hcm.HttpFilter_TypedConfig{TypedConfig: mustAny(cfg)}}
}

// addHTTPTelemetry lists Istio's HTTP telemetry filters in an HCM
// network filter's http_filters (its typed_config decoded and encoded
// again, as addAccessLog does); stats nil lists no istio.stats.
func addHTTPTelemetry(f *listener.Filter, inbound bool, stats *statspb.PluginConfig) {
	h := &hcm.HttpConnectionManager{}
	if f.GetTypedConfig().UnmarshalTo(h) != nil {
		return
	}
	for _, hf := range h.GetHttpFilters() {
		if hf.GetName() == mxFilterName || hf.GetName() == statsFilterName {
			return
		}
	}
	withHTTPTelemetry(h, inbound, stats)
	f.ConfigType = &listener.Filter_TypedConfig{TypedConfig: mustAny(h)}
}

// withHTTPTelemetry lists Istio's HTTP telemetry filters in an HCM's
// http_filters: istio.metadata_exchange first (before authentication and
// RBAC, istio/istio#41066), istio.stats (when stats is not nil) last
// before the router.
func withHTTPTelemetry(m *hcm.HttpConnectionManager, inbound bool, stats *statspb.PluginConfig) {
	fs := m.GetHttpFilters()
	if len(fs) == 0 {
		return
	}
	out := make([]*hcm.HttpFilter, 0, len(fs)+2)
	out = append(out, mxHTTPFilter(inbound))
	out = append(out, fs[:len(fs)-1]...)
	if stats != nil {
		out = append(out, statsHTTPFilter(stats))
	}
	out = append(out, fs[len(fs)-1])
	m.HttpFilters = out
}
