package gen

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/straitmesh/strait/internal/istioconfig"
	"github.com/straitmesh/strait/internal/mesh"
	"github.com/straitmesh/strait/internal/proxypush"
)

// The last virtual host of every outbound route configuration, for hosts
// the mesh does not know: allow_any passes the request on to its original
// destination (ALLOW_ANY), block_all answers 502 (REGISTRY_ONLY), as
// Istio's BuildCatchAllVirtualHost does.
const (
	allowAnyVirtualHost = "allow_any"
	blockAllVirtualHost = "block_all"
)

// BuildRoutes returns the outbound route configurations named by names
// (all of the proxy's when names is empty), sorted by port. A route
// configuration is named by its port ("80"); unknown names are left out.
func (g *Generator) BuildRoutes(proxy *proxypush.Proxy, names []string) []*route.RouteConfiguration {
	return buildRoutes(g.snapshot(), proxy, names)
}

func buildRoutes(snap *mesh.Snapshot, proxy *proxypush.Proxy, names []string) []*route.RouteConfiguration {
	scope := snap.ProxyScope(proxy)
	return scopeRoutes(snap, scope, names, sourceOf(snap, scope, proxy))
}

// scopeRoutes are the route configurations of the proxies of a scope whose
// labels src stands for (see routeSource).
func scopeRoutes(snap *mesh.Snapshot, scope *mesh.Scope, names []string, src routeSource) []*route.RouteConfiguration {
	ns := scope.Namespace
	// Services per HTTP port, in hostname order (egress.go).
	byPort, ports := httpPortServices(scope)
	want := wanted(names)
	var out []*route.RouteConfiguration
	for _, port := range ports {
		name := RouteName(port)
		if !want(name) {
			continue
		}
		rc := &route.RouteConfiguration{
			Name: name,
			// Istio's sidecar outbound route configuration: a
			// VirtualService's directResponse body may be up to 1 MiB
			// (validation's limit; Envoy's default is 4 KiB), and routes
			// to clusters not yet known are kept.
			MaxDirectResponseBodySizeBytes: wrapperspb.UInt32(istioconfig.MaxDirectResponseBody),
			ValidateClusters:               wrapperspb.Bool(false),
		}
		used := map[string]bool{}
		for _, svc := range byPort[port] {
			vh := &route.VirtualHost{
				Name:    fmt.Sprintf("%s:%d", svc.Hostname, port),
				Domains: domains(snap, svc, port, ns, used),
				Routes:  httpRoutes(snap, svc, port, src),
				// Istio's sidecar default (util.GetProxyHeaders).
				IncludeRequestAttemptCount: true,
			}
			if len(vh.Domains) > 0 {
				rc.VirtualHosts = append(rc.VirtualHosts, vh)
			}
		}
		rc.VirtualHosts = append(rc.VirtualHosts, catchAllVirtualHost(scope.RegistryOnly))
		out = append(out, rc)
	}
	return out
}

func catchAllVirtualHost(registryOnly bool) *route.VirtualHost {
	if registryOnly {
		return &route.VirtualHost{
			Name:    blockAllVirtualHost,
			Domains: []string{"*"},
			Routes: []*route.Route{{
				Name:   blockAllVirtualHost,
				Match:  &route.RouteMatch{PathSpecifier: &route.RouteMatch_Prefix{Prefix: "/"}},
				Action: &route.Route_DirectResponse{DirectResponse: &route.DirectResponseAction{Status: 502}},
			}},
			IncludeRequestAttemptCount: true,
		}
	}
	return &route.VirtualHost{
		Name:                       allowAnyVirtualHost,
		Domains:                    []string{"*"},
		Routes:                     []*route.Route{outboundPrefixRoute(allowAnyVirtualHost, PassthroughCluster)},
		IncludeRequestAttemptCount: true,
	}
}

