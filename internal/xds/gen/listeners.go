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
	"github.com/straitmesh/strait/internal/protocol"
	"github.com/straitmesh/strait/internal/proxypush"
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
func (g *Generator) BuildListeners(proxy *proxypush.Proxy) []*listener.Listener {
	return buildListeners(g.snapshot(), proxy, g.keys)
}

func buildListeners(snap *mesh.Snapshot, proxy *proxypush.Proxy, keys KeySets) []*listener.Listener {
	labels, known := proxyLabels(snap, proxy)
	scope := snap.ProxyScope(proxy)
	tp := telemetryFor(snap, scope) // telemetryapi.go
	out, _ := outboundListeners(snap, scope, labels, known)
	out = append(out, inboundListeners(snap, proxy, keys)...)
	withAccessLogs(snap, tp, out...) // accesslog.go
	withTelemetry(tp, out...)        // telemetry.go
	if acceptsHTTP10(proxy) {
		withHTTP10(out...) // http10.go
	}
	slices.SortFunc(out, func(a, b *listener.Listener) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// outboundListeners are the listeners every proxy of a scope shares:
// virtualOutbound, the listeners of the Sidecar's egress ports, and the
// per-port hand-off listeners of the catch-all egress listener's services. Built for a scope
// (labelsKnown false), it also returns the TCP listeners whose routes
// match on sourceLabels, which each proxy needs built with its own labels.
func outboundListeners(snap *mesh.Snapshot, scope *mesh.Scope, labels map[string]string, labelsKnown bool) ([]*listener.Listener, []labelListener) {
	var byLabels []labelListener
	out := []*listener.Listener{virtualOutbound(scope.RegistryOnly)}
	seen := map[string]bool{VirtualOutboundListener: true, VirtualInboundListener: true}
	add := func(l *listener.Listener) bool {
		if seen[l.Name] {
			return false
		}
		seen[l.Name] = true
		out = append(out, l)
		return true
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
	// The Sidecar's egress listeners with a port come first: a port they
	// claim is not given to the catch-all listener's services (egress.go).
	byLabels = egressPortListeners(snap, scope, labels, labelsKnown, add, byLabels)
	for _, svc := range scope.CatchAll {
		for _, port := range svc.Ports {
			switch {
			case port.Protocol == protocol.UDP || port.Number == OutboundCapturePort || port.Number == InboundCapturePort:
			case port.Protocol.IsHTTP():
				add(httpOutboundListener(port.Number, meshPathNormalization(snap.Mesh)))
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
						byLabels = append(byLabels, labelListener{svc: svc, port: port, addr: vip})
					}
					add(l)
				}
				// TLS ports need SNI matching to share a port; left to
				// virtualOutbound.
				if !hasVIP && len(svc.Addresses) == 0 && port.Protocol != protocol.TLS && port.Protocol != protocol.HTTPS {
					src := &l4Source{ns: scope.Namespace, labels: labels, labelsKnown: labelsKnown}
					w := wildcard{l: tcpServiceListener(snap, svc, port, "0.0.0.0", src)}
					if src.usedLabels {
						w.ll = &labelListener{svc: svc, port: port, addr: "0.0.0.0"}
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
func proxyLabels(snap *mesh.Snapshot, proxy *proxypush.Proxy) (map[string]string, bool) {
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

func httpOutboundListener(port uint32, paths pathNormalization) *listener.Listener {
	return httpListenerOn("0.0.0.0", port, false, paths)
}

// httpListenerOn is an outbound HTTP listener on addr:port whose routes are
// the port's route configuration; bound, the application calls it
// directly, else virtualOutbound hands captured connections to it.
func httpListenerOn(addr string, port uint32, bind bool, paths pathNormalization) *listener.Listener {
	name := fmt.Sprintf("%s_%d", addr, port)
	m := &hcm.HttpConnectionManager{
		StatPrefix: "outbound_" + name,
		RouteSpecifier: &hcm.HttpConnectionManager_Rds{Rds: &hcm.Rds{
			RouteConfigName: RouteName(port),
			ConfigSource:    rdsConfigSource(),
		}},
	}
	paths.apply(m) // pathnorm.go
	return &listener.Listener{
		Name:       name,
		Address:    socketAddress(addr, port),
		BindToPort: wrapperspb.Bool(bind),
		FilterChains: []*listener.FilterChain{{
			Filters: []*listener.Filter{hcmFilter(m)},
		}},
		TrafficDirection: core.TrafficDirection_OUTBOUND,
	}
}

// inboundSecurity is what the proxy's workload's security policies make
// of its inbound chains: the PeerAuthentication mode of each port
// (peerauthn.go), the HTTP filters that come first on an HCM (jwt_authn
// for a RequestAuthentication, jwt.go, then RBAC, authz.go) and the
// network RBAC filters that come before a tcp_proxy.
type inboundSecurity struct {
	authn inboundAuthn
	first []*hcm.HttpFilter
	tcp   []*listener.Filter
	// paths is how the HCMs normalize paths, which the RBAC filters
	// of first match (pathnorm.go).
	paths pathNormalization
}

func proxyInboundSecurity(snap *mesh.Snapshot, proxy *proxypush.Proxy, keys KeySets) inboundSecurity {
	authz := buildAuthz(inboundAuthorizationPolicies(snap, proxy), meshTrustDomains(snap)) // authz.go
	sec := inboundSecurity{authn: proxyInboundAuthn(snap, proxy), tcp: authz.tcp, paths: meshPathNormalization(snap.Mesh)}
	if jf := jwtHTTPFilter(snap, proxy, keys); jf != nil {
		sec.first = append(sec.first, jf)
	}
	sec.first = append(sec.first, authz.http...)
	return sec
}

// withAuthz puts the network RBAC filters before a chain's tcp_proxy.
func (sec inboundSecurity) withAuthz(f *listener.Filter) []*listener.Filter {
	return append(sec.tcp[:len(sec.tcp):len(sec.tcp)], f)
}

// inboundListeners are the proxy's own listeners: virtualInbound and one
// bound listener per Sidecar ingress listener with captureMode NONE.
func inboundListeners(snap *mesh.Snapshot, proxy *proxypush.Proxy, keys KeySets) []*listener.Listener {
	sec := proxyInboundSecurity(snap, proxy, keys)
	var captured []inboundPort
	var out []*listener.Listener
	for _, p := range inboundPorts(snap, proxy) {
		if p.bind == "" {
			captured = append(captured, p)
			continue
		}
		// Istio's inboundCustomListener: a listener of its own on
		// bind:port, named after them, with the port's chains.
		chains := inboundChains(p, sec)
		l := &listener.Listener{
			Name:             fmt.Sprintf("%s_%d", p.bind, p.endpointPort),
			Address:          socketAddress(p.bind, p.endpointPort),
			FilterChains:     chains,
			TrafficDirection: core.TrafficDirection_INBOUND,
		}
		if needsTLSInspector(chains) {
			l.ListenerFilters = []*listener.ListenerFilter{tlsInspector()}
			l.ContinueOnListenerFiltersTimeout = true
		}
		out = append(out, l)
	}
	return append([]*listener.Listener{virtualInbound(proxy, captured, sec)}, out...)
}

// inboundChains are the chains of one inbound port, matched on the
// original destination port; which ones is the port's PeerAuthentication
// mode (peerauthn.go).
func inboundChains(p inboundPort, sec inboundSecurity) []*listener.FilterChain {
	clusterName := InboundClusterName(p.endpointPort)
	statPrefix := fmt.Sprintf("inbound_0.0.0.0_%d", p.endpointPort)
	var filters []*listener.Filter
	if p.protocol.IsHTTP() {
		m := &hcm.HttpConnectionManager{
			StatPrefix: statPrefix,
			// The application sees who called it: this hop's client
			// certificate details appended to x-forwarded-client-cert, as
			// Istio's sidecar inbound HCM sets them
			// (buildSidecarInboundHTTPOpts in pilot/pkg/networking/core).
			ForwardClientCertDetails: hcm.HttpConnectionManager_APPEND_FORWARD,
			SetCurrentClientCertDetails: &hcm.HttpConnectionManager_SetCurrentClientCertDetails{
				Subject: wrapperspb.Bool(true),
				Uri:     true,
				Dns:     true,
			},
			RouteSpecifier: &hcm.HttpConnectionManager_RouteConfig{RouteConfig: &route.RouteConfiguration{
				Name:             clusterName,
				ValidateClusters: wrapperspb.Bool(false),
				VirtualHosts: []*route.VirtualHost{{
					Name:    fmt.Sprintf("inbound|http|%d", p.endpointPort),
					Domains: []string{"*"},
					Routes:  []*route.Route{prefixRoute("default", "/", clusterName)},
				}},
			}},
		}
		sec.paths.apply(m) // pathnorm.go
		filters = []*listener.Filter{hcmFilter(m, sec.first...)}
	} else {
		filters = sec.withAuthz(tcpProxyFilter(statPrefix, clusterName))
	}
	chain := &listener.FilterChain{
		Name:             clusterName,
		FilterChainMatch: &listener.FilterChainMatch{DestinationPort: wrapperspb.UInt32(p.endpointPort)},
		Filters:          filters,
	}
	return sec.authn.portChains(chain, p.endpointPort, p.protocol.IsHTTP(), sec.withAuthz(tcpProxyFilter(statPrefix, clusterName)))
}

// virtualInbound has the chains of each captured port the proxy's
// workload serves and passthrough chains that pass connections to other
// ports to the workload unchanged.
func virtualInbound(proxy *proxypush.Proxy, ports []inboundPort, sec inboundSecurity) *listener.Listener {
	var (
		chains   []*listener.FilterChain
		declared []uint32
	)
	for _, p := range ports {
		declared = append(declared, p.endpointPort)
		chains = append(chains, inboundChains(p, sec)...)
	}
	chains = append(chains, sec.authn.passthroughChains(declared, sec.withAuthz)...)
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
	if needsTLSInspector(chains) {
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
func interceptsWithTProxy(proxy *proxypush.Proxy) bool {
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

// hcmFilter completes an HTTP connection manager: codec, upgrades and
// its HTTP filters (first, the authentication and authorization filters of
// an inbound one, where Istio puts them).
func hcmFilter(m *hcm.HttpConnectionManager, authn ...*hcm.HttpFilter) *listener.Filter {
	m.CodecType = hcm.HttpConnectionManager_AUTO
	// WebSocket upgrades are allowed on every HTTP listener, as Istio's
	// HTTP connection manager builder does.
	m.UpgradeConfigs = []*hcm.HttpConnectionManager_UpgradeConfig{{UpgradeType: "websocket"}}
	// The fault and CORS filters come before the router, as Istio lists
	// them (httpfilters.go).
	m.HttpFilters = slices.Concat(authn, faultAndCORSFilters(), []*hcm.HttpFilter{{
		Name:       routerFilterName,
		ConfigType: &hcm.HttpFilter_TypedConfig{TypedConfig: mustAny(&routerfilter.Router{})},
	}})
	return &listener.Filter{
		Name:       hcmFilterName,
		ConfigType: &listener.Filter_TypedConfig{TypedConfig: mustAny(m)},
	}
}
