package gen

// Gateways: the listeners and routes of a proxy of type router (strait-agent
// proxy router), built from the Gateways whose selector matches its
// workload's labels and the VirtualServices bound to them, with Istio's
// names and shapes (pilot/pkg/networking/core/gateway.go:
// buildGatewayListeners, buildGatewayHTTPRouteConfig,
// createGatewayTCPFilterChainOpts; pilot/pkg/model/gateway.go:
// MergeGateways, gatewayRDSRouteName):
//
//   - one listener 0.0.0.0_PORT per server port, bound;
//   - plaintext HTTP servers (HTTP, HTTP2, GRPC) of a port share one HCM
//     on the route configuration http.PORT;
//   - an HTTPS server that terminates TLS (SIMPLE, MUTUAL) gets a filter
//     chain of its own, matched by SNI on its hosts (none for "*"), with a
//     DownstreamTlsContext whose certificate is the SDS resource
//     file-cert:CERT~KEY (and file-root:CA for MUTUAL) that the gateway's
//     agent reads from its files, and an HCM on
//     https.PORT.PORTNAME.GATEWAY.NAMESPACE; a server whose
//     credentialName the registry found missing or malformed
//     (mesh.Snapshot.GatewayCredentialError) gets no chain, and a port
//     left with none no listener;
//   - a PASSTHROUGH server (HTTPS or TLS) gets one chain per tls rule of a
//     bound VirtualService, matched by the rule's sniHosts, with a
//     tcp_proxy to its destinations; a TLS server that terminates and a
//     TCP server get a tcp_proxy from the first tcp rule that applies;
//   - a route configuration has one virtual host per host that a server
//     and a bound VirtualService share, named HOST:PORT, or Istio's
//     blackhole:PORT virtual host with no route (404) when there is none;
//     an HTTP server with tls.httpsRedirect answers 301 to https for its
//     hosts (Istio sets require_tls ALL on the virtual host; Strait emits
//     the redirect route Envoy would answer with);
//   - every chain gets Istio's telemetry filters as a client's
//     (telemetry.go withGatewayTelemetry: istio.stats and the outbound
//     metadata exchange; reporter "source").
//
// Clusters and endpoints are the outbound ones of the proxy's scope, as
// for a sidecar, so the hop from the gateway to a sidecar is mTLS by the
// same auto-mTLS rules. Two servers that claim one port with protocols
// that cannot share it (plaintext and TLS, TCP and anything) are
// resolved as Istio's MergeGateways does (mesh.GatewayServers): the
// server of the oldest Gateway (then first by namespace/name) keeps the
// port, the other is left out, reported by mesh.Build (straitd logs it
// as a config conflict naming both Gateways) and by GatewayConflicts.

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/straitmesh/strait/internal/istioconfig"
	"github.com/straitmesh/strait/internal/mesh"
	"github.com/straitmesh/strait/internal/proxypush"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// Istio's SDS resource names of a Gateway's credentialName NAME:
// kubernetes://NAME and, for MUTUAL, kubernetes://NAME-cacert.
const (
	credentialPrefix   = "kubernetes://"
	credentialCASuffix = "-cacert"
)

// credentialResource is the SDS resource name of a credentialName
// (Istio's credentials.ToResourceName): kubernetes://NAME, or the name
// itself when it has a scheme already (a Gateway API certificate of
// another namespace, kubernetes-gateway://NAMESPACE/NAME).
func credentialResource(name string) string {
	if strings.Contains(name, "://") {
		return name
	}
	return credentialPrefix + name
}

// isRouter reports whether the proxy is a gateway.
func isRouter(p *proxypush.Proxy) bool { return p != nil && p.Type == proxypush.Router }

