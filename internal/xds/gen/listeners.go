package gen

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerfilter "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	originaldst "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/original_dst/v3"
	originalsrc "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/original_src/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxy "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/mesh"
	"github.com/straitmesh/strait/internal/model"
	"github.com/straitmesh/strait/internal/protocol"
)

// Filter names, as Envoy registers them.
const (
	hcmFilterName         = "envoy.filters.network.http_connection_manager"
	tcpProxyFilterName    = "envoy.filters.network.tcp_proxy"
	routerFilterName      = "envoy.filters.http.router"
	originalDstFilterName = "envoy.filters.listener.original_dst"
	originalSrcFilterName = "envoy.filters.listener.original_src"

	// TProxyMark is the mark the proxy's connections to the application
	// carry in TPROXY mode, so that the capture rules route the
	// application's replies back to the proxy (istio-iptables -t).
	TProxyMark = 1337
)

// BuildListeners returns the proxy's listeners sorted by name:
// virtualOutbound, virtualInbound, one 0.0.0.0_PORT per outbound HTTP port
// and one VIP_PORT per outbound TCP service address.
func (g *Generator) BuildListeners(proxy *model.Proxy) []*listener.Listener {
	return buildListeners(g.snapshot(), proxy)
}

func buildListeners(snap *mesh.Snapshot, proxy *model.Proxy) []*listener.Listener {
	labels, known := proxyLabels(snap, proxy)
	out, _ := outboundListeners(snap, snap.ProxyScope(proxy), labels, known)
	out = append(out, virtualInbound(snap, proxy))
	withAccessLogs(snap, out...) // accesslog.go
	slices.SortFunc(out, func(a, b *listener.Listener) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// outboundListeners are the listeners every proxy of a scope shares:
// virtualOutbound and the per-port hand-off listeners. Built for a scope
// (labelsKnown false), it also returns the TCP listeners whose routes
// match on sourceLabels, which each proxy needs built with its own labels.
func outboundListeners(snap *mesh.Snapshot, scope *mesh.Scope, labels map[string]string, labelsKnown bool) ([]*listener.Listener, []labelListener) {
	var byLabels []labelListener
	out := []*listener.Listener{virtualOutbound(scope.RegistryOnly)}
	seen := map[string]bool{VirtualOutboundListener: true, VirtualInboundListener: true}
	add := func(l *listener.Listener) {
		if !seen[l.Name] {
			seen[l.Name] = true
			out = append(out, l)
		}
	}
	// A TCP port of a service without an address gets a wildcard
	// listener, 0.0.0.0_PORT, as in Istio: every connection to that port
	// goes to the service's cluster (the first service by name; an HTTP
	// listener on the port wins). Without it, REGISTRY_ONLY would refuse
	// such services. (Istio matches TLS ports of such services by SNI;
	// they are not given one here.)
	type wildcard struct {
		l  *listener.Listener
		ll *labelListener // set when its routes match on sourceLabels
	}
	var wildcardTCP []wildcard
	for _, svc := range scope.Services {
		for _, port := range svc.Ports {
			switch {
			case port.Protocol == protocol.UDP || port.Number == OutboundCapturePort || port.Number == InboundCapturePort:
			case port.Protocol.IsHTTP():
				add(httpOutboundListener(port.Number))
			default:
				hasVIP := false
				for _, vip := range svc.Addresses {
					if _, err := netip.ParseAddr(vip); err != nil {
						continue // a CIDR: no single address to hand off to
					}
					hasVIP = true
					src := &l4Source{ns: scope.Namespace, labels: labels, labelsKnown: labelsKnown}
					l := tcpServiceListener(snap, svc, port, vip, src) // tcproutes.go
					if !seen[l.Name] && src.usedLabels {
						byLabels = append(byLabels, labelListener{svc: svc, port: port, vip: vip})
					}
					add(l)
				}
				// TLS ports need SNI matching to share a port; left to
				// virtualOutbound.
				if !hasVIP && len(svc.Addresses) == 0 && port.Protocol != protocol.TLS && port.Protocol != protocol.HTTPS {
					src := &l4Source{ns: scope.Namespace, labels: labels, labelsKnown: labelsKnown}
					w := wildcard{l: tcpServiceListener(snap, svc, port, "0.0.0.0", src)}
					if src.usedLabels {
						w.ll = &labelListener{svc: svc, port: port, vip: "0.0.0.0"}
					}
					wildcardTCP = append(wildcardTCP, w)
				}
			}
		}
	}
	for _, w := range wildcardTCP {
		if !seen[w.l.Name] && w.ll != nil {
			byLabels = append(byLabels, *w.ll)
		}
		add(w.l)
	}
	return out, byLabels
}

// proxyLabels are the labels of the proxy's WorkloadEntry (known false
// when none is at its address).
func proxyLabels(snap *mesh.Snapshot, proxy *model.Proxy) (map[string]string, bool) {
	if proxy == nil {
		return nil, false
	}
	if w := snap.WorkloadByIP(proxy.IP); w != nil {
		return w.Labels, true
	}
	return nil, true // no workload: no labels, so no sourceLabels match applies
}

// virtualOutbound catches every outbound connection. One whose original
// destination no listener claims passes through to it (ALLOW_ANY), or,
// with REGISTRY_ONLY, goes to BlackHoleCluster, which has no endpoint and
// so closes it (Istio's buildOutboundCatchAllNetworkFiltersOnly; the chain
// keeps its name).
func virtualOutbound(registryOnly bool) *listener.Listener {
	catchAll := PassthroughCluster
	if registryOnly {
		catchAll = BlackHoleCluster
	}
	return &listener.Listener{
		Name:           VirtualOutboundListener,
		Address:        socketAddress("0.0.0.0", OutboundCapturePort),
		UseOriginalDst: wrapperspb.Bool(true),
		FilterChains: []*listener.FilterChain{{
			Name:    "PassthroughFilterChain",
			Filters: []*listener.Filter{tcpProxyFilter(catchAll, catchAll)},
		}},
		TrafficDirection: core.TrafficDirection_OUTBOUND,
	}
}

func httpOutboundListener(port uint32) *listener.Listener {
	name := fmt.Sprintf("0.0.0.0_%d", port)
	return &listener.Listener{
		Name:       name,
		Address:    socketAddress("0.0.0.0", port),
		BindToPort: wrapperspb.Bool(false),
		FilterChains: []*listener.FilterChain{{
			Filters: []*listener.Filter{hcmFilter(&hcm.HttpConnectionManager{
				StatPrefix: "outbound_" + name,
				RouteSpecifier: &hcm.HttpConnectionManager_Rds{Rds: &hcm.Rds{
					RouteConfigName: RouteName(port),
					ConfigSource:    adsConfigSource(),
				}},
			})},
		}},
		TrafficDirection: core.TrafficDirection_OUTBOUND,
	}
}

// virtualInbound has one filter chain per port the proxy's workload serves
// (matched on the original destination port; three under auto mTLS:
// mTLS, other TLS and plaintext, mtls.go) and a catch-all chain that
// passes other connections to the workload unchanged.
func virtualInbound(snap *mesh.Snapshot, proxy *model.Proxy) *listener.Listener {
	var chains []*listener.FilterChain
	mtls := inboundMTLS(snap, proxy)
	for _, p := range inboundPorts(snap, proxy) {
		clusterName := InboundClusterName(p.endpointPort)
		statPrefix := fmt.Sprintf("inbound_0.0.0.0_%d", p.endpointPort)
		var f *listener.Filter
		if p.protocol.IsHTTP() {
			f = hcmFilter(&hcm.HttpConnectionManager{
				StatPrefix: statPrefix,
				RouteSpecifier: &hcm.HttpConnectionManager_RouteConfig{RouteConfig: &route.RouteConfiguration{
					Name: clusterName,
					VirtualHosts: []*route.VirtualHost{{
						Name:    fmt.Sprintf("inbound|http|%d", p.endpointPort),
						Domains: []string{"*"},
						Routes:  []*route.Route{prefixRoute("default", "/", clusterName)},
					}},
				}},
			})
		} else {
			f = tcpProxyFilter(statPrefix, clusterName)
		}
		chain := &listener.FilterChain{
			Name:             clusterName,
			FilterChainMatch: &listener.FilterChainMatch{DestinationPort: wrapperspb.UInt32(p.endpointPort)},
			Filters:          []*listener.Filter{f},
		}
		if mtls {
			chains = append(chains, permissiveChains(chain, p.endpointPort, p.protocol.IsHTTP(), tcpProxyFilter(statPrefix, clusterName))...) // mtls.go
		} else {
			chains = append(chains, chain)
		}
	}
	chains = append(chains, &listener.FilterChain{
		Name:    "InboundPassthroughFilterChain",
		Filters: []*listener.Filter{tcpProxyFilter(InboundPassthroughCluster, InboundPassthroughCluster)},
	})
	l := &listener.Listener{
		Name:    VirtualInboundListener,
		Address: socketAddress("0.0.0.0", InboundCapturePort),
		ListenerFilters: []*listener.ListenerFilter{{
			Name:       originalDstFilterName,
			ConfigType: &listener.ListenerFilter_TypedConfig{TypedConfig: mustAny(&originaldst.OriginalDst{})},
		}},
		FilterChains:     chains,
		TrafficDirection: core.TrafficDirection_INBOUND,
	}
	if mtls {
		// A connection whose client is silent (a server-first protocol)
		// goes on as plaintext when the inspector's timeout expires.
		l.ListenerFilters = append(l.ListenerFilters, tlsInspector())
		l.ContinueOnListenerFiltersTimeout = true
	}
	if interceptsWithTProxy(proxy) {
		// TPROXY delivers connections for foreign addresses: the socket
		// must be transparent. original_src makes the proxy's connection
		// to the application come from the client's own address, so the
		// application sees the real client (istio/istio#5679).
		l.Transparent = wrapperspb.Bool(true)
		l.ListenerFilters = append(l.ListenerFilters, &listener.ListenerFilter{
			Name:       originalSrcFilterName,
			ConfigType: &listener.ListenerFilter_TypedConfig{TypedConfig: mustAny(&originalsrc.OriginalSrc{Mark: TProxyMark})},
		})
	}
	return l
}

// interceptsWithTProxy reports whether the proxy's inbound traffic is
// captured in TPROXY mode: node metadata INTERCEPTION_MODE, which the agent
// takes from ISTIO_META_INTERCEPTION_MODE as Istio's does.
func interceptsWithTProxy(proxy *model.Proxy) bool {
	return proxy != nil && strings.EqualFold(proxy.Metadata["INTERCEPTION_MODE"], "TPROXY")
}

func tcpProxyFilter(statPrefix, clusterName string) *listener.Filter {
	return &listener.Filter{
		Name: tcpProxyFilterName,
		ConfigType: &listener.Filter_TypedConfig{TypedConfig: mustAny(&tcpproxy.TcpProxy{
			StatPrefix:       statPrefix,
			ClusterSpecifier: &tcpproxy.TcpProxy_Cluster{Cluster: clusterName},
		})},
	}
}

func hcmFilter(m *hcm.HttpConnectionManager) *listener.Filter {
	m.CodecType = hcm.HttpConnectionManager_AUTO
	// WebSocket upgrades are allowed on every HTTP listener, as Istio's
	// HTTP connection manager builder does.
	m.UpgradeConfigs = []*hcm.HttpConnectionManager_UpgradeConfig{{UpgradeType: "websocket"}}
	// The fault and CORS filters come before the router, as Istio lists
	// them (httpfilters.go).
	m.HttpFilters = append(faultAndCORSFilters(), &hcm.HttpFilter{
		Name:       routerFilterName,
		ConfigType: &hcm.HttpFilter_TypedConfig{TypedConfig: mustAny(&routerfilter.Router{})},
	})
	return &listener.Filter{
		Name:       hcmFilterName,
		ConfigType: &listener.Filter_TypedConfig{TypedConfig: mustAny(m)},
	}
}
