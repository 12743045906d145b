package gatewayapi

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/straitmesh/strait/internal/istioconfig"
	"github.com/straitmesh/strait/internal/proxypush"
)

// finish emits the Istio configs of the served listeners and of the
// mesh routes, and the Gateways' statuses.
func (t *translator) finish() {
	for _, g := range sortByAge(t.in.Gateways) {
		gw := t.gateways[gatewayRef(g.Namespace, g.Name)]
		if gw == nil {
			continue
		}
		t.out.Gateways[Ref{"Gateway", g.Namespace, g.Name}] = t.gatewayStatus(gw)
		if gw.reason != "" {
			continue
		}
		for _, l := range gw.listeners {
			if !l.served() {
				continue
			}
			c, err := t.istioGateway(gw, l)
			if err != nil {
				// Every field set is one the Gateway kind honours: a
				// failure here is a bug, reported on the listener's
				// status rather than lost.
				l.acceptReason, l.acceptMessage = "Invalid", err.Error()
				t.out.Gateways[Ref{"Gateway", g.Namespace, g.Name}] = t.gatewayStatus(gw)
				continue
			}
			t.out.Configs = append(t.out.Configs, c)
			for _, host := range slices.Sorted(mapsKeys(l.routes)) {
				if c := t.virtualService(gw, l, host); c != nil {
					t.out.Configs = append(t.out.Configs, c)
				}
			}
			for _, host := range slices.Sorted(mapsKeys(l.tlsRoutes)) {
				if c := t.streamVirtualService(gw, l, host, l.tlsRoutes[host], nil); c != nil {
					t.out.Configs = append(t.out.Configs, c)
				}
			}
			if len(l.tcpRoutes) > 0 {
				if c := t.streamVirtualService(gw, l, "*", nil, l.tcpRoutes); c != nil {
					t.out.Configs = append(t.out.Configs, c)
				}
			}
		}
	}
	t.out.Configs = append(t.out.Configs, t.meshVirtualServices()...)
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// virtualService is the VirtualService of one listener and host: the
// routes of every route bound there, oldest route first, then in the
// spec's precedence (Istio's sortHTTPRoutes).
func (t *translator) virtualService(gw *gateway, l *listener, host string) *istioconfig.Config {
	bound := l.routes[host]
	routes := make([]*networking.HTTPRoute, 0, len(bound))
	var parents []string
	for _, b := range bound {
		routes = append(routes, b.route)
		if p := b.from.Kind + "/" + b.from.Name + "." + b.from.Namespace; !slices.Contains(parents, p) {
			parents = append(parents, p)
		}
	}
	sortHTTPRoutes(routes)
	for i, r := range routes {
		routes[i] = segmentPrefixes(r)
	}
	spec := &networking.VirtualService{
		Hosts:    []string{host},
		Gateways: []string{gw.obj.Namespace + "/" + l.istioName},
		Http:     routes,
	}
	name := l.istioName + "-" + strings.ReplaceAll(host, "*", "wildcard")
	c, err := validated(istioconfig.KindVirtualService, gw.obj.Namespace, name, spec, map[string]string{"internal.istio.io/parents": strings.Join(parents, ",")})
	if err != nil {
		// Each route was validated alone (validateRoutes): only their
		// combination can fail here. Leave it out rather than serve part.
		t.out.Dropped = append(t.out.Dropped, fmt.Errorf("routes %s: %w", strings.Join(parents, ", "), err))
		return nil
	}
	return c
}

// segmentPrefixes returns r with its prefix matches made to match whole
// path segments, as the Gateway API's PathPrefix means ("/v2" matches
// "/v2" and "/v2/x", not "/v2example"; Istio serves the prefix of a
// Gateway API route as Envoy's path_separated_prefix): a regex
// "PREFIX(/.*)?" over the whole path. It runs after the routes are
// sorted, so that the precedence is still the prefix's. A route that
// rewrites the matched prefix (uri, or a redirect's uri or prefix
// rewrite) keeps its plain prefix, which the rewrite replaces (Istio's
// validation wants a prefix match under a prefix rewrite). r is not modified (a route may be
// bound to several listeners and hosts).
func segmentPrefixes(r *networking.HTTPRoute) *networking.HTTPRoute {
	if r.GetRewrite().GetUri() != "" || r.GetRedirect().GetUri() != "" || r.GetRedirect().GetPrefixRewrite() != "" {
		return r
	}
	var out *networking.HTTPRoute
	for i, m := range r.GetMatch() {
		p := m.GetUri().GetPrefix()
		if p == "" || p == "/" {
			continue
		}
		if out == nil {
			out = cloneRoute(r)
		}
		out.Match[i].Uri = &networking.StringMatch{MatchType: &networking.StringMatch_Regex{Regex: regexp.QuoteMeta(p) + "(/.*)?"}}
	}
	if out == nil {
		return r
	}
	return out
}

// streamVirtualService is the VirtualService of a TLS listener's host
// (its TLSRoutes' tls rules) or of a TCP listener (its TCPRoutes' tcp
// rules, the oldest first: a TCP listener forwards by its first rule).
func (t *translator) streamVirtualService(gw *gateway, l *listener, host string, tls []*networking.TLSRoute, tcp []*networking.TCPRoute) *istioconfig.Config {
	spec := &networking.VirtualService{
		Hosts:    []string{host},
		Gateways: []string{gw.obj.Namespace + "/" + l.istioName},
		Tls:      tls,
		Tcp:      tcp,
	}
	name := l.istioName + "-" + strings.ReplaceAll(host, "*", "wildcard")
	c, err := validated(istioconfig.KindVirtualService, gw.obj.Namespace, name, spec, map[string]string{"internal.istio.io/parents": strings.Join(l.streamParents[host], ",")})
	if err != nil {
		return nil
	}
	return c
}

// sortHTTPRoutes orders routes by the spec's precedence, as Istio:
// exact path, then prefix, then regex; longer paths first; a method
// match; more header matches; more query matches. Stable: otherwise the
// older route first.
func sortHTTPRoutes(routes []*networking.HTTPRoute) {
	slices.SortStableFunc(routes, func(a, b *networking.HTTPRoute) int {
		switch {
		case len(a.Match) == 0 && len(b.Match) == 0:
			return 0
		case len(a.Match) == 0:
			return 1
		case len(b.Match) == 0:
			return -1
		}
		m1, m2 := a.Match[0], b.Match[0]
		return cmp.Or(
			cmp.Compare(uriRank(m2), uriRank(m1)),
			cmp.Compare(uriLength(m2), uriLength(m1)),
			cmp.Compare(boolInt(m2.Method != nil), boolInt(m1.Method != nil)),
			cmp.Compare(len(m2.Headers), len(m1.Headers)),
			cmp.Compare(len(m2.QueryParams), len(m1.QueryParams)),
		)
	})
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func uriRank(m *networking.HTTPMatchRequest) int {
	switch m.GetUri().GetMatchType().(type) {
	case *networking.StringMatch_Exact:
		return 3
	case *networking.StringMatch_Prefix:
		return 2
	case *networking.StringMatch_Regex:
		return 1
	}
	return -1
}

func uriLength(m *networking.HTTPMatchRequest) int {
	switch u := m.GetUri().GetMatchType().(type) {
	case *networking.StringMatch_Exact:
		return len(u.Exact)
	case *networking.StringMatch_Prefix:
		return len(u.Prefix)
	case *networking.StringMatch_Regex:
		return len(u.Regex)
	}
	return 0
}

func cloneRoute(r *networking.HTTPRoute) *networking.HTTPRoute {
	return proto.Clone(r).(*networking.HTTPRoute)
}

// validateRoutes puts a route's translation through the checks of every
// VirtualService (istioconfig: the fields Strait honours, Istio's
// validation), so that what Strait would refuse in a VirtualService
// refuses the route, with the message naming the field.
func validateRoutes(ref Ref, spec *networking.VirtualService) error {
	if len(spec.Http)+len(spec.Tls)+len(spec.Tcp) == 0 {
		return nil
	}
	spec.Hosts, spec.Gateways = []string{"*"}, []string{"gateway"}
	for _, r := range spec.Tls {
		for _, m := range r.Match {
			if len(m.SniHosts) > 0 {
				spec.Hosts = m.SniHosts
			}
		}
	}
	_, err := validated(istioconfig.KindVirtualService, ref.Namespace, ref.Name, spec, nil)
	if err != nil {
		return fmt.Errorf("the translated VirtualService is refused: %w", err)
	}
	return nil
}

// validated is the config of spec after the istioconfig checks.
func validated(kind proxypush.Kind, namespace, name string, spec proto.Message, annotations map[string]string) (*istioconfig.Config, error) {
	js, err := protojson.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("%s %s/%s: %w", kind, namespace, name, err)
	}
	meta := fmt.Sprintf(`{"name":%q,"namespace":%q}`, name, namespace)
	doc := fmt.Sprintf(`{"apiVersion":"networking.istio.io/v1","kind":%q,"metadata":%s,"spec":%s}`, kind, meta, js)
	src := "gateway-api " + string(kind) + " " + namespace + "/" + name
	res := istioconfig.ParseFile(src, []byte(doc))
	if res.Err != nil {
		return nil, res.Err
	}
	if len(res.Configs) != 1 {
		return nil, fmt.Errorf("%s: not translated", src)
	}
	c := res.Configs[0]
	c.Annotations = annotations
	return c, nil
}
