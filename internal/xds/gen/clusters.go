package gen

import (
	"cmp"
	"net/netip"
	"slices"
	"time"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	cares "github.com/envoyproxy/go-control-plane/envoy/extensions/network/dns_resolver/cares/v3"
	upstreamhttp "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/straitmesh/strait/internal/mesh"
	"github.com/straitmesh/strait/internal/meshconfig"
	"github.com/straitmesh/strait/internal/protocol"
	"github.com/straitmesh/strait/internal/proxypush"
)

// Istio's settings for DNS clusters (pilot/pkg/features:
// PILOT_DNS_CARES_UDP_MAX_QUERIES, PILOT_DNS_JITTER_DURATION).
const (
	caresResolverName  = "envoy.network.dns_resolver.cares"
	caresUDPMaxQueries = 100
	dnsJitter          = 100 * time.Millisecond
)

// httpProtocolOptionsKey is where Envoy looks for upstream HTTP options.
const httpProtocolOptionsKey = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"

// BuildClusters returns the proxy's clusters sorted by name.
func (g *Generator) BuildClusters(proxy *proxypush.Proxy) []*cluster.Cluster {
	return buildClusters(g.snapshot(), proxy)
}

func buildClusters(snap *mesh.Snapshot, proxy *proxypush.Proxy) []*cluster.Cluster {
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
		out = append(out, serviceClusters(snap, scope.Namespace, svc)...)
	}
	return append(out, specialClusters(snap)...)
}

// serviceClusters are the outbound clusters of one service, as seen from
// namespace ns (whose DestinationRule subsets apply). Their discovery type
// follows the ServiceEntry's resolution, as Istio's convertResolution has
// it: STATIC → EDS, DNS → STRICT_DNS, DNS_ROUND_ROBIN → LOGICAL_DNS, NONE →
// ORIGINAL_DST.
func serviceClusters(snap *mesh.Snapshot, ns string, svc *mesh.Service) []*cluster.Cluster {
	return serviceClustersAs(snap, ns, svc, false)
}

// serviceClustersAs is serviceClusters, for a gateway when router: a
// gateway cannot use an ORIGINAL_DST cluster (the original destination of
// its downstream connection is the gateway itself, so the request would
// loop back into it), and gets the service's endpoints over EDS instead,
// as Istio's convertResolution gives a Router.
func serviceClustersAs(snap *mesh.Snapshot, ns string, svc *mesh.Service, router bool) []*cluster.Cluster {
	var out []*cluster.Cluster
	for _, port := range svc.Ports {
		if port.Protocol == protocol.UDP {
			continue
		}
		if c := outboundCluster(snap, svc, port, "", nil, router); c != nil {
			p := trafficPolicyFor(snap, ns, svc.Hostname, "", port.Number)
			applyTrafficPolicy(c, p, port)                      // trafficpolicy.go
			applyLocalityLbConfig(c, p, snap.Mesh)              // locality.go
			applyAutoMTLS(snap, ns, svc, port.Number, "", c)    // mtls.go
			applyUpstreamProxyProtocol(c, p.GetProxyProtocol()) // trafficpolicy.go
			applyMetadataExchange(c)                            // telemetry.go
			applyServiceMetadata(c, svc)                        // clustermeta.go
			out = append(out, c)
		}
		for _, ss := range snap.SubsetsFor(ns, svc.Hostname) {
			if c := outboundCluster(snap, svc, port, ss.Name, ss.Labels, router); c != nil {
				p := trafficPolicyFor(snap, ns, svc.Hostname, ss.Name, port.Number)
				applyTrafficPolicy(c, p, port)
				applyLocalityLbConfig(c, p, snap.Mesh)
				applyAutoMTLS(snap, ns, svc, port.Number, ss.Name, c)
				applyUpstreamProxyProtocol(c, p.GetProxyProtocol())
				applyMetadataExchange(c)
				applyServiceMetadata(c, svc)
				out = append(out, c)
			}
		}
	}
	return out
}

// outboundCluster is one outbound cluster of svc, or nil for a DNS cluster
// that has no endpoint (Istio leaves those out). A router's cluster of a
// resolution NONE service is EDS (serviceClustersAs).
func outboundCluster(snap *mesh.Snapshot, svc *mesh.Service, port mesh.Port, subset string, labels map[string]string, router bool) *cluster.Cluster {
	name := OutboundClusterName(port.Number, subset, svc.Hostname)
	var c *cluster.Cluster
	switch {
	case svc.Resolution == networking.ServiceEntry_DNS, svc.Resolution == networking.ServiceEntry_DNS_ROUND_ROBIN:
		c = dnsCluster(snap, name, svc, port, labels)
		if c == nil {
			return nil
		}
	case svc.Resolution == networking.ServiceEntry_NONE && !router:
		c = &cluster.Cluster{
			Name:                 name,
			ClusterDiscoveryType: &cluster.Cluster_Type{Type: cluster.Cluster_ORIGINAL_DST},
			LbPolicy:             cluster.Cluster_CLUSTER_PROVIDED,
		}
	default:
		c = edsCluster(name, port)
	}
	c.ConnectTimeout = durationpb.New(snap.Mesh.ConnectTimeout)
	setUpstreamProtocol(c, port.Protocol)
	return c
}

