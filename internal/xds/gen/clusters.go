package gen

import (
	"cmp"
	"slices"
	"time"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	upstreamhttp "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/straitmesh/strait/internal/mesh"
	"github.com/straitmesh/strait/internal/model"
	"github.com/straitmesh/strait/internal/protocol"
)

const connectTimeout = 10 * time.Second

// httpProtocolOptionsKey is where Envoy looks for upstream HTTP options.
const httpProtocolOptionsKey = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"

// BuildClusters returns the proxy's clusters sorted by name.
func (g *Generator) BuildClusters(proxy *model.Proxy) []*cluster.Cluster {
	return buildClusters(g.snapshot(), proxy)
}

func buildClusters(snap *mesh.Snapshot, proxy *model.Proxy) []*cluster.Cluster {
	out := outboundClusters(snap, snap.ProxyScope(proxy))
	out = append(out, inboundClusters(snap, proxy)...)
	slices.SortFunc(out, func(a, b *cluster.Cluster) int { return cmp.Compare(a.Name, b.Name) })
	return slices.CompactFunc(out, func(a, b *cluster.Cluster) bool { return a.Name == b.Name })
}

// outboundClusters are the clusters every proxy of a scope shares: one per
// service port and subset, and the special clusters.
func outboundClusters(snap *mesh.Snapshot, scope *mesh.Scope) []*cluster.Cluster {
	var out []*cluster.Cluster
	for _, svc := range scope.Services {
		out = append(out, serviceClusters(snap, svc)...)
	}
	return append(out, specialClusters()...)
}

// serviceClusters are the outbound clusters of one service.
func serviceClusters(snap *mesh.Snapshot, svc *mesh.Service) []*cluster.Cluster {
	var out []*cluster.Cluster
	for _, port := range svc.Ports {
		if port.Protocol == protocol.UDP {
			continue
		}
		c := edsCluster(OutboundClusterName(port.Number, "", svc.Hostname), port)
		applyAutoMTLS(snap, svc, port.Number, "", c) // mtls.go
		out = append(out, c)
		for _, ss := range snap.Subsets(svc.Hostname) {
			c := edsCluster(OutboundClusterName(port.Number, ss.Name, svc.Hostname), port)
			applyAutoMTLS(snap, svc, port.Number, ss.Name, c)
			out = append(out, c)
		}
	}
	return out
}

func specialClusters() []*cluster.Cluster {
	return []*cluster.Cluster{
		{
			Name:                 PassthroughCluster,
			ClusterDiscoveryType: &cluster.Cluster_Type{Type: cluster.Cluster_ORIGINAL_DST},
			ConnectTimeout:       durationpb.New(connectTimeout),
			LbPolicy:             cluster.Cluster_CLUSTER_PROVIDED,
		},
		inboundCluster(InboundPassthroughCluster),
		{
			Name:                 BlackHoleCluster,
			ClusterDiscoveryType: &cluster.Cluster_Type{Type: cluster.Cluster_STATIC},
			ConnectTimeout:       durationpb.New(connectTimeout),
		},
	}
}

// inboundClusters are the proxy's own: one per port its workload serves.
func inboundClusters(snap *mesh.Snapshot, proxy *model.Proxy) []*cluster.Cluster {
	var out []*cluster.Cluster
	for _, p := range inboundPorts(snap, proxy) {
		c := inboundCluster(InboundClusterName(p.endpointPort))
		setUpstreamProtocol(c, p.protocol)
		out = append(out, c)
	}
	return out
}

func adsConfigSource() *core.ConfigSource {
	return &core.ConfigSource{
		ConfigSourceSpecifier: &core.ConfigSource_Ads{Ads: &core.AggregatedConfigSource{}},
		ResourceApiVersion:    core.ApiVersion_V3,
	}
}

func edsCluster(name string, port mesh.Port) *cluster.Cluster {
	c := &cluster.Cluster{
		Name:                 name,
		ClusterDiscoveryType: &cluster.Cluster_Type{Type: cluster.Cluster_EDS},
		EdsClusterConfig:     &cluster.Cluster_EdsClusterConfig{ServiceName: name, EdsConfig: adsConfigSource()},
		ConnectTimeout:       durationpb.New(connectTimeout),
		LbPolicy:             cluster.Cluster_ROUND_ROBIN,
	}
	setUpstreamProtocol(c, port.Protocol)
	return c
}

// setUpstreamProtocol makes c speak HTTP/2 to its endpoints when the port
// says so, on outbound and inbound clusters alike (Istio's cluster builder
// setUpstreamProtocol).
func setUpstreamProtocol(c *cluster.Cluster, p protocol.Protocol) {
	if !p.IsHTTP2() {
		return
	}
	c.TypedExtensionProtocolOptions = map[string]*anypb.Any{
		httpProtocolOptionsKey: mustAny(&upstreamhttp.HttpProtocolOptions{
			UpstreamProtocolOptions: &upstreamhttp.HttpProtocolOptions_ExplicitHttpConfig_{
				ExplicitHttpConfig: &upstreamhttp.HttpProtocolOptions_ExplicitHttpConfig{
					ProtocolConfig: &upstreamhttp.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{
						Http2ProtocolOptions: &core.Http2ProtocolOptions{},
					},
				},
			},
		}),
	}
}

// inboundCluster forwards to the original destination (the workload) from
// 127.0.0.6, which the iptables rules do not capture again.
func inboundCluster(name string) *cluster.Cluster {
	return &cluster.Cluster{
		Name:                 name,
		ClusterDiscoveryType: &cluster.Cluster_Type{Type: cluster.Cluster_ORIGINAL_DST},
		ConnectTimeout:       durationpb.New(connectTimeout),
		LbPolicy:             cluster.Cluster_CLUSTER_PROVIDED,
		UpstreamBindConfig: &core.BindConfig{
			SourceAddress: &core.SocketAddress{
				Address:       InboundPassthroughBindAddress,
				PortSpecifier: &core.SocketAddress_PortValue{PortValue: 0},
			},
		},
	}
}

// inboundPort is one port the proxy's workload serves.
type inboundPort struct {
	endpointPort uint32
	protocol     protocol.Protocol
}

// inboundPorts returns the distinct endpoint ports of the services that
// select the proxy's workload, sorted. A port that two services give
// different protocols is HTTP only if all say HTTP.
func inboundPorts(snap *mesh.Snapshot, proxy *model.Proxy) []inboundPort {
	ip := proxyIP(proxy)
	if ip == "" {
		return nil
	}
	var out []inboundPort
	for _, inst := range snap.InboundInstances(ip) {
		if inst.Port.Protocol == protocol.UDP || inst.EndpointPort == 0 {
			continue
		}
		if n := len(out); n > 0 && out[n-1].endpointPort == inst.EndpointPort {
			if !inst.Port.Protocol.IsHTTP() {
				out[n-1].protocol = protocol.TCP
			}
			continue
		}
		out = append(out, inboundPort{endpointPort: inst.EndpointPort, protocol: inst.Port.Protocol})
	}
	return out
}
