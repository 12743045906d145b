package gen

// VirtualService tcp and tls routes on a service's outbound TCP listener,
// as Istio builds them (pilot/pkg/networking/core/tls.go:
// buildSidecarOutboundTCPFilterChainOpts, buildSidecarOutboundTLSFilterChainOpts;
// networkfilter.go: buildOutboundNetworkFilters). A tcp rule becomes a
// filter chain (matched on destinationSubnets, else the default chain)
// whose tcp_proxy goes to one cluster or to weighted_clusters; a tls rule
// on a TLS or HTTPS port becomes a filter chain matched on the ClientHello's
// SNI (server_names), which the tls_inspector listener filter reads.

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsinspector "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	tcpproxy "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/straitmesh/strait/internal/istioconfig"
	"github.com/straitmesh/strait/internal/mesh"
	"github.com/straitmesh/strait/internal/protocol"
)

const tlsInspectorFilterName = "envoy.filters.listener.tls_inspector"

// l4Source is the proxy side of a tcp or tls match: the proxies' namespace
// and, for one proxy, its workload's labels. Listeners shared by a scope
// are built without labels (labelsKnown false); a match on sourceLabels
// then does not apply, and the listener is marked as depending on labels
// so that each proxy gets its own (Generate).
type l4Source struct {
	ns          string
	labels      map[string]string
	labelsKnown bool
	// usedLabels is set when a match on sourceLabels was met.
	usedLabels bool
}

// labelListener names a listener built per proxy: a TCP service port on
// one address (a VIP, or an egress listener's bind) whose routes match on
// sourceLabels.
type labelListener struct {
	svc  *mesh.Service
	port mesh.Port
	addr string
	// bind is set for an egress listener the proxy binds itself
	// (captureMode NONE).
	bind bool
}

// build is the listener for the proxies src describes.
func (ll labelListener) build(snap *mesh.Snapshot, src *l4Source) *listener.Listener {
	l := tcpServiceListener(snap, ll.svc, ll.port, ll.addr, src)
	if ll.bind {
		l.BindToPort = wrapperspb.Bool(true)
	}
	return l
}

// tcpServiceListener is the outbound listener of a TCP (or TLS) service
// port on one VIP, with the filter chains of the service's tcp or tls
// routes for the proxies src describes.
func tcpServiceListener(snap *mesh.Snapshot, svc *mesh.Service, port mesh.Port, vip string, src *l4Source) *listener.Listener {
	name := fmt.Sprintf("%s_%d", vip, port.Number)
	defaultCluster := OutboundClusterName(port.Number, "", svc.Hostname)
	if len(svc.Ports) == 1 {
		defaultCluster = OutboundClusterName(svc.Ports[0].Number, "", svc.Hostname)
	}
	var chains []*listener.FilterChain
	var routed bool // a default chain is not needed
	if port.Protocol == protocol.TLS || port.Protocol == protocol.HTTPS {
		// With tls routes, a connection whose SNI matches none of them
		// has no chain (Istio adds the default chain only without them).
		chains = tlsRouteChains(snap, svc, port.Number, src)
		routed = len(chains) > 0
	} else {
		chains = tcpRouteChains(snap, svc, port.Number, src)
		routed = slices.ContainsFunc(chains, func(c *listener.FilterChain) bool { return c.FilterChainMatch == nil })
	}
	if !routed {
		chains = append(chains, &listener.FilterChain{
			Filters: []*listener.Filter{tcpProxyFilter("outbound|"+name, defaultCluster)},
		})
	}
	l := &listener.Listener{
		Name:             name,
		Address:          socketAddress(vip, port.Number),
		BindToPort:       wrapperspb.Bool(false),
		FilterChains:     chains,
		TrafficDirection: core.TrafficDirection_OUTBOUND,
	}
	if slices.ContainsFunc(chains, func(c *listener.FilterChain) bool { return len(c.GetFilterChainMatch().GetServerNames()) > 0 }) {
		l.ListenerFilters = []*listener.ListenerFilter{{
			Name:       tlsInspectorFilterName,
			ConfigType: &listener.ListenerFilter_TypedConfig{TypedConfig: mustAny(&tlsinspector.TlsInspector{})},
		}}
	}
	return l
}

