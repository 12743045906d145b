package bootstrap

import (
	"fmt"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/straitmesh/strait/internal/locality"
)

// refBuild is Build as it was written with go-control-plane's types
// before the agent stopped linking them: the reference the JSON document
// must equal, field for field.
func refBuild(o Options) (*bootstrapv3.Bootstrap, error) {
	if o.PrometheusPort == 0 {
		o.PrometheusPort = DefaultPrometheusPort
	}
	md := &structpb.Struct{Fields: make(map[string]*structpb.Value, len(o.Metadata))}
	for k, v := range o.Metadata {
		md.Fields[k] = structpb.NewStringValue(v)
	}
	if len(o.Labels) > 0 {
		labels := &structpb.Struct{Fields: make(map[string]*structpb.Value, len(o.Labels))}
		for k, v := range o.Labels {
			if k != podTemplateHash {
				labels.Fields[k] = structpb.NewStringValue(v)
			}
		}
		md.Fields["LABELS"] = structpb.NewStructValue(labels)
	}
	http2, err := anypb.New(&httpv3.HttpProtocolOptions{
		UpstreamProtocolOptions: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_{
			ExplicitHttpConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig{
				ProtocolConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{
					Http2ProtocolOptions: &corev3.Http2ProtocolOptions{},
				},
			},
		},
	})
	if err != nil {
		return nil, err
	}
	statsListener, err := refPrometheusListener(o.PrometheusPort)
	if err != nil {
		return nil, err
	}
	ads := func() *corev3.ConfigSource {
		return &corev3.ConfigSource{
			ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
			ResourceApiVersion:    corev3.ApiVersion_V3,
		}
	}
	b := &bootstrapv3.Bootstrap{
		Node: &corev3.Node{Id: o.NodeID, Cluster: o.Cluster, Metadata: md, Locality: refNodeLocality(o.Locality)},
		Admin: &bootstrapv3.Admin{
			Address: refSocketAddress("127.0.0.1", o.AdminPort),
		},
		DynamicResources: &bootstrapv3.Bootstrap_DynamicResources{
			AdsConfig: &corev3.ApiConfigSource{
				ApiType:             corev3.ApiConfigSource_GRPC,
				TransportApiVersion: corev3.ApiVersion_V3,
				GrpcServices: []*corev3.GrpcService{{
					TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{
						EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: XDSClusterName},
					},
				}},
				SetNodeOnFirstMessageOnly: true,
			},
			CdsConfig: ads(),
			LdsConfig: ads(),
		},
		StaticResources: &bootstrapv3.Bootstrap_StaticResources{
			Clusters: []*clusterv3.Cluster{
				{
					Name:                 XDSClusterName,
					ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
					ConnectTimeout:       durationpb.New(time.Second),
					LbPolicy:             clusterv3.Cluster_ROUND_ROBIN,
					LoadAssignment: refLoadAssignment(XDSClusterName, &corev3.Address{
						Address: &corev3.Address_Pipe{Pipe: &corev3.Pipe{Path: o.XDSSocketPath}},
					}),
					TypedExtensionProtocolOptions: map[string]*anypb.Any{httpProtocolOptionsKey: http2},
				},
				{
					Name:                 PrometheusClusterName,
					ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
					ConnectTimeout:       durationpb.New(250 * time.Millisecond),
					LbPolicy:             clusterv3.Cluster_ROUND_ROBIN,
					LoadAssignment:       refLoadAssignment(PrometheusClusterName, refSocketAddress("127.0.0.1", o.AdminPort)),
				},
			},
			Listeners: []*listenerv3.Listener{statsListener},
		},
	}
	if o.SDSSocketPath != "" {
		// As Istio's bootstrap (tools/packaging/common/envoy_bootstrap.json
		// "sds-grpc"): a static HTTP/2 cluster on the workload socket.
		b.StaticResources.Clusters = append(b.StaticResources.Clusters, &clusterv3.Cluster{
			Name:                 SDSClusterName,
			ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
			ConnectTimeout:       durationpb.New(time.Second),
			LbPolicy:             clusterv3.Cluster_ROUND_ROBIN,
			LoadAssignment: refLoadAssignment(SDSClusterName, &corev3.Address{
				Address: &corev3.Address_Pipe{Pipe: &corev3.Pipe{Path: o.SDSSocketPath}},
			}),
			TypedExtensionProtocolOptions: map[string]*anypb.Any{httpProtocolOptionsKey: http2},
		})
	}
	if err := b.ValidateAll(); err != nil {
		return nil, fmt.Errorf("bootstrap: %w", err)
	}
	return b, nil
}

func refPrometheusListener(port int) (*listenerv3.Listener, error) {
	router, err := anypb.New(&routerv3.Router{})
	if err != nil {
		return nil, err
	}
	hcm := &hcmv3.HttpConnectionManager{
		StatPrefix: "stats",
		CodecType:  hcmv3.HttpConnectionManager_AUTO,
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{
			RouteConfig: &routev3.RouteConfiguration{
				VirtualHosts: []*routev3.VirtualHost{{
					Name:    "backend",
					Domains: []string{"*"},
					Routes: []*routev3.Route{{
						Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: PrometheusPath}},
						Action: &routev3.Route_Route{Route: &routev3.RouteAction{
							ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: PrometheusClusterName},
						}},
					}},
				}},
			},
		},
		HttpFilters: []*hcmv3.HttpFilter{{
			Name:       "envoy.filters.http.router",
			ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: router},
		}},
	}
	if err := hcm.ValidateAll(); err != nil {
		return nil, fmt.Errorf("stats listener HCM: %w", err)
	}
	hcmAny, err := anypb.New(hcm)
	if err != nil {
		return nil, err
	}
	return &listenerv3.Listener{
		Name:    PrometheusListener,
		Address: refSocketAddress("0.0.0.0", port),
		FilterChains: []*listenerv3.FilterChain{{
			Filters: []*listenerv3.Filter{{
				Name:       "envoy.filters.network.http_connection_manager",
				ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: hcmAny},
			}},
		}},
	}, nil
}

func refSocketAddress(ip string, port int) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Protocol:      corev3.SocketAddress_TCP,
		Address:       ip,
		PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(port)},
	}}}
}

func refLoadAssignment(cluster string, addr *corev3.Address) *endpointv3.ClusterLoadAssignment {
	return &endpointv3.ClusterLoadAssignment{
		ClusterName: cluster,
		Endpoints: []*endpointv3.LocalityLbEndpoints{{
			LbEndpoints: []*endpointv3.LbEndpoint{{
				HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: addr}},
			}},
		}},
	}
}

// nodeLocality is node.locality for "region/zone/subzone"; nil for "".
func refNodeLocality(s string) *corev3.Locality {
	if s == "" {
		return nil
	}
	l := locality.Parse(s)
	return &corev3.Locality{Region: l.Region, Zone: l.Zone, SubZone: l.Subzone}
}
