package validate

import (
	"fmt"
	"regexp"
	"strings"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/straitmesh/strait/internal/istioconfig/fielderr"
)

// This file checks a VirtualService: its hosts, gateways, destinations and
// HTTP matches (the checks of one HTTP route's actions are
// validateHTTPRouteActions's).

func validateVirtualService(el *fielderr.List, namespace string, s *networking.VirtualService) {
	// A VirtualService without hosts is a delegate: its http routes are
	// merged under the root route that names it (Istio's
	// validateVirtualService with delegation on).
	if len(s.Hosts) == 0 {
		if len(s.Gateways) > 0 {
			el.Add("spec.gateways", "a delegate VirtualService (one without hosts) must not set gateways; set them on the root")
		}
		if len(s.Tcp) > 0 || len(s.Tls) > 0 {
			el.Add("spec", "a delegate VirtualService (one without hosts) may only have http routes")
		}
		for i, r := range s.Http {
			if r.GetDelegate() != nil {
				el.Add(fmt.Sprintf("spec.http[%d].delegate", i), "a delegate VirtualService (one without hosts) cannot delegate again")
			}
		}
	}
	mesh := len(s.Gateways) == 0
	for _, g := range s.Gateways {
		mesh = mesh || g == "mesh"
	}
	for i, h := range s.Hosts {
		hf := fmt.Sprintf("spec.hosts[%d]", i)
		validateHost(el, hf, h)
		if h == "*" && mesh {
			el.Add(hf, `"*" is not allowed for the sidecars (gateways unset or "mesh"); name the hosts`)
		}
		for j := 0; j < i; j++ {
			if hostsOverlap(s.Hosts[j], h) {
				el.Add(hf, "%q overlaps spec.hosts[%d] %q; list each host once", h, j, s.Hosts[j])
			}
		}
	}
	if len(s.Http) == 0 && len(s.Tcp) == 0 && len(s.Tls) == 0 {
		el.Add("spec", "must have at least one of http, tcp or tls routes")
	}
	for i, r := range s.Http {
		f := fmt.Sprintf("spec.http[%d]", i)
		if r == nil {
			el.Add(f, "must not be null")
			continue
		}
		for j, m := range r.Match {
			if m != nil {
				validateHTTPMatch(el, fmt.Sprintf("%s.match[%d]", f, j), m)
			}
		}
		if len(r.Route) == 0 && r.Redirect == nil && r.DirectResponse == nil && r.Delegate == nil {
			el.Add(f+".route", "must list at least one destination")
		}
		if d := r.Delegate; d != nil {
			if d.Name == "" {
				el.Add(f+".delegate.name", "must name the delegate VirtualService")
			}
			if len(r.Route) > 0 || r.Redirect != nil || r.DirectResponse != nil {
				el.Add(f+".delegate", "cannot be combined with route, redirect or directResponse: the delegate's routes answer")
			}
		}
		weights := make([]int32, 0, len(r.Route))
		for k, d := range r.Route {
			df := fmt.Sprintf("%s.route[%d]", f, k)
			if d == nil {
				el.Add(df, "must not be null")
				continue
			}
			validateDestination(el, df+".destination", d.Destination)
			weights = append(weights, d.Weight)
		}
		validateWeights(el, f+".route", weights)
		validateHTTPRouteActions(el, f, r)
		validateHTTPActionLimits(el, f, r)
	}
	for i, r := range s.Tcp {
		f := fmt.Sprintf("spec.tcp[%d]", i)
		if r == nil {
			continue
		}
		for j, m := range r.Match {
			if m == nil {
				continue
			}
			mf := fmt.Sprintf("%s.match[%d]", f, j)
			if m.SourceSubnet != "" {
				validateSubnet(el, mf+".sourceSubnet", m.SourceSubnet)
			}
			for k, sn := range m.DestinationSubnets {
				validateSubnet(el, fmt.Sprintf("%s.destinationSubnets[%d]", mf, k), sn)
			}
			if m.Port != 0 && !validPort(m.Port) {
				el.Add(mf+".port", "%d is not a valid port (1-65535)", m.Port)
			}
			validateLabels(el, mf+".sourceLabels", m.SourceLabels)
		}
		if len(r.Route) == 0 {
			el.Add(f+".route", "must list at least one destination")
		}
		validateRouteDestinations(el, f+".route", r.Route)
	}
	for i, r := range s.Tls {
		f := fmt.Sprintf("spec.tls[%d]", i)
		if r == nil {
			el.Add(f, "must not be null")
			continue
		}
		validateTLSRoute(el, f, r, s.Hosts)
		validateRouteDestinations(el, f+".route", r.Route)
	}
	validateExportTo(el, namespace, s.ExportTo, false)
}