// routerClusters are a gateway's clusters: the scope's shared ones, but
// for the services of resolution NONE (Kubernetes headless Services among
// them), whose ORIGINAL_DST clusters would send a request back to the
// gateway itself; the gateway gets EDS clusters of its own for them
// (serviceClustersAs), with the service's endpoints.
func routerClusters(snap *mesh.Snapshot, scope *mesh.Scope, shared []*discovery.Resource) ([]*discovery.Resource, []namedMessage) {
	var own []namedMessage
	mine := map[string]bool{}
	for _, svc := range scope.Services {
		if svc.Resolution != networking.ServiceEntry_NONE {
			continue
		}
		for _, c := range serviceClustersAs(snap, scope.Namespace, snap.Unviewed(svc), true) {
			own = append(own, namedMessage{c.Name, c})
			mine[c.Name] = true
		}
	}
	if len(own) == 0 {
		return shared, nil
	}
	return slices.DeleteFunc(slices.Clone(shared), func(r *discovery.Resource) bool { return mine[r.Name] }), own
}

// gatewayServer is one server of a Gateway that a router runs
// (mesh.GatewayServers).
type gatewayServer struct{ mesh.GatewayServer }

// terminates reports whether the server terminates TLS (SIMPLE, MUTUAL,
// ISTIO_MUTUAL).
func (s gatewayServer) terminates() bool {
	switch s.Server.GetTls().GetMode() {
	case networking.ServerTLSSettings_SIMPLE, networking.ServerTLSSettings_MUTUAL, networking.ServerTLSSettings_ISTIO_MUTUAL:
		return s.TLS()
	}
	return false
}

// routeName is Istio's gatewayRDSRouteName: http.PORT for plaintext HTTP,
// https.PORT.PORTNAME.GATEWAY.NAMESPACE for an HTTPS server that
// terminates TLS, "" for the rest.
func (s gatewayServer) routeName() string {
	port := s.Server.GetPort()
	switch {
	case istioconfig.GatewayProtocolIsHTTP(s.Protocol):
		return "http." + strconv.Itoa(int(port.GetNumber()))
	case s.Protocol == "HTTPS" && s.terminates():
		return fmt.Sprintf("https.%d.%s.%s.%s", port.GetNumber(), port.GetName(), s.Gateway.Name, s.Gateway.Namespace)
	}
	return ""
}

// gatewayServers are the servers the router at proxy runs, by port
// (sorted): those of the Gateways that select its WorkloadEntry's labels,
// conflicts left out (mesh.GatewayServers).
func gatewayServers(snap *mesh.Snapshot, proxy *proxypush.Proxy) ([]uint32, map[uint32][]gatewayServer, []mesh.GatewayConflict) {
	labels, _ := proxyLabels(snap, proxy)
	ports, byPort, conflicts := snap.GatewayServers(labels)
	out := make(map[uint32][]gatewayServer, len(byPort))
	for p, ss := range byPort {
		for _, s := range ss {
			out[p] = append(out[p], gatewayServer{s})
		}
	}
	return ports, out, conflicts
}

// GatewayConflicts names the servers left out of the router at proxy
// because an earlier Gateway holds their port; straitd's registry logs
// them as config conflicts too (mesh.Build).
func (g *Generator) GatewayConflicts(proxy *proxypush.Proxy) []mesh.GatewayConflict {
	if !isRouter(proxy) {
		return nil
	}
	_, _, c := gatewayServers(g.snapshot(), proxy)
	return c
}

// gatewayListeners are the listeners of a router.
func gatewayListeners(snap *mesh.Snapshot, proxy *proxypush.Proxy) []*listener.Listener {
	tp := telemetryFor(snap, snap.ProxyScope(proxy)) // telemetryapi.go
	ports, byPort, _ := gatewayServers(snap, proxy)
	ns := snap.ProxyScope(proxy).Namespace
	var out []*listener.Listener
	for _, port := range ports {
		servers := byPort[port]
		l := &listener.Listener{
			Name:             fmt.Sprintf("0.0.0.0_%d", port),
			Address:          socketAddress("0.0.0.0", port),
			TrafficDirection: core.TrafficDirection_OUTBOUND,
		}
		if !servers[0].TLS() {
			if istioconfig.GatewayProtocolIsHTTP(servers[0].Protocol) {
				l.FilterChains = []*listener.FilterChain{{Filters: []*listener.Filter{gatewayHCM(snap, port, servers[0].routeName(), false)}}}
			} else if f := gatewayTCPFilter(snap, ns, servers[0]); f != nil {
				l.FilterChains = []*listener.FilterChain{{Filters: []*listener.Filter{f}}}
			}
		} else {
			l.ListenerFilters = []*listener.ListenerFilter{tlsInspector()}
			l.FilterChains = gatewayTLSChains(snap, ns, port, servers)
		}
		if len(l.FilterChains) == 0 {
			continue // nothing bound to the port yet: Envoy refuses a listener without chains
		}
		withAccessLogs(snap, tp, l) // accesslog.go
		withGatewayTelemetry(tp, l) // telemetry.go: istio.stats, reporter "source"
		withTracing(snap, tp, l)    // tracing.go: a gateway is a client (Istio's ListenerClassGateway)
		out = append(out, l)
	}
	return out
}

