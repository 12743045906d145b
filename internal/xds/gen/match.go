package gen

import (
	"maps"
	"slices"
	"sort"
	"strings"

	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcher "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/straitmesh/strait/internal/mesh"
	"github.com/straitmesh/strait/internal/proxypush"
)

// routeSource is what route generation knows of the proxy when it drops
// the matches that do not apply to it: Istio evaluates a match's
// sourceLabels and sourceNamespace in the control plane.
type routeSource struct {
	namespace string
	labels    map[string]string
}

// sourceOf is the routeSource of a proxy: its namespace, and the labels of
// its workload (found by IP, as the Sidecar that applies to it is).
func sourceOf(snap *mesh.Snapshot, scope *mesh.Scope, proxy *proxypush.Proxy) routeSource {
	src := routeSource{namespace: scope.Namespace}
	if proxy != nil {
		if w := snap.WorkloadByIP(proxy.IP); w != nil {
			src.labels = w.Labels
		}
	}
	return src
}

// applies reports whether a match (nil: the rule has none) applies to the
// proxy's routes on port, as Istio's TranslateRoute and sourceMatchHTTP
// decide for a sidecar: the match's port must be the listener's; a match
// that lists gateways applies only if they include "mesh" (and then its
// sourceLabels are not looked at, as in Istio); else its sourceLabels must
// be a subset of the proxy's labels and its sourceNamespace the proxy's
// namespace.
func (s routeSource) applies(m *networking.HTTPMatchRequest, port uint32) bool {
	if m == nil {
		return true
	}
	if m.Port != 0 && m.Port != port {
		return false
	}
	if len(m.Gateways) > 0 {
		return slices.Contains(m.Gateways, mesh.MeshGateway)
	}
	if !labelsSubset(m.SourceLabels, s.labels) {
		return false
	}
	return m.SourceNamespace == "" || m.SourceNamespace == s.namespace
}

func labelsSubset(sub, of map[string]string) bool {
	for k, v := range sub {
		if w, ok := of[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// sourceSelectors returns the distinct sourceLabels of the matches, in the
// VirtualServices of the scope's services, that can change a proxy's
// routes (those without gateways), in a fixed order. Proxies of one scope
// whose labels satisfy the same selectors get the same routes.
func sourceSelectors(snap *mesh.Snapshot, scope *mesh.Scope) []map[string]string {
	seen := map[string]bool{}
	var out []map[string]string
	for _, svc := range scope.Services {
		for _, vs := range snap.VirtualServices(svc.Hostname) {
			for _, rule := range vs.VirtualService().GetHttp() {
				for _, m := range rule.GetMatch() {
					if len(m.GetSourceLabels()) == 0 || len(m.GetGateways()) > 0 {
						continue
					}
					key := selectorKey(m.SourceLabels)
					if !seen[key] {
						seen[key] = true
						out = append(out, m.SourceLabels)
					}
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return selectorKey(out[i]) < selectorKey(out[j]) })
	return out
}

func selectorKey(labels map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(labels[k])
		b.WriteByte(',')
	}
	return b.String()
}

// sourceVariant names which of the selectors a proxy's labels satisfy
// ("" when none: the routes every proxy of the scope shares).
func sourceVariant(selectors []map[string]string, labels map[string]string) string {
	var b []byte
	hit := false
	for _, sel := range selectors {
		if labelsSubset(sel, labels) {
			b, hit = append(b, '1'), true
		} else {
			b = append(b, '0')
		}
	}
	if !hit {
		return ""
	}
	return string(b)
}

// Pseudo-headers Istio matches method, authority and scheme on.
const (
	headerMethod    = ":method"
	headerAuthority = ":authority"
	headerScheme    = ":scheme"
)

// routeMatch translates an HTTPMatchRequest as Istio's TranslateRouteMatch
// does: headers and withoutHeaders (inverted, a missing header taken as
// empty) sorted by (lower-cased) name, then :method, :authority and :scheme header
// matchers, the uri as path / prefix / safe_regex, case_sensitive, and
// query_parameters sorted by name. An empty StringMatch (or the regex "*")
// is a present_match.
func routeMatch(m *networking.HTTPMatchRequest) *route.RouteMatch {
	rm := &route.RouteMatch{PathSpecifier: &route.RouteMatch_Prefix{Prefix: "/"}}
	if m == nil {
		return rm
	}
	// Header names are case-insensitive; Envoy lower-cases them when it
	// loads the config, and so do we, so the order below is stable.
	for _, name := range sortedKeys(m.Headers) {
		rm.Headers = append(rm.Headers, headerMatcher(strings.ToLower(name), m.Headers[name]))
	}
	for _, name := range sortedKeys(m.WithoutHeaders) {
		sm := m.WithoutHeaders[name]
		hm := headerMatcher(strings.ToLower(name), sm)
		hm.InvertMatch = true
		// treat_missing_header_as_empty conflicts with present_match.
		if !isPresentMatch(sm) {
			hm.TreatMissingHeaderAsEmpty = true
		}
		rm.Headers = append(rm.Headers, hm)
	}
	sort.SliceStable(rm.Headers, func(i, j int) bool { return rm.Headers[i].Name < rm.Headers[j].Name })
	switch u := m.GetUri().GetMatchType().(type) {
	case *networking.StringMatch_Exact:
		rm.PathSpecifier = &route.RouteMatch_Path{Path: u.Exact}
	case *networking.StringMatch_Prefix:
		rm.PathSpecifier = &route.RouteMatch_Prefix{Prefix: u.Prefix}
	case *networking.StringMatch_Regex:
		rm.PathSpecifier = &route.RouteMatch_SafeRegex{SafeRegex: &matcher.RegexMatcher{Regex: u.Regex}}
	}
	rm.CaseSensitive = wrapperspb.Bool(!m.IgnoreUriCase)
	if m.Method != nil {
		rm.Headers = append(rm.Headers, headerMatcher(headerMethod, m.Method))
	}
	if m.Authority != nil {
		rm.Headers = append(rm.Headers, headerMatcher(headerAuthority, m.Authority))
	}
	if m.Scheme != nil {
		rm.Headers = append(rm.Headers, headerMatcher(headerScheme, m.Scheme))
	}
	for _, name := range sortedKeys(m.QueryParams) {
		sm := m.QueryParams[name]
		qm := &route.QueryParameterMatcher{Name: name}
		if isPresentMatch(sm) {
			qm.QueryParameterMatchSpecifier = &route.QueryParameterMatcher_PresentMatch{PresentMatch: true}
		} else {
			qm.QueryParameterMatchSpecifier = &route.QueryParameterMatcher_StringMatch{StringMatch: stringMatcher(sm)}
		}
		rm.QueryParameters = append(rm.QueryParameters, qm)
	}
	return rm
}

// headerMatcher is Istio's translateHeaderMatch.
func headerMatcher(name string, sm *networking.StringMatch) *route.HeaderMatcher {
	hm := &route.HeaderMatcher{Name: name}
	if isPresentMatch(sm) {
		hm.HeaderMatchSpecifier = &route.HeaderMatcher_PresentMatch{PresentMatch: true}
		return hm
	}
	hm.HeaderMatchSpecifier = &route.HeaderMatcher_StringMatch{StringMatch: stringMatcher(sm)}
	return hm
}

// isPresentMatch: an empty StringMatch, or the regex "*" (not RE2: Istio
// reads it as "any value"), matches on presence.
func isPresentMatch(sm *networking.StringMatch) bool {
	if sm.GetMatchType() == nil {
		return true
	}
	r, ok := sm.GetMatchType().(*networking.StringMatch_Regex)
	return ok && r.Regex == "*"
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