// validateRouteDestinations checks the destinations and weights of a tcp
// or tls rule.
func validateRouteDestinations(el *fielderr.List, f string, route []*networking.RouteDestination) {
	weights := make([]int32, 0, len(route))
	for k, d := range route {
		df := fmt.Sprintf("%s[%d]", f, k)
		if d == nil {
			el.Add(df, "must not be null")
			continue
		}
		validateDestination(el, df+".destination", d.Destination)
		weights = append(weights, d.Weight)
	}
	validateWeights(el, f, weights)
}

// validateHTTPActionLimits refuses the values of honoured fields that
// strait-proxy cannot carry out: redirect codes Envoy has no response code
// for (Istio drops such a route with a warning), and header values with
// '%', which Envoy reads as a substitution formatter.
func validateHTTPActionLimits(el *fielderr.List, f string, r *networking.HTTPRoute) {
	if rd := r.Redirect; rd != nil {
		switch c := rd.RedirectCode; {
		case c == 0, c == 301, c == 302, c == 303, c == 307, c == 308:
		case c >= 300 && c <= 399: // other codes: validateRedirect
			el.Add(f+".redirect.redirectCode", "%d: %s (use 301, 302, 303, 307 or 308)", rd.RedirectCode, fielderr.NotSupported)
		}
	}
	checkHeaders := func(hf string, h *networking.Headers) {
		for _, op := range []struct {
			name string
			m    map[string]string
		}{
			{"request.set", h.GetRequest().GetSet()}, {"request.add", h.GetRequest().GetAdd()},
			{"response.set", h.GetResponse().GetSet()}, {"response.add", h.GetResponse().GetAdd()},
		} {
			for _, k := range sortedKeys(op.m) {
				if strings.Contains(op.m[k], "%") {
					el.Add(fmt.Sprintf("%s.%s[%s]", hf, op.name, k), "a value with '%%' (Envoy's substitution formatters) is %s", fielderr.NotSupported)
				}
			}
		}
	}
	checkHeaders(f+".headers", r.Headers)
	for k, d := range r.Route {
		if d != nil {
			checkHeaders(fmt.Sprintf("%s.route[%d].headers", f, k), d.Headers)
		}
	}
}

func validateDestination(el *fielderr.List, f string, d *networking.Destination) {
	if d == nil {
		el.Add(f, "must be set")
		return
	}
	if d.Host == "" {
		el.Add(f+".host", "must be set")
	} else {
		validateHost(el, f+".host", d.Host)
		if d.Host == "*" {
			el.Add(f+".host", `"*" is not a destination; name the service's host`)
		}
	}
	if d.Subset != "" && (len(d.Subset) > 63 || !dns1123Label.MatchString(d.Subset)) {
		el.Add(f+".subset", "%q is not a valid subset name (a DNS label: lower-case letters, digits and '-')", d.Subset)
	}
	if d.Port != nil && !validPort(d.Port.Number) {
		el.Add(f+".port.number", "%d is not a valid port (1-65535)", d.Port.Number)
	}
}

// StringMatch kinds, for what Istio accepts in each place
// (pkg/config/validation: validateHTTPRouteMatchRequest).
const (
	// uriMatch: an empty prefix is allowed.
	uriMatch = iota
	// valueMatch: scheme, method, authority, headers, queryParams: a prefix
	// must not be empty; an empty StringMatch matches on presence.
	valueMatch
	// withoutMatch: withoutHeaders, where the regex "*" means "present".
	withoutMatch
)

