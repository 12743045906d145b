package gen

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcher "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/straitmesh/strait/internal/config"
	"github.com/straitmesh/strait/internal/mesh"
	"github.com/straitmesh/strait/internal/model"
)

// allowAnyVirtualHost is the last virtual host of every outbound route
// configuration: traffic for hosts the mesh does not know leaves as is.
const allowAnyVirtualHost = "allow_any"

// BuildRoutes returns the outbound route configurations named by names
// (all of the proxy's when names is empty), sorted by port. A route
// configuration is named by its port ("80"); unknown names are left out.
func (g *Generator) BuildRoutes(proxy *model.Proxy, names []string) []*route.RouteConfiguration {
	return buildRoutes(g.snapshot(), proxy, names)
}

func buildRoutes(snap *mesh.Snapshot, proxy *model.Proxy, names []string) []*route.RouteConfiguration {
	return scopeRoutes(snap, snap.ProxyScope(proxy), names)
}

// scopeRoutes are the route configurations every proxy of a scope shares.
func scopeRoutes(snap *mesh.Snapshot, scope *mesh.Scope, names []string) []*route.RouteConfiguration {
	ns := scope.Namespace
	// Services per HTTP port, in hostname order.
	byPort := map[uint32][]*mesh.Service{}
	var ports []uint32
	for _, svc := range scope.Services {
		for _, p := range svc.Ports {
			if p.Protocol.IsHTTP() && p.Number != OutboundCapturePort && p.Number != InboundCapturePort {
				byPort[p.Number] = append(byPort[p.Number], svc)
				ports = append(ports, p.Number)
			}
		}
	}
	ports = sortedUnique(ports)
	want := wanted(names)
	var out []*route.RouteConfiguration
	for _, port := range ports {
		name := RouteName(port)
		if !want(name) {
			continue
		}
		rc := &route.RouteConfiguration{Name: name}
		used := map[string]bool{}
		for _, svc := range byPort[port] {
			vh := &route.VirtualHost{
				Name:    fmt.Sprintf("%s:%d", svc.Hostname, port),
				Domains: domains(snap, svc, port, ns, used),
				Routes:  httpRoutes(snap, svc, port),
			}
			if len(vh.Domains) > 0 {
				rc.VirtualHosts = append(rc.VirtualHosts, vh)
			}
		}
		rc.VirtualHosts = append(rc.VirtualHosts, &route.VirtualHost{
			Name:    allowAnyVirtualHost,
			Domains: []string{"*"},
			Routes:  []*route.Route{prefixRoute(allowAnyVirtualHost, "/", PassthroughCluster)},
		})
		out = append(out, rc)
	}
	return out
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

// httpRoutes returns the routes of svc's virtual host on port: the http
// rules of the VirtualServices for its host, or one default route.
func httpRoutes(snap *mesh.Snapshot, svc *mesh.Service, port uint32) []*route.Route {
	var out []*route.Route
	for _, vs := range snap.VirtualServices(svc.Hostname) {
		spec := vs.VirtualService()
		if !appliesToMesh(spec.Gateways) {
			continue
		}
		for i, rule := range spec.Http {
			action := routeAction(snap, vs, rule, port)
			if action == nil {
				continue
			}
			matches := rule.Match
			if len(matches) == 0 {
				matches = []*networking.HTTPMatchRequest{nil}
			}
			for _, m := range matches {
				if m != nil && ((m.Port != 0 && m.Port != port) || !appliesToMesh(m.Gateways)) {
					continue
				}
				name := rule.Name
				if name == "" {
					name = fmt.Sprintf("%s.%s.%d", vs.Namespace, vs.Name, i)
				}
				out = append(out, &route.Route{
					Name:   name,
					Match:  routeMatch(m),
					Action: &route.Route_Route{Route: action},
				})
			}
		}
	}
	if len(out) == 0 {
		r := prefixRoute("default", "/", OutboundClusterName(port, "", svc.Hostname))
		appendHashPolicy(r.GetRoute(), snap, svc.Hostname, "", port) // trafficpolicy.go
		out = append(out, r)
	}
	return out
}

func appliesToMesh(gateways []string) bool {
	return len(gateways) == 0 || slices.Contains(gateways, "mesh")
}

// routeAction turns a rule's destinations into a cluster or weighted
// clusters; nil when the rule has no destination (redirects and direct
// responses are not supported yet).
func routeAction(snap *mesh.Snapshot, vs *config.Config, rule *networking.HTTPRoute, port uint32) *route.RouteAction {
	type dest struct {
		cluster string
		weight  uint32
	}
	var dests []dest
	var hashes []*networking.Destination
	for _, d := range rule.Route {
		if d.GetDestination() == nil {
			continue
		}
		if len(rule.Route) > 1 && d.Weight == 0 {
			continue
		}
		dests = append(dests, dest{destinationCluster(snap, vs.Namespace, d.Destination, port), uint32(d.Weight)})
		hashes = append(hashes, d.Destination)
	}
	if len(dests) == 0 {
		return nil
	}
	// Istio disables Envoy's 15 s default route timeout unless the
	// VirtualService sets one (networking/core/route: setTimeout).
	a := &route.RouteAction{Timeout: noTimeout()}
	if len(dests) == 1 {
		a.ClusterSpecifier = &route.RouteAction_Cluster{Cluster: dests[0].cluster}
	} else {
		wc := &route.WeightedCluster{}
		for _, d := range dests {
			wc.Clusters = append(wc.Clusters, &route.WeightedCluster_ClusterWeight{Name: d.cluster, Weight: wrapperspb.UInt32(d.weight)})
		}
		a.ClusterSpecifier = &route.RouteAction_WeightedClusters{WeightedClusters: wc}
	}
	if t := rule.GetTimeout(); t != nil {
		a.Timeout = durationpb.New(t.AsDuration())
	}
	for _, d := range hashes {
		host := snap.ResolveHost(d.Host, vs.Namespace)
		appendHashPolicy(a, snap, host, d.Subset, destinationPort(snap, host, d, port)) // trafficpolicy.go
	}
	return a
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

func routeMatch(m *networking.HTTPMatchRequest) *route.RouteMatch {
	rm := &route.RouteMatch{PathSpecifier: &route.RouteMatch_Prefix{Prefix: "/"}}
	if m == nil {
		return rm
	}
	switch u := m.GetUri().GetMatchType().(type) {
	case *networking.StringMatch_Exact:
		rm.PathSpecifier = &route.RouteMatch_Path{Path: u.Exact}
	case *networking.StringMatch_Prefix:
		rm.PathSpecifier = &route.RouteMatch_Prefix{Prefix: u.Prefix}
	case *networking.StringMatch_Regex:
		rm.PathSpecifier = &route.RouteMatch_SafeRegex{SafeRegex: &matcher.RegexMatcher{Regex: u.Regex}}
	}
	if m.IgnoreUriCase {
		rm.CaseSensitive = wrapperspb.Bool(false)
	}
	headers := map[string]*networking.StringMatch{}
	for k, v := range m.Headers {
		headers[strings.ToLower(k)] = v
	}
	for name, sm := range map[string]*networking.StringMatch{":method": m.Method, ":authority": m.Authority, ":scheme": m.Scheme} {
		if sm != nil {
			headers[name] = sm
		}
	}
	for _, name := range sortedKeys(headers) {
		if sm := stringMatcher(headers[name]); sm != nil {
			rm.Headers = append(rm.Headers, &route.HeaderMatcher{
				Name:                 name,
				HeaderMatchSpecifier: &route.HeaderMatcher_StringMatch{StringMatch: sm},
			})
		}
	}
	return rm
}

func stringMatcher(m *networking.StringMatch) *matcher.StringMatcher {
	switch t := m.GetMatchType().(type) {
	case *networking.StringMatch_Exact:
		return &matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_Exact{Exact: t.Exact}}
	case *networking.StringMatch_Prefix:
		return &matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_Prefix{Prefix: t.Prefix}}
	case *networking.StringMatch_Regex:
		return &matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_SafeRegex{SafeRegex: &matcher.RegexMatcher{Regex: t.Regex}}}
	}
	return nil
}

func prefixRoute(name, prefix, clusterName string) *route.Route {
	return &route.Route{
		Name:   name,
		Match:  &route.RouteMatch{PathSpecifier: &route.RouteMatch_Prefix{Prefix: prefix}},
		Action: &route.Route_Route{Route: &route.RouteAction{ClusterSpecifier: &route.RouteAction_Cluster{Cluster: clusterName}, Timeout: noTimeout()}},
	}
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