// UsesEDS reports whether svc's outbound clusters get their endpoints from
// EDS (resolution STATIC); DNS clusters carry theirs in the cluster, and
// ORIGINAL_DST ones have none.
func UsesEDS(svc *mesh.Service) bool {
	switch svc.Resolution {
	case networking.ServiceEntry_DNS, networking.ServiceEntry_DNS_ROUND_ROBIN, networking.ServiceEntry_NONE:
		return false
	}
	return true
}

// dnsCluster is a STRICT_DNS (resolution DNS) or LOGICAL_DNS
// (DNS_ROUND_ROBIN) cluster with the fields Istio's cluster builder sets
// (buildCluster): the c-ares resolver, the mesh's dnsRefreshRate, the
// records' TTLs respected, and the service's endpoints as names to resolve
// (the hosts themselves when the entry lists no endpoint). A LOGICAL_DNS
// cluster resolves one name: the first endpoint's.
func dnsCluster(snap *mesh.Snapshot, name string, svc *mesh.Service, port mesh.Port, labels map[string]string) *cluster.Cluster {
	var lbs []*endpoint.LbEndpoint
	add := func(addr string, p, weight uint32, mtls bool) {
		lb := &endpoint.LbEndpoint{HostIdentifier: &endpoint.LbEndpoint_Endpoint{Endpoint: &endpoint.Endpoint{
			Address: socketAddress(addr, p),
		}}}
		if weight > 0 {
			lb.LoadBalancingWeight = wrapperspb.UInt32(weight)
		}
		if mtls {
			lb.Metadata = endpointTLSMetadata() // mtls.go
		}
		lbs = append(lbs, lb)
	}
	if len(svc.Endpoints) == 0 && svc.WorkloadSelector == nil {
		// Istio's ServiceEntry conversion: a DNS entry without endpoints
		// resolves its host on the port's targetPort, else the service
		// port (convertServiceEntryToInstances).
		if labels == nil {
			add(svc.Hostname, cmp.Or(port.TargetPort, port.Number), 0, false)
		}
	}
	for _, ep := range svc.Endpoints {
		if ep.Matches(labels) {
			add(ep.Address, ep.Ports[port.Number], ep.Weight, mtlsEndpoint(snap, ep, port.Number))
		}
	}
	if len(lbs) == 0 {
		return nil
	}
	typ := cluster.Cluster_STRICT_DNS
	if svc.Resolution == networking.ServiceEntry_DNS_ROUND_ROBIN {
		typ = cluster.Cluster_LOGICAL_DNS
		lbs = lbs[:1]
	}
	return &cluster.Cluster{
		Name:                 name,
		ClusterDiscoveryType: &cluster.Cluster_Type{Type: typ},
		LbPolicy:             cluster.Cluster_ROUND_ROBIN,
		DnsLookupFamily:      cluster.Cluster_V4_ONLY,
		TypedDnsResolverConfig: &core.TypedExtensionConfig{
			Name:        caresResolverName,
			TypedConfig: mustAny(&cares.CaresDnsResolverConfig{UdpMaxQueries: wrapperspb.UInt32(caresUDPMaxQueries)}),
		},
		DnsJitter:      durationpb.New(dnsJitter),
		DnsRefreshRate: durationpb.New(snap.Mesh.DNSRefreshRate),
		RespectDnsTtl:  true,
		LoadAssignment: &endpoint.ClusterLoadAssignment{
			ClusterName: name,
			Endpoints:   []*endpoint.LocalityLbEndpoints{{LbEndpoints: lbs}},
		},
	}
}