// gatewayHCM is the HTTP connection manager of a gateway chain, as
// Istio's buildGatewayConnectionManager: the client's address is the
// peer's (use_remote_address), a client certificate's details are
// forwarded after any x-forwarded-client-cert the client sent is dropped
// (SANITIZE_SET).
func gatewayHCM(snap *mesh.Snapshot, port uint32, routeName string, tls bool) *listener.Filter {
	m := &hcm.HttpConnectionManager{
		StatPrefix: fmt.Sprintf("outbound_0.0.0.0_%d", port),
		RouteSpecifier: &hcm.HttpConnectionManager_Rds{Rds: &hcm.Rds{
			RouteConfigName: routeName,
			ConfigSource:    rdsConfigSource(),
		}},
		UseRemoteAddress:         wrapperspb.Bool(true),
		ForwardClientCertDetails: hcm.HttpConnectionManager_SANITIZE_SET,
		SetCurrentClientCertDetails: &hcm.HttpConnectionManager_SetCurrentClientCertDetails{
			Subject: wrapperspb.Bool(true), Cert: true, Dns: true, Uri: true,
		},
	}
	if !tls {
		// Only a TLS chain has a client certificate to forward.
		m.ForwardClientCertDetails, m.SetCurrentClientCertDetails = hcm.HttpConnectionManager_SANITIZE, nil
	}
	meshPathNormalization(snap.Mesh).apply(m) // pathnorm.go
	return hcmFilter(m)
}

// gatewayTLSChains are the chains of a port whose servers carry TLS,
// without two chains of the same server names (the first keeps them, as
// Istio's CheckDuplicates).
func gatewayTLSChains(snap *mesh.Snapshot, ns string, port uint32, servers []gatewayServer) []*listener.FilterChain {
	var out []*listener.FilterChain
	seen := map[string]bool{}
	add := func(names []string, c *listener.FilterChain) {
		key := strings.Join(names, ",")
		if seen[key] {
			return
		}
		seen[key] = true
		if len(names) > 0 {
			c.FilterChainMatch = &listener.FilterChainMatch{ServerNames: names}
		}
		out = append(out, c)
	}
	for _, s := range servers {
		if s.terminates() && snap.GatewayCredentialError(ns, s.Server) != nil {
			// Istio serves no chain for a server whose credential is
			// missing or malformed: a client naming it gets no chain (its
			// handshake fails at once) rather than one that waits for a
			// secret that never comes; mesh.Build reports it.
			continue
		}
		switch {
		case s.terminates() && s.Protocol == "HTTPS":
			add(sniHosts(s.Server), &listener.FilterChain{
				Filters:         []*listener.Filter{gatewayHCM(snap, port, s.routeName(), true)},
				TransportSocket: gatewayTLSSocket(s.Server.GetTls(), true, snap.GatewayCredentialsOverADS()),
			})
		case s.terminates():
			if f := gatewayTCPFilter(snap, ns, s); f != nil {
				fs := []*listener.Filter{f}
				if s.Server.GetTls().GetMode() == networking.ServerTLSSettings_ISTIO_MUTUAL {
					// Istio's includeMx: a sidecar's mTLS may negotiate
					// the TCP metadata exchange (telemetry.go).
					fs = []*listener.Filter{mxListenerFilter(), f}
				}
				add(sniHosts(s.Server), &listener.FilterChain{Filters: fs, TransportSocket: gatewayTLSSocket(s.Server.GetTls(), false, snap.GatewayCredentialsOverADS())})
			}
		default: // PASSTHROUGH
			for _, vs := range gatewayVirtualServices(snap, ns, s) {
				for _, rule := range vs.VirtualService().GetTls() {
					if len(rule.GetRoute()) == 0 {
						continue
					}
					for _, m := range rule.GetMatch() {
						if gatewayL4Match(m.GetPort(), m.GetGateways(), vs, s) {
							add(slices.Clone(m.GetSniHosts()), &listener.FilterChain{Filters: []*listener.Filter{tcpRouteFilter(snap, vs, rule.GetRoute(), port)}})
						}
					}
				}
			}
		}
	}
	return out
}