// maxRegexLen is Istio's bound on a match regex (Envoy's RE2 program size
// is always larger than the length).
const maxRegexLen = 1024

// jwtClaimPrefix starts a header match on a JWT claim
// ("@request.auth.claims.group"), which needs request authentication.
const jwtClaimPrefix = "@request.auth.claims"

// validateHTTPMatch checks one HTTPMatchRequest as Istio validates it.
func validateHTTPMatch(el *fielderr.List, mf string, m *networking.HTTPMatchRequest) {
	validateStringMatch(el, mf+".uri", m.Uri, uriMatch)
	validateStringMatch(el, mf+".scheme", m.Scheme, valueMatch)
	validateStringMatch(el, mf+".method", m.Method, valueMatch)
	validateStringMatch(el, mf+".authority", m.Authority, valueMatch)
	for _, field := range []struct {
		name    string
		headers map[string]*networking.StringMatch
		kind    int
	}{{"headers", m.Headers, valueMatch}, {"withoutHeaders", m.WithoutHeaders, withoutMatch}} {
		for _, name := range sortedKeys(field.headers) {
			hf := fmt.Sprintf("%s.%s[%s]", mf, field.name, name)
			switch {
			case name == "":
				el.Add(hf, "header name must not be empty")
			case strings.HasPrefix(name, jwtClaimPrefix):
				el.AddErr(hf, fmt.Errorf("matching a JWT claim (%s) is %w", jwtClaimPrefix, fielderr.ErrNotSupported))
			case name == ":method" || name == ":scheme" || name == ":authority" || name == ":path":
			case strings.HasPrefix(name, ":"):
				el.Add(hf, "%q is not a request pseudo-header (:method, :scheme, :authority or :path)", name)
			case !headerNameRe.MatchString(name):
				el.Add(hf, "%q is not a valid header name (letters, digits, '-' and '_')", name)
			}
			validateStringMatch(el, hf, field.headers[name], field.kind)
		}
	}
	for _, name := range sortedKeys(m.QueryParams) {
		qf := fmt.Sprintf("%s.queryParams[%s]", mf, name)
		if name == "" {
			el.Add(qf, "query parameter name must not be empty")
		}
		validateStringMatch(el, qf, m.QueryParams[name], valueMatch)
	}
	if m.Port != 0 && !validPort(m.Port) {
		el.Add(mf+".port", "%d is not a valid port (1-65535)", m.Port)
	}
	validateLabels(el, mf+".sourceLabels", m.SourceLabels)
	if m.SourceNamespace != "" && (len(m.SourceNamespace) > 63 || !dns1123Label.MatchString(m.SourceNamespace)) {
		el.Add(mf+".sourceNamespace", "%q is not a valid namespace (lower-case letters, digits and '-')", m.SourceNamespace)
	}
	for i, g := range m.Gateways {
		if g == "" {
			el.Add(fmt.Sprintf("%s.gateways[%d]", mf, i), "must not be empty (use \"mesh\" for the sidecars)")
		}
	}
}

func validateStringMatch(el *fielderr.List, f string, m *networking.StringMatch, kind int) {
	if m == nil {
		return
	}
	switch t := m.MatchType.(type) {
	case *networking.StringMatch_Prefix:
		if t.Prefix == "" && kind != uriMatch {
			el.Add(f+".prefix", "must not be empty (an empty match, {}, matches any value)")
		}
	case *networking.StringMatch_Regex:
		if t.Regex == "*" && kind == withoutMatch {
			return // Istio: "present"
		}
		switch {
		case t.Regex == "":
			el.Add(f+".regex", "must not be empty")
		case len(t.Regex) > maxRegexLen:
			el.Add(f+".regex", "is %d characters; at most %d are allowed", len(t.Regex), maxRegexLen)
		default:
			if _, err := regexp.Compile(t.Regex); err != nil {
				el.Add(f+".regex", "%q is not a valid RE2 regular expression: %v", t.Regex, err)
			}
		}
	}
}