func specialClusters(snap *mesh.Snapshot) []*cluster.Cluster {
	timeout := durationpb.New(snap.Mesh.ConnectTimeout)
	inboundPassthrough := inboundCluster(InboundPassthroughCluster)
	inboundPassthrough.ConnectTimeout = timeout
	passthrough := &cluster.Cluster{
		Name:                 PassthroughCluster,
		ClusterDiscoveryType: &cluster.Cluster_Type{Type: cluster.Cluster_ORIGINAL_DST},
		ConnectTimeout:       timeout,
		LbPolicy:             cluster.Cluster_CLUSTER_PROVIDED,
	}
	applyMetadataExchange(passthrough)                // telemetry.go
	return defaultCircuitBreakers([]*cluster.Cluster{ // trafficpolicy.go
		passthrough,
		inboundPassthrough,
		{
			Name:                 BlackHoleCluster,
			ClusterDiscoveryType: &cluster.Cluster_Type{Type: cluster.Cluster_STATIC},
			ConnectTimeout:       timeout,
		},
	})
}

// inboundClusters are the proxy's own: one per port its workload serves
// (or per Sidecar ingress listener, ingress.go). A port's connection pool
// (the Sidecar's) limits its cluster as a DestinationRule's connectionPool
// limits an outbound cluster (Istio's buildInboundCluster, with
// SidecarScope.InboundConnectionPoolForPort).
func inboundClusters(snap *mesh.Snapshot, proxy *proxypush.Proxy) []*cluster.Cluster {
	var out []*cluster.Cluster
	for _, p := range inboundPorts(snap, proxy) {
		c := inboundCluster(InboundClusterName(p.endpointPort))
		if p.endpoint.IsValid() {
			setStaticEndpoint(c, p.endpoint) // ingress.go
		}
		c.ConnectTimeout = durationpb.New(snap.Mesh.ConnectTimeout)
		setUpstreamProtocol(c, p.protocol)
		if p.pool != nil {
			applyConnectionPool(c, p.pool, nil) // trafficpolicy.go
		}
		applyServiceMetadata(c, p.services...) // clustermeta.go
		out = append(out, c)
	}
	return defaultCircuitBreakers(out) // trafficpolicy.go
}

func adsConfigSource() *core.ConfigSource {
	return &core.ConfigSource{
		ConfigSourceSpecifier: &core.ConfigSource_Ads{Ads: &core.AggregatedConfigSource{}},
		ResourceApiVersion:    core.ApiVersion_V3,
	}
}

// rdsConfigSource is an HCM's route source: ADS with an
// initial_fetch_timeout of 0, as Istio sets it, so that a listener warms
// until its routes arrive, however long that takes, instead of starting
// after Envoy's default 15 s and answering 404 until they come.
func rdsConfigSource() *core.ConfigSource {
	cs := adsConfigSource()
	cs.InitialFetchTimeout = durationpb.New(0)
	return cs
}

func edsCluster(name string, port mesh.Port) *cluster.Cluster {
	c := &cluster.Cluster{
		Name:                 name,
		ClusterDiscoveryType: &cluster.Cluster_Type{Type: cluster.Cluster_EDS},
		EdsClusterConfig:     &cluster.Cluster_EdsClusterConfig{ServiceName: name, EdsConfig: adsConfigSource()},
		ConnectTimeout:       durationpb.New(meshconfig.DefaultConnectTimeout),
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
		ConnectTimeout:       durationpb.New(meshconfig.DefaultConnectTimeout),
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
	// endpoint, when valid, is where the port's traffic goes (a Sidecar
	// ingress listener's defaultEndpoint); else to the connection's
	// original destination.
	endpoint netip.AddrPort
	// pool is the port's connection pool, nil for none.
	pool *networking.ConnectionPoolSettings
	// services are the services whose instances on the proxy's workload
	// target the port, in the snapshot's order (istio.services metadata).
	services []*mesh.Service
	// bind, when set, is the address of the port's own listener (a
	// Sidecar ingress listener with captureMode NONE); else the port is a
	// chain of virtualInbound.
	bind string
}

// inboundPorts returns the distinct endpoint ports of the services that
// select the proxy's workload, sorted, or the ingress listeners of its
// Sidecar when it has some (ingress.go). A port that two services give
// different protocols is HTTP only if all say HTTP.
func inboundPorts(snap *mesh.Snapshot, proxy *proxypush.Proxy) []inboundPort {
	ip := proxyIP(proxy)
	if ip == "" {
		return nil
	}
	var pool *networking.ConnectionPoolSettings
	if sc := snap.ProxyScope(proxy).Sidecar; sc != nil {
		if len(sc.Sidecar().GetIngress()) > 0 {
			return ingressPorts(sc.Sidecar(), ip)
		}
		pool = sc.Sidecar().GetInboundConnectionPool()
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
			out[n-1].services = append(out[n-1].services, inst.Service)
			continue
		}
		out = append(out, inboundPort{endpointPort: inst.EndpointPort, protocol: inst.Port.Protocol, pool: pool, services: []*mesh.Service{inst.Service}})
	}
	return out
}