// sniHosts are the server names a TLS server's chain matches: its hosts
// without namespaces, none (every name) when one is "*" (Istio's
// getSNIHostsForServer).
func sniHosts(srv *networking.Server) []string {
	var out []string
	for _, h := range srv.GetHosts() {
		if _, host, ok := strings.Cut(h, "/"); ok {
			h = host
		}
		if h == "*" {
			return nil
		}
		out = append(out, h)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// gatewayTLSSocket terminates TLS with the server's certificate files
// (or its credentialName's), served by the gateway's agent over SDS, or,
// for a credentialName when the control plane serves the credentials
// (overADS: Kubernetes Secrets), by the control plane over ADS, as
// Istio's ConstructSdsSecretConfigForCredential emits them; MUTUAL also
// requires a client certificate that the CA certificates
// verify; ISTIO_MUTUAL uses the workload certificate and the mesh's root
// CA ("default" and "ROOTCA"). An HTTPS server offers h2
// and http/1.1 (Istio's ALPNHttp).
func gatewayTLSSocket(t *networking.ServerTLSSettings, http, overADS bool) *core.TransportSocket {
	common := &tlsv3.CommonTlsContext{
		TlsParams: &tlsv3.TlsParameters{
			TlsMinimumProtocolVersion: tlsv3.TlsParameters_TLSv1_2,
			TlsMaximumProtocolVersion: tlsv3.TlsParameters_TLSv1_3,
		},
		TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{sdsSecret(fileCertPrefix + t.GetServerCertificate() + "~" + t.GetPrivateKey())},
	}
	caResource := fileRootPrefix + t.GetCaCertificates()
	caSecret := sdsSecret
	if n := t.GetCredentialName(); n != "" {
		// Istio's credential resources (pilot/pkg/model/credentials): the
		// control plane serves them over ADS, or, in file mode, the
		// gateway's agent from its credentials directory.
		if overADS {
			caSecret = adsSecret
		}
		common.TlsCertificateSdsSecretConfigs = []*tlsv3.SdsSecretConfig{caSecret(credentialResource(n))}
		caResource = credentialResource(n) + credentialCASuffix
	}
	if http {
		common.AlpnProtocols = []string{"h2", "http/1.1"}
	}
	ctx := &tlsv3.DownstreamTlsContext{CommonTlsContext: common}
	if t.GetMode() == networking.ServerTLSSettings_ISTIO_MUTUAL {
		// Istio's ISTIO_MUTUAL gateway server (buildGatewayListenerTLSContext):
		// the gateway's workload certificate, and a client certificate
		// that the mesh's root CA signed (a sidecar sending to an egress
		// gateway).
		common.TlsCertificateSdsSecretConfigs = []*tlsv3.SdsSecretConfig{sdsSecret(sdsDefault)}
		caResource, caSecret = sdsRootCA, sdsSecret
	}
	if m := t.GetMode(); m == networking.ServerTLSSettings_MUTUAL || m == networking.ServerTLSSettings_ISTIO_MUTUAL {
		common.ValidationContextType = &tlsv3.CommonTlsContext_CombinedValidationContext{
			CombinedValidationContext: &tlsv3.CommonTlsContext_CombinedCertificateValidationContext{
				DefaultValidationContext:         &tlsv3.CertificateValidationContext{},
				ValidationContextSdsSecretConfig: caSecret(caResource),
			},
		}
		ctx.RequireClientCertificate = wrapperspb.Bool(true)
	}
	return &core.TransportSocket{Name: tlsSocketName, ConfigType: &core.TransportSocket_TypedConfig{TypedConfig: mustAny(ctx)}}
}

// adsSecret is the SdsSecretConfig of a credential the control plane
// serves on the ADS stream: Istio's SDSAdsConfig
// (pilot/pkg/security/model/authentication.go), without initial_fetch_timeout so that a Secret
// that never comes does not hold up the listener.
func adsSecret(name string) *tlsv3.SdsSecretConfig {
	return &tlsv3.SdsSecretConfig{
		Name: name,
		SdsConfig: &core.ConfigSource{
			ConfigSourceSpecifier: &core.ConfigSource_Ads{Ads: &core.AggregatedConfigSource{}},
			ResourceApiVersion:    core.ApiVersion_V3,
		},
	}
}

// gatewayTCPFilter is the tcp_proxy of a TCP server (or a TLS one that
// terminates): the first tcp rule, of the VirtualServices bound to its
// Gateway whose hosts its hosts match, that applies to its port; nil when
// none does.
func gatewayTCPFilter(snap *mesh.Snapshot, ns string, s gatewayServer) *listener.Filter {
	for _, vs := range gatewayVirtualServices(snap, ns, s) {
		for _, rule := range vs.VirtualService().GetTcp() {
			if len(rule.GetRoute()) == 0 {
				continue
			}
			applies := len(rule.GetMatch()) == 0
			for _, m := range rule.GetMatch() {
				applies = applies || gatewayL4Match(m.GetPort(), m.GetGateways(), vs, s)
			}
			if applies {
				return tcpRouteFilter(snap, vs, rule.GetRoute(), s.Server.GetPort().GetNumber())
			}
		}
	}
	return nil
}

// gatewayL4Match is Istio's l4SingleMatch: the match's port, if any, is
// the server's, and its gateways, if any, name the server's Gateway.
func gatewayL4Match(port uint32, gateways []string, vs *istioconfig.Config, s gatewayServer) bool {
	if port != 0 && port != s.Server.GetPort().GetNumber() {
		return false
	}
	return len(gateways) == 0 || bindsGateway(gateways, vs.Namespace, s.Name())
}

// bindsGateway reports whether gateways (as a VirtualService of namespace
// ns writes them: NAME or NAMESPACE/NAME) name the Gateway gw
// (NAMESPACE/NAME).
func bindsGateway(gateways []string, ns, gw string) bool {
	for _, g := range gateways {
		if g == mesh.MeshGateway {
			continue
		}
		if !strings.Contains(g, "/") {
			g = ns + "/" + g
		}
		if g == gw {
			return true
		}
	}
	return false
}

// gatewayVirtualServices are the VirtualServices exported to the router's
// namespace ns that are bound to the server's Gateway and share a host
// with the server (Istio's VirtualServicesForGateway and
// pickMatchingGatewayHosts), by namespace/name.
func gatewayVirtualServices(snap *mesh.Snapshot, ns string, s gatewayServer) []*istioconfig.Config {
	var out []*istioconfig.Config
	for _, vs := range snap.AllVirtualServices() {
		spec := vs.VirtualService()
		if !bindsGateway(spec.GetGateways(), vs.Namespace, s.Name()) || !snap.VirtualServiceVisibleTo(vs, ns) {
			continue
		}
		if len(sharedHosts(snap, s.Server, vs)) > 0 {
			out = append(out, vs)
		}
	}
	return out
}

// sharedHosts are the hosts a server and a VirtualService have in common,
// each the more specific of the two names that match (Istio's
// host.Names.Intersection); a server host "NS/h" counts only for a
// VirtualService of namespace NS.
func sharedHosts(snap *mesh.Snapshot, srv *networking.Server, vs *istioconfig.Config) []string {
	var out []string
	for _, h := range vs.VirtualService().GetHosts() {
		h = strings.ToLower(snap.ResolveHost(h, vs.Namespace))
		for _, sh := range srv.GetHosts() {
			if ns, host, ok := strings.Cut(sh, "/"); ok {
				if ns != vs.Namespace {
					continue
				}
				sh = host
			}
			sh = strings.ToLower(sh)
			switch {
			case wildcardCovers(sh, h):
				out = append(out, h)
			case wildcardCovers(h, sh):
				out = append(out, sh)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// wildcardCovers reports whether pattern ("*", "*.suffix" or a name)
// matches every name host stands for.
func wildcardCovers(pattern, host string) bool {
	switch {
	case pattern == host || pattern == "*":
		return true
	case strings.HasPrefix(pattern, "*."):
		suffix := pattern[1:]
		return strings.HasSuffix(strings.TrimPrefix(host, "*"), suffix) && host != suffix[1:]
	}
	return false
}

// gatewayRoutes are the route configurations of a router named by names
// (all when empty), sorted by name.
func gatewayRoutes(snap *mesh.Snapshot, proxy *proxypush.Proxy, names []string) []*route.RouteConfiguration {
	ports, byPort, _ := gatewayServers(snap, proxy)
	ns := snap.ProxyScope(proxy).Namespace
	src := sourceOf(snap, snap.ProxyScope(proxy), proxy)
	byName := map[string][]gatewayServer{}
	var order []string
	for _, port := range ports {
		for _, s := range byPort[port] {
			n := s.routeName()
			if n == "" {
				continue
			}
			if _, ok := byName[n]; !ok {
				order = append(order, n)
			}
			byName[n] = append(byName[n], s)
		}
	}
	want := wanted(names)
	var out []*route.RouteConfiguration
	for _, n := range order {
		if want(n) {
			out = append(out, gatewayRouteConfig(snap, ns, src, n, byName[n]))
		}
	}
	slices.SortFunc(out, func(a, b *route.RouteConfiguration) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// gatewayRouteConfig is Istio's buildGatewayHTTPRouteConfig for the
// servers that share one route name.
func gatewayRouteConfig(snap *mesh.Snapshot, ns string, src routeSource, name string, servers []gatewayServer) *route.RouteConfiguration {
	vhosts := map[string]*route.VirtualHost{}
	port := servers[0].Server.GetPort().GetNumber()
	for _, s := range servers {
		for _, vs := range gatewayVirtualServices(snap, ns, s) {
			routes := gatewayHTTPRoutes(snap, ns, src, vs, s)
			if len(routes) == 0 {
				continue // Istio: "no routes matched", no virtual host
			}
			for _, h := range sharedHosts(snap, s.Server, vs) {
				if vh, ok := vhosts[h]; ok {
					vh.Routes = append(vh.Routes, routes...)
					continue
				}
				vhosts[h] = &route.VirtualHost{
					Name:                       fmt.Sprintf("%s:%d", h, port),
					Domains:                    []string{h},
					Routes:                     slices.Clone(routes),
					IncludeRequestAttemptCount: true,
				}
			}
		}
		if s.Server.GetTls().GetHttpsRedirect() {
			// Istio's require_tls ALL: every request of these hosts on
			// plaintext is answered with a 301 to https.
			for _, h := range s.Server.GetHosts() {
				if _, host, ok := strings.Cut(h, "/"); ok {
					h = host
				}
				h = strings.ToLower(h)
				vh, ok := vhosts[h]
				if !ok {
					vh = &route.VirtualHost{Name: fmt.Sprintf("%s:%d", h, port), Domains: []string{h}, IncludeRequestAttemptCount: true}
					vhosts[h] = vh
				}
				vh.Routes = []*route.Route{httpsRedirectRoute()}
			}
		}
	}
	rc := &route.RouteConfiguration{
		Name:                           name,
		ValidateClusters:               wrapperspb.Bool(false),
		IgnorePortInHostMatching:       true,
		MaxDirectResponseBodySizeBytes: wrapperspb.UInt32(istioconfig.MaxDirectResponseBody),
	}
	for _, h := range sortedKeys(vhosts) {
		vh := vhosts[h]
		// Istio's SortVHostRoutes: the catch-all routes of several
		// VirtualServices go last, so that none hides a later prefix.
		slices.SortStableFunc(vh.Routes, func(a, b *route.Route) int {
			return cmp.Compare(catchAllRank(a), catchAllRank(b))
		})
		rc.VirtualHosts = append(rc.VirtualHosts, vh)
	}
	// Istio's SortVirtualHosts: "*" last, so that a named host wins.
	slices.SortStableFunc(rc.VirtualHosts, func(a, b *route.VirtualHost) int {
		return cmp.Compare(wildcardRank(a.Domains[0]), wildcardRank(b.Domains[0]))
	})
	if len(rc.VirtualHosts) == 0 {
		// Istio's default vhost: no route, so every request is 404.
		rc.VirtualHosts = []*route.VirtualHost{{Name: fmt.Sprintf("blackhole:%d", port), Domains: []string{"*"}}}
	}
	return rc
}

// catchAllRank is 1 for a route that matches every request (prefix "/"
// and nothing else), 0 for the rest.
func catchAllRank(r *route.Route) int {
	m := r.GetMatch()
	if m.GetPrefix() == "/" && len(m.GetHeaders()) == 0 && len(m.GetQueryParameters()) == 0 && m.GetGrpc() == nil {
		return 1
	}
	return 0
}

func wildcardRank(d string) int {
	switch {
	case d == "*":
		return 2
	case strings.HasPrefix(d, "*"):
		return 1
	}
	return 0
}

// httpsRedirectRoute answers every request with a 301 to the same URL
// with the https scheme (Envoy's answer for require_tls ALL).
func httpsRedirectRoute() *route.Route {
	return &route.Route{
		Name:  "https_redirect",
		Match: &route.RouteMatch{PathSpecifier: &route.RouteMatch_Prefix{Prefix: "/"}},
		Action: &route.Route_Redirect{Redirect: &route.RedirectAction{
			SchemeRewriteSpecifier: &route.RedirectAction_HttpsRedirect{HttpsRedirect: true},
			ResponseCode:           route.RedirectAction_MOVED_PERMANENTLY,
		}},
	}
}

// gatewayHTTPRoutes are the routes of a VirtualService's http rules on a
// gateway server: one per match that applies (its port is the server's,
// its gateways, if any, name the server's Gateway, its sourceLabels and
// sourceNamespace the router's), as Istio's
// BuildHTTPRoutesForVirtualService with the gateway's name.
func gatewayHTTPRoutes(snap *mesh.Snapshot, ns string, src routeSource, vs *istioconfig.Config, s gatewayServer) []*route.Route {
	port := s.Server.GetPort().GetNumber()
	var out []*route.Route
	for i, rule := range vs.VirtualService().GetHttp() {
		matches := rule.Match
		if len(matches) == 0 {
			matches = []*networking.HTTPMatchRequest{nil}
		}
		for _, m := range matches {
			if m != nil {
				if m.Port != 0 && m.Port != port {
					continue
				}
				if len(m.Gateways) > 0 && !bindsGateway(m.Gateways, vs.Namespace, s.Name()) {
					continue
				}
				if !labelsSubset(m.SourceLabels, src.labels) || (m.SourceNamespace != "" && m.SourceNamespace != ns) {
					continue
				}
			}
			name := rule.Name
			if name == "" {
				name = fmt.Sprintf("%s.%s.%d", vs.Namespace, vs.Name, i)
			}
			if m.GetName() != "" {
				name += "." + m.GetName()
			}
			if r := translateRoute(snap, ns, vs, rule, name, m, port); r != nil {
				out = append(out, r)
			}
		}
	}
	return out
}

// generateGateway is Generate's LDS and RDS for a router.
func generateGateway(snap *mesh.Snapshot, proxy *proxypush.Proxy, typeURL string, watched []string) ([]*discovery.Resource, error) {
	var msgs []namedMessage
	if typeURL == xdsapi.ListenerType {
		for _, l := range gatewayListeners(snap, proxy) {
			msgs = append(msgs, namedMessage{l.Name, l})
		}
	} else {
		for _, rc := range gatewayRoutes(snap, proxy, watched) {
			msgs = append(msgs, namedMessage{rc.Name, rc})
		}
	}
	out := make([]*discovery.Resource, 0, len(msgs))
	for _, m := range msgs {
		r, err := resource(m.name, m.msg)
		if err != nil {
			return nil, fmt.Errorf("generate %s %s: %w", typeURL, m.name, err)
		}
		out = append(out, r)
	}
	return out, nil
}