// domains returns the names a request for svc may carry in its Host
// header: the FQDN, its short forms (the bare name only for proxies in the
// service's namespace) and each VIP (an IPv6 one in brackets), each bare
// and with ":PORT". A domain already used by an earlier virtual host is
// skipped: Envoy rejects duplicates.
func domains(snap *mesh.Snapshot, svc *mesh.Service, port uint32, proxyNS string, used map[string]bool) []string {
	hosts := []string{svc.Hostname}
	if short, ok := strings.CutSuffix(svc.Hostname, ".svc."+snap.Domain); ok {
		if name, ns, ok := strings.Cut(short, "."); ok && !strings.Contains(ns, ".") {
			hosts = append(hosts, short+".svc", short)
			if ns == proxyNS {
				hosts = append(hosts, name)
			}
		}
	}
	for _, a := range svc.Addresses {
		if ip, err := netip.ParseAddr(a); err == nil {
			if ip.Is6() {
				// A Host header carries an IPv6 address in brackets
				// (RFC 3986 IP-literal); bare, "2001:db8::1:80" would be
				// another address, not the VIP with its port.
				a = "[" + a + "]"
			}
			hosts = append(hosts, a)
		}
	}
	var out []string
	for _, h := range hosts {
		for _, d := range []string{h, fmt.Sprintf("%s:%d", h, port)} {
			if !used[d] {
				used[d] = true
				out = append(out, d)
			}
		}
	}
	return out
}

// httpRoutes returns the routes of svc's virtual host on port for a proxy
// of src.namespace: the http rules of the VirtualServices for its host that
// are exported to that namespace, one route per match that applies to the
// proxy (Istio's TranslateRoutes: a rule none of whose matches applies
// yields no route), or one default route.
func httpRoutes(snap *mesh.Snapshot, svc *mesh.Service, port uint32, src routeSource) []*route.Route {
	var out []*route.Route
	for _, vs := range snap.VirtualServicesFor(src.namespace, svc.Hostname) {
		spec := vs.VirtualService()
		if !mesh.BindsMesh(spec.Gateways) {
			continue
		}
		for i, rule := range spec.Http {
			matches := rule.Match
			if len(matches) == 0 {
				matches = []*networking.HTTPMatchRequest{nil}
			}
			for _, m := range matches {
				if !src.applies(m, port) {
					continue
				}
				name := rule.Name
				if name == "" {
					name = fmt.Sprintf("%s.%s.%d", vs.Namespace, vs.Name, i)
				}
				if m.GetName() != "" {
					name += "." + m.GetName()
				}
				if r := translateRoute(snap, src.namespace, vs, rule, name, m, port); r != nil {
					out = append(out, r)
				}
			}
		}
	}
	if len(out) == 0 {
		// Istio's BuildDefaultHTTPOutboundRoute: with the default retry
		// policy.
		r := outboundPrefixRoute("default", OutboundClusterName(port, "", svc.Hostname))
		r.GetRoute().RetryPolicy = defaultRetryPolicy()
		appendHashPolicy(r.GetRoute(), snap, src.namespace, svc.Hostname, "", port) // trafficpolicy.go
		out = append(out, r)
	}
	return out
}

// destinationCluster names the outbound cluster of a destination: its
// port, else the destination service's only port, else the port the
// request arrived on.
func destinationCluster(snap *mesh.Snapshot, ns string, d *networking.Destination, port uint32) string {
	host := snap.ResolveHost(d.Host, ns)
	p := d.GetPort().GetNumber()
	if p == 0 {
		if svc := snap.Service(host); svc != nil && len(svc.Ports) == 1 {
			p = svc.Ports[0].Number
		} else {
			p = port
		}
	}
	return OutboundClusterName(p, d.Subset, host)
}

func prefixRoute(name, prefix, clusterName string) *route.Route {
	return &route.Route{
		Name:   name,
		Match:  &route.RouteMatch{PathSpecifier: &route.RouteMatch_Prefix{Prefix: prefix}},
		Action: &route.Route_Route{Route: &route.RouteAction{ClusterSpecifier: &route.RouteAction_Cluster{Cluster: clusterName}, Timeout: noTimeout()}},
	}
}

// outboundPrefixRoute is an outbound catch-all route to clusterName with
// Istio's timeouts: none, and a gRPC call's own grpc-timeout uncapped
// (max_grpc_timeout 0s).
func outboundPrefixRoute(name, clusterName string) *route.Route {
	r := prefixRoute(name, "/", clusterName)
	r.GetRoute().MaxGrpcTimeout = noTimeout()
	return r
}

// noTimeout is a route timeout of 0: none (Envoy's default would be 15 s).
func noTimeout() *durationpb.Duration { return durationpb.New(0) }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