// l4MatchApplies is Istio's matchTCP/matchTLS for the proxies of src on
// port: the mesh gateway, the port, the source namespace, and the source
// labels (a subset of the proxy's workload labels).
func l4MatchApplies(gateways []string, matchPort, port uint32, sourceNS string, sourceLabels map[string]string, src *l4Source) bool {
	if !mesh.BindsMesh(gateways) || (matchPort != 0 && matchPort != port) || (sourceNS != "" && sourceNS != src.ns) {
		return false
	}
	if len(sourceLabels) == 0 {
		return true
	}
	src.usedLabels = true
	if !src.labelsKnown {
		return false
	}
	for k, v := range sourceLabels {
		if got, ok := src.labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// tcpRouteChains are the chains of the tcp rules of svc's VirtualServices:
// the first rule without a destinationSubnets or sourceSubnet match becomes
// the default chain and ends the list; a rule matched on destination
// subnets gets a chain with those prefix ranges; a match on sourceSubnet
// gets a chain with source_prefix_ranges. (Istio's
// buildSidecarOutboundTCPFilterChainOpts drops sourceSubnet, a field its
// API hides from the docs, and so widens the rule to every client; Strait
// matches it with Envoy's filter chain source match instead. Envoy decides
// the destination level before the source one: a chain matched on
// destination subnets that contain the address wins over a chain matched
// on the source alone.)
func tcpRouteChains(snap *mesh.Snapshot, svc *mesh.Service, port uint32, src *l4Source) []*listener.FilterChain {
	var out []*listener.FilterChain
	// seenSources keeps the first rule for a (destination subnets, source
	// subnet) pair: Envoy refuses two chains with the same match.
	seenSources := map[string]bool{}
	for _, vs := range snap.VirtualServices(svc.Hostname) {
		spec := vs.VirtualService()
		if !mesh.BindsMesh(spec.Gateways) {
			continue
		}
		for _, rule := range spec.Tcp {
			if len(rule.Route) == 0 {
				continue
			}
			filter := tcpRouteFilter(snap, vs, rule.Route, port)
			if len(rule.Match) == 0 {
				return append(out, &listener.FilterChain{Filters: []*listener.Filter{filter}})
			}
			var subnets []string
			var fromSources []*listener.FilterChain
			for _, m := range rule.Match {
				if !l4MatchApplies(m.Gateways, m.Port, port, m.SourceNamespace, m.SourceLabels, src) {
					continue
				}
				if m.SourceSubnet != "" {
					// A match on the client's subnet gets a chain of its
					// own, matched on source_prefix_ranges (and on its
					// destination subnets, if any).
					fcm := &listener.FilterChainMatch{
						PrefixRanges:       cidrRanges(m.DestinationSubnets),
						SourcePrefixRanges: cidrRanges([]string{m.SourceSubnet}),
					}
					key := strings.Join(m.DestinationSubnets, ",") + "|" + m.SourceSubnet
					if !seenSources[key] {
						seenSources[key] = true
						fromSources = append(fromSources, &listener.FilterChain{FilterChainMatch: fcm, Filters: []*listener.Filter{filter}})
					}
					continue
				}
				if len(m.DestinationSubnets) == 0 {
					return append(append(out, fromSources...), &listener.FilterChain{Filters: []*listener.Filter{filter}})
				}
				subnets = append(subnets, m.DestinationSubnets...)
			}
			out = append(out, fromSources...)
			if len(subnets) > 0 {
				out = append(out, &listener.FilterChain{
					FilterChainMatch: &listener.FilterChainMatch{PrefixRanges: cidrRanges(subnets)},
					Filters:          []*listener.Filter{filter},
				})
			}
		}
	}
	return out
}

// tlsRouteChains are the chains of the tls rules of svc's VirtualServices,
// one per distinct (sniHosts, destinationSubnets) match.
func tlsRouteChains(snap *mesh.Snapshot, svc *mesh.Service, port uint32, src *l4Source) []*listener.FilterChain {
	var out []*listener.FilterChain
	seen := map[string]bool{}
	for _, vs := range snap.VirtualServices(svc.Hostname) {
		spec := vs.VirtualService()
		if !mesh.BindsMesh(spec.Gateways) {
			continue
		}
		for _, rule := range spec.Tls {
			if len(rule.Route) == 0 {
				continue
			}
			for _, m := range rule.Match {
				if !l4MatchApplies(m.Gateways, m.Port, port, m.SourceNamespace, m.SourceLabels, src) {
					continue
				}
				key := strings.Join(m.SniHosts, ",") + "|" + strings.Join(m.DestinationSubnets, ",")
				if seen[key] {
					continue
				}
				seen[key] = true
				fcm := &listener.FilterChainMatch{ServerNames: m.SniHosts, PrefixRanges: cidrRanges(m.DestinationSubnets)}
				if len(fcm.ServerNames) == 0 && len(fcm.PrefixRanges) == 0 {
					fcm = nil
				}
				out = append(out, &listener.FilterChain{
					FilterChainMatch: fcm,
					Filters:          []*listener.Filter{tcpRouteFilter(snap, vs, rule.Route, port)},
				})
			}
		}
	}
	return out
}

// tcpRouteFilter is the tcp_proxy of a rule's destinations: one cluster,
// or weighted_clusters (destinations of weight 0 left out) named after the
// VirtualService, as Istio names them.
func tcpRouteFilter(snap *mesh.Snapshot, vs *istioconfig.Config, routes []*networking.RouteDestination, port uint32) *listener.Filter {
	if len(routes) == 1 {
		c := destinationCluster(snap, vs.Namespace, routes[0].Destination, port)
		return tcpProxyFilter(c, c)
	}
	wc := &tcpproxy.TcpProxy_WeightedCluster{}
	for _, r := range routes {
		if r.Weight > 0 {
			wc.Clusters = append(wc.Clusters, &tcpproxy.TcpProxy_WeightedCluster_ClusterWeight{
				Name:   destinationCluster(snap, vs.Namespace, r.Destination, port),
				Weight: uint32(r.Weight),
			})
		}
	}
	return &listener.Filter{
		Name: tcpProxyFilterName,
		ConfigType: &listener.Filter_TypedConfig{TypedConfig: mustAny(&tcpproxy.TcpProxy{
			StatPrefix:       vs.Name + "." + vs.Namespace,
			ClusterSpecifier: &tcpproxy.TcpProxy_WeightedClusters{WeightedClusters: wc},
		})},
	}
}

// cidrRanges turns "10.0.0.0/8" or "10.1.2.3" into CidrRanges; config
// validation refuses anything else.
func cidrRanges(subnets []string) []*core.CidrRange {
	var out []*core.CidrRange
	for _, s := range subnets {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, err := netip.ParseAddr(s)
			if err != nil {
				continue
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, &core.CidrRange{AddressPrefix: p.Addr().String(), PrefixLen: wrapperspb.UInt32(uint32(p.Bits()))})
	}
	return out
}
