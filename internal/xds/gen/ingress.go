package gen

// A Sidecar's ingress listeners, as Istio builds them
// (pilot/pkg/networking/core/listener_inbound.go: buildInboundChainConfigs;
// cluster.go: buildInboundClustersFromSidecar). When a Sidecar has them,
// they replace the ports of the services that select the workload: each
// is a virtualInbound chain on its port, to the cluster inbound|PORT||,
// which sends to the defaultEndpoint (127.0.0.1:N or [::1]:N: the
// workload's loopback; 0.0.0.0:N: the workload's own address, from
// 127.0.0.6 as other inbound traffic), or, without one, to the
// connection's original destination. The listener's connectionPool, else
// the Sidecar's inboundConnectionPool, limits the cluster. With
// captureMode NONE the port gets a listener of its own, bound on bind or
// the workload's address, for traffic the capture rules let through (a
// port excluded from inbound capture).

import (
	"net"
	"net/netip"
	"slices"
	"strconv"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/straitmesh/strait/internal/protocol"
)

// ingressPorts are the inbound ports of a proxy at ip whose Sidecar sc has
// ingress listeners, sorted by port. A defaultEndpoint that does not
// parse (validation refuses it) leaves the port to its original
// destination.
func ingressPorts(sc *networking.Sidecar, ip string) []inboundPort {
	var out []inboundPort
	for _, in := range sc.GetIngress() {
		proto, _ := protocol.Parse(in.GetPort().GetProtocol()) // validated on load
		p := inboundPort{endpointPort: in.GetPort().GetNumber(), protocol: proto, pool: in.GetConnectionPool()}
		if p.pool == nil {
			p.pool = sc.GetInboundConnectionPool()
		}
		p.endpoint = defaultEndpoint(in.GetDefaultEndpoint(), ip)
		if in.GetCaptureMode() == networking.CaptureMode_NONE {
			// The proxy binds the port itself: on bind, else on the
			// workload's address (Istio's getSidecarInboundBindIPs).
			p.bind = in.GetBind()
			if p.bind == "" {
				p.bind = ip
			}
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b inboundPort) int { return int(a.endpointPort) - int(b.endpointPort) })
	return slices.CompactFunc(out, func(a, b inboundPort) bool { return a.endpointPort == b.endpointPort })
}

// defaultEndpoint is where an ingress listener's traffic goes: the
// loopback address and port of "127.0.0.1:N" or "[::1]:N", the proxy's
// own address ip with "0.0.0.0:N"; invalid (the original destination)
// when ep is empty or not one of those.
func defaultEndpoint(ep, ip string) netip.AddrPort {
	host, portStr, err := net.SplitHostPort(ep)
	if err != nil {
		return netip.AddrPort{}
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil || port == 0 {
		return netip.AddrPort{}
	}
	var addr netip.Addr
	switch host {
	case "127.0.0.1", "::1":
		addr = netip.MustParseAddr(host)
	case "0.0.0.0":
		if addr, err = netip.ParseAddr(ip); err != nil {
			return netip.AddrPort{}
		}
	default:
		return netip.AddrPort{}
	}
	return netip.AddrPortFrom(addr, uint16(port))
}

// setStaticEndpoint makes an inbound cluster a STATIC one with the single
// endpoint ep. A loopback endpoint is reached without the 127.0.0.6
// source, which only keeps connections to the workload's own address out
// of the capture rules (Istio's buildInboundCluster).
func setStaticEndpoint(c *cluster.Cluster, ep netip.AddrPort) {
	c.ClusterDiscoveryType = &cluster.Cluster_Type{Type: cluster.Cluster_STATIC}
	c.LbPolicy = cluster.Cluster_ROUND_ROBIN
	c.LoadAssignment = &endpoint.ClusterLoadAssignment{
		ClusterName: c.Name,
		Endpoints: []*endpoint.LocalityLbEndpoints{{LbEndpoints: []*endpoint.LbEndpoint{{
			HostIdentifier: &endpoint.LbEndpoint_Endpoint{Endpoint: &endpoint.Endpoint{
				Address: &core.Address{Address: &core.Address_SocketAddress{SocketAddress: &core.SocketAddress{
					Address:       ep.Addr().String(),
					PortSpecifier: &core.SocketAddress_PortValue{PortValue: uint32(ep.Port())},
				}}},
			}},
		}}}},
	}
	if ep.Addr().IsLoopback() {
		c.UpstreamBindConfig = nil
	}
}
