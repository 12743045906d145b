package validate

import (
	"fmt"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/straitmesh/strait/internal/istioconfig/fielderr"
)

// The checks in this file are those Istio's admission webhook applies to
// an HTTP route (pkg/config/validation/virtualservice.go validateHTTPRoute
// and the helpers it calls in validation.go), so that a VirtualService
// Istio refuses is refused here too, with the field named, instead of
// loading into something Istio never generates.

// tokenHeaderName is RFC 9110's token: the characters a header field name
// may have (Istio's validHeaderNameRegex, for CORS headers).
var tokenHeaderName = regexp.MustCompile("^[!#$%&'*+\\-.^_`|~0-9A-Za-z]+$")

// corsMethods are the methods Istio accepts in corsPolicy.allowMethods
// (validateCORSHTTPMethod: Go's net/http method names and "*").
var corsMethods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true,
	http.MethodPatch: true, http.MethodDelete: true, http.MethodConnect: true,
	http.MethodOptions: true, http.MethodTrace: true, "*": true,
}

// retryOnPolicies are the retryOn conditions Istio accepts besides HTTP
// status codes (agent.supportedRetryOnPolicies: Envoy's x-envoy-retry-on
// and x-envoy-retry-grpc-on values).
var retryOnPolicies = map[string]bool{
	"5xx": true, "gateway-error": true, "reset": true, "reset-before-request": true,
	"connect-failure": true, "retriable-4xx": true, "refused-stream": true,
	"retriable-status-codes": true, "retriable-headers": true, "envoy-ratelimited": true,
	"http3-post-connect-failure": true,
	"cancelled":                  true, "deadline-exceeded": true, "internal": true, "resource-exhausted": true, "unavailable": true,
}

// grpcStatusNames are the gRPC status codes by the names Istio accepts in
// fault.abort.grpcStatus (pkg/util/grpc SupportedGRPCStatus).
var grpcStatusNames = map[string]bool{
	"OK": true, "CANCELLED": true, "UNKNOWN": true, "INVALID_ARGUMENT": true,
	"DEADLINE_EXCEEDED": true, "NOT_FOUND": true, "ALREADY_EXISTS": true,
	"PERMISSION_DENIED": true, "RESOURCE_EXHAUSTED": true, "FAILED_PRECONDITION": true,
	"ABORTED": true, "OUT_OF_RANGE": true, "UNIMPLEMENTED": true, "INTERNAL": true,
	"UNAVAILABLE": true, "DATA_LOSS": true, "UNAUTHENTICATED": true,
}

// MaxDirectResponseBody is Istio's limit on a directResponse body (1 MiB).
const MaxDirectResponseBody = 1 << 20

// validateHTTPRouteActions checks what an HTTP rule does: which actions
// may be combined, header operations, CORS, fault, mirrors, redirect,
// direct response, retries and rewrite.
func validateHTTPRouteActions(el *fielderr.List, f string, r *networking.HTTPRoute) {
	validateHTTPRouteConflicts(el, f, r)
	validateHeaderOps(el, f+".headers", r.Headers)
	validateAuthorityOnce(el, f, r)
	validateCORS(el, f+".corsPolicy", r.CorsPolicy)
	validateFault(el, f+".fault", r.Fault)
	//nolint:staticcheck // mirrorPercent is deprecated, and still loaded as Istio loads it.
	if mp := r.MirrorPercent; mp != nil && mp.GetValue() > 100 {
		el.Add(f+".mirrorPercent", "must be at most 100, got %d", mp.GetValue())
	}
	validatePercent(el, f+".mirrorPercentage", r.MirrorPercentage, false)
	if r.Mirror != nil {
		validateDestination(el, f+".mirror", r.Mirror)
	}
	for i, m := range r.Mirrors {
		mf := fmt.Sprintf("%s.mirrors[%d]", f, i)
		switch {
		case m == nil:
			el.Add(mf, "must not be null")
		case m.Destination == nil:
			el.Add(mf+".destination", "is required")
		default:
			validateDestination(el, mf+".destination", m.Destination)
			validatePercent(el, mf+".percentage", m.Percentage, false)
		}
	}
	validateRedirect(el, f+".redirect", r)
	if dr := r.DirectResponse; dr != nil {
		if dr.Status < 200 || dr.Status > 599 {
			el.Add(f+".directResponse.status", "%d is not an HTTP status (200-599)", dr.Status)
		}
		if n := len(dr.GetBody().GetString_()) + len(dr.GetBody().GetBytes()); n > MaxDirectResponseBody {
			el.Add(f+".directResponse.body", "is %d bytes; at most 1 MiB is allowed", n)
		}
	}
	validateRetries(el, f+".retries", r.Retries)
	validateRewrite(el, f+".rewrite", r.Rewrite)
	for k, d := range r.Route {
		if d != nil {
			validateHeaderOps(el, fmt.Sprintf("%s.route[%d].headers", f, k), d.Headers)
		}
	}
}

// validateHTTPRouteConflicts refuses actions Istio does not combine
// (validateHTTPRouteConflict): a rule redirects, answers directly or
// routes, and only a routed request can be faulted or rewritten.
func validateHTTPRouteConflicts(el *fielderr.List, f string, r *networking.HTTPRoute) {
	switch {
	case r.Redirect != nil:
		for _, other := range []struct {
			name string
			set  bool
		}{{"route", len(r.Route) > 0}, {"fault", r.Fault != nil}, {"rewrite", r.Rewrite != nil}, {"directResponse", r.DirectResponse != nil}} {
			if other.set {
				el.Add(f+".redirect", "cannot be combined with %s in one rule (a redirect answers the request itself); remove one of them", other.name)
			}
		}
	case r.DirectResponse != nil:
		for _, other := range []struct {
			name string
			set  bool
		}{{"route", len(r.Route) > 0}, {"fault", r.Fault != nil}, {"rewrite", r.Rewrite != nil}} {
			if other.set {
				el.Add(f+".directResponse", "cannot be combined with %s in one rule (a direct response answers the request itself); remove one of them", other.name)
			}
		}
	}
	if r.Mirror != nil && len(r.Mirrors) > 0 {
		el.Add(f+".mirrors", "cannot be combined with mirror; list every mirror under mirrors")
	}
}

// validateHeaderOps checks header names and values of a Headers block
// (Istio's ValidateHTTPHeaderWithAuthorityOperationName,
// ValidateHTTPHeaderOperationName and ValidateHTTPHeaderValue): request
// set/add may name :authority or host (the authority rewrite); no other
// operation may touch host or a pseudo-header.
func validateHeaderOps(el *fielderr.List, f string, h *networking.Headers) {
	if h == nil {
		return
	}
	type op struct {
		name      string
		values    map[string]string
		names     []string
		authority bool // may set the authority
	}
	for _, o := range []op{
		{name: "request.set", values: h.GetRequest().GetSet(), authority: true},
		{name: "request.add", values: h.GetRequest().GetAdd(), authority: true},
		{name: "request.remove", names: h.GetRequest().GetRemove()},
		{name: "response.set", values: h.GetResponse().GetSet()},
		{name: "response.add", values: h.GetResponse().GetAdd()},
		{name: "response.remove", names: h.GetResponse().GetRemove()},
	} {
		names := o.names
		if o.values != nil {
			names = sortedKeys(o.values)
		}
		for i, name := range names {
			nf := fmt.Sprintf("%s.%s[%s]", f, o.name, name)
			if o.values == nil {
				nf = fmt.Sprintf("%s.%s[%d]", f, o.name, i)
			}
			isAuthority := strings.EqualFold(name, ":authority") || strings.EqualFold(name, "host")
			switch {
			case name == "":
				el.Add(nf, "header name must not be empty")
			case isAuthority && o.authority:
			case strings.EqualFold(name, "host"):
				el.Add(nf, "the Host header cannot be changed by %s (rewrite it with request.set or rewrite.authority)", o.name)
			case strings.HasPrefix(name, ":"):
				el.Add(nf, "%q: a pseudo-header (':' prefix) cannot be changed", name)
			}
			if o.values != nil && hasControlChar(o.values[name]) {
				el.Add(nf, "the value has a control character; header values may not contain them")
			}
		}
	}
}

// hasControlChar reports a character Envoy refuses in a header value
// (Istio's httpHeaderValueRegexp: NUL to 0x1F except tab, and DEL).
func hasControlChar(v string) bool {
	for _, c := range v {
		if (c < 0x20 && c != '\t') || c == 0x7f {
			return true
		}
	}
	return false
}

// validateAuthorityOnce refuses a rule that sets the authority in two
// places (Istio's validateAuthorityRewrite).
func validateAuthorityOnce(el *fielderr.List, f string, r *networking.HTTPRoute) {
	n := 0
	if r.GetRewrite().GetAuthority() != "" {
		n++
	}
	for _, m := range []map[string]string{r.GetHeaders().GetRequest().GetSet(), r.GetHeaders().GetRequest().GetAdd()} {
		for k := range m {
			if strings.EqualFold(k, ":authority") || strings.EqualFold(k, "host") {
				n++
			}
		}
	}
	if n > 1 {
		el.Add(f, "the authority is set more than once (rewrite.authority and headers.request set/add of host or :authority); set it in one place")
	}
}

func validateCORS(el *fielderr.List, f string, c *networking.CorsPolicy) {
	if c == nil {
		return
	}
	for i, o := range c.AllowOrigins {
		of := fmt.Sprintf("%s.allowOrigins[%d]", f, i)
		if o.GetExact() == "" && o.GetPrefix() == "" && o.GetRegex() == "" {
			el.Add(of, "must set a non-empty exact, prefix or regex")
			continue
		}
		validateStringMatch(el, of, o, valueMatch)
	}
	for i, m := range c.AllowMethods {
		if !corsMethods[m] {
			el.Add(fmt.Sprintf("%s.allowMethods[%d]", f, i), "%q is not an HTTP method (GET, HEAD, POST, PUT, PATCH, DELETE, CONNECT, OPTIONS, TRACE or *; upper case)", m)
		}
	}
	for _, l := range []struct {
		name  string
		items []string
	}{{"allowHeaders", c.AllowHeaders}, {"exposeHeaders", c.ExposeHeaders}} {
		for i, h := range l.items {
			if h != "*" && !tokenHeaderName.MatchString(h) {
				el.Add(fmt.Sprintf("%s.%s[%d]", f, l.name, i), "%q is not a header name (or *)", h)
			}
		}
	}
}

// validatePercent checks a Percent as Istio does: 0 to 100, and for fault
// percentages (fine) either 0 or at least 0.0001, the finest Envoy carries.
func validatePercent(el *fielderr.List, f string, p *networking.Percent, fine bool) {
	if p == nil {
		return
	}
	v := p.Value
	switch {
	case v < 0 || v > 100 || math.IsNaN(v):
		el.Add(f+".value", "%v is not a percentage (0 to 100)", v)
	case fine && v > 0 && v < 0.0001:
		el.Add(f+".value", "%v is finer than 0.0001, the smallest percentage Envoy carries", v)
	}
}

func validateFault(el *fielderr.List, f string, fault *networking.HTTPFaultInjection) {
	if fault == nil {
		return
	}
	if fault.Abort == nil && fault.Delay == nil {
		el.Add(f, "must set abort, delay or both")
	}
	if a := fault.Abort; a != nil {
		validatePercent(el, f+".abort.percentage", a.Percentage, true)
		switch t := a.ErrorType.(type) {
		case *networking.HTTPFaultInjection_Abort_HttpStatus:
			if t.HttpStatus < 200 || t.HttpStatus > 599 {
				el.Add(f+".abort.httpStatus", "%d is not an HTTP status (200-599)", t.HttpStatus)
			}
		case *networking.HTTPFaultInjection_Abort_GrpcStatus:
			if !grpcStatusNames[t.GrpcStatus] {
				el.Add(f+".abort.grpcStatus", "%q is not a gRPC status name (e.g. UNAVAILABLE, NOT_FOUND, INTERNAL)", t.GrpcStatus)
			}
		case nil:
			el.Add(f+".abort", "must set httpStatus or grpcStatus (what the aborted request is answered with)")
		}
	}
	if d := fault.Delay; d != nil {
		validatePercent(el, f+".delay.percentage", d.Percentage, true)
		if d.HttpDelayType == nil {
			el.Add(f+".delay", "must set fixedDelay (how long to delay, e.g. 5s)")
		}
	}
}

// validateRedirect checks a redirect as Istio does (validateHTTPRedirect).
// Codes Istio accepts but Envoy has no response code for are refused
// separately (validateHTTPActionLimits).
func validateRedirect(el *fielderr.List, f string, r *networking.HTTPRoute) {
	rd := r.Redirect
	if rd == nil {
		return
	}
	if rd.Uri != "" && rd.PrefixRewrite != "" {
		el.Add(f, "set uri or prefixRewrite, not both")
	}
	if rd.PrefixRewrite != "" {
		for i, m := range r.Match {
			if _, isPrefix := m.GetUri().GetMatchType().(*networking.StringMatch_Prefix); m.GetUri() != nil && !isPrefix {
				el.Add(f+".prefixRewrite", "needs every uri match to be a prefix match (match[%d].uri is not)", i)
				break
			}
		}
	}
	if rd.Uri == "" && rd.PrefixRewrite == "" && rd.Authority == "" && rd.RedirectPort == nil && rd.Scheme == "" {
		el.Add(f, "must set at least one of uri, prefixRewrite, authority, scheme or port")
	}
	if rd.RedirectCode != 0 && (rd.RedirectCode < 300 || rd.RedirectCode > 399) {
		el.Add(f+".redirectCode", "%d is not a redirect code (3xx, e.g. 301 or 302)", rd.RedirectCode)
	}
	if rd.Scheme != "" && rd.Scheme != "http" && rd.Scheme != "https" {
		el.Add(f+".scheme", "%q: must be http or https", rd.Scheme)
	}
	if p := rd.GetPort(); p != 0 && !validPort(p) {
		el.Add(f+".port", "%d is not a valid port (1-65535)", p)
	}
}

// validateRetries checks a retry policy as Istio's agent.ValidateHTTPRetry.
func validateRetries(el *fielderr.List, f string, r *networking.HTTPRetry) {
	if r == nil {
		return
	}
	if r.Attempts < 0 {
		el.Add(f+".attempts", "%d is negative (0 disables retries)", r.Attempts)
	}
	if r.Attempts == 0 && (r.PerTryTimeout != nil || r.RetryOn != "" || r.RetryRemoteLocalities != nil) {
		el.Add(f+".attempts", "is 0 (retries disabled) but perTryTimeout, retryOn or retryRemoteLocalities is set; set attempts or remove them")
	}
	if r.RetryOn == "" {
		return
	}
	for _, p := range strings.Split(r.RetryOn, ",") {
		if n, err := strconv.Atoi(p); err == nil && http.StatusText(n) != "" {
			continue
		}
		if !retryOnPolicies[p] {
			el.Add(f+".retryOn", "%q is not a retry condition (Envoy's, e.g. 5xx, gateway-error, connect-failure, retriable-4xx, refused-stream, reset, unavailable, or an HTTP status code)", p)
		}
	}
}

// validateRewrite checks a rewrite as Istio's validateHTTPRewrite.
func validateRewrite(el *fielderr.List, f string, rw *networking.HTTPRewrite) {
	if rw == nil {
		return
	}
	if rw.Uri != "" && rw.UriRegexRewrite != nil {
		el.Add(f, "set uri or uriRegexRewrite, not both")
	}
	if rw.Uri == "" && rw.UriRegexRewrite == nil && rw.Authority == "" {
		el.Add(f, "must set uri, uriRegexRewrite or authority")
	}
	if rr := rw.UriRegexRewrite; rr != nil {
		if rr.Match == "" || rr.Rewrite == "" {
			el.Add(f+".uriRegexRewrite", "needs both match and rewrite")
		}
		if rr.Match != "" {
			validateStringMatch(el, f+".uriRegexRewrite", &networking.StringMatch{MatchType: &networking.StringMatch_Regex{Regex: rr.Match}}, valueMatch)
		}
	}
}

// validateWeights checks route weights as Istio does
// (validateHTTPRouteDestinations, validateRouteDestinations): no weight is
// negative and several destinations do not all weigh 0. Weights are
// relative (Envoy's weighted clusters share traffic by weight over the
// sum), so they need not add up to 100; the sum must fit Envoy's uint32.
func validateWeights(el *fielderr.List, f string, weights []int32) {
	var sum int64
	for k, w := range weights {
		if w < 0 {
			el.Add(fmt.Sprintf("%s[%d].weight", f, k), "%d is negative; weights are 0 or more", w)
			continue
		}
		sum += int64(w)
	}
	switch {
	case len(weights) > 1 && sum == 0:
		el.Add(f, "the destinations' weights add up to 0; give at least one a weight")
	case sum > math.MaxUint32:
		el.Add(f, "the destinations' weights add up to %d, more than Envoy's limit of %d", sum, uint64(math.MaxUint32))
	}
}

// validateTLSRoute checks a tls rule as Istio's validateTLSRoute: it has
// matches, each with SNI hosts within the VirtualService's hosts.
func validateTLSRoute(el *fielderr.List, f string, r *networking.TLSRoute, hosts []string) {
	if len(r.Match) == 0 {
		el.Add(f+".match", "a tls rule needs at least one match (with sniHosts)")
	}
	for j, m := range r.Match {
		mf := fmt.Sprintf("%s.match[%d]", f, j)
		if m == nil {
			el.Add(mf, "must not be null")
			continue
		}
		if len(m.SniHosts) == 0 {
			el.Add(mf+".sniHosts", "must list at least one SNI host")
		}
		for k, sni := range m.SniHosts {
			sf := fmt.Sprintf("%s.sniHosts[%d]", mf, k)
			if !hostRe.MatchString(sni) || sni == "" {
				el.Add(sf, "%q is not a host name", sni)
				continue
			}
			if !sniWithin(sni, hosts) {
				el.Add(sf, "%q is not within the VirtualService's hosts [%s]", sni, strings.Join(hosts, ", "))
			}
		}
		for k, s := range m.DestinationSubnets {
			validateSubnet(el, fmt.Sprintf("%s.destinationSubnets[%d]", mf, k), s)
		}
		if m.Port != 0 && !validPort(m.Port) {
			el.Add(mf+".port", "%d is not a valid port (1-65535)", m.Port)
		}
		validateLabels(el, mf+".sourceLabels", m.SourceLabels)
	}
	if len(r.Route) == 0 {
		el.Add(f+".route", "must list at least one destination")
	}
}

// sniWithin reports whether sni is one of hosts or within one of their
// wildcards (Istio's host.Name.SubsetOf): "a.example.com" is within
// "*.example.com" and "*", "*.a.example.com" within "*.example.com".
func sniWithin(sni string, hosts []string) bool {
	for _, h := range hosts {
		switch {
		case h == "*" || strings.EqualFold(h, sni):
			return true
		case strings.HasPrefix(h, "*"):
			suffix := strings.ToLower(h[1:])
			s := strings.ToLower(strings.TrimPrefix(sni, "*"))
			if strings.HasSuffix(s, suffix) && (len(s) > len(suffix) || strings.HasPrefix(sni, "*")) {
				return true
			}
		}
	}
	return false
}

// hostsOverlap reports two hosts one of which is, or covers, the other
// (Istio's host.Name.Matches, its duplicate-host check).
func hostsOverlap(a, b string) bool {
	return sniWithin(a, []string{b}) || sniWithin(b, []string{a})
}

// validateExportTo checks exportTo as Istio's validateExportTo: ".", "*",
// a namespace name, or (ServiceEntry only) "~"; no entry twice ("." and
// the object's own namespace are the same); "*" and "~" only alone.
func validateExportTo(el *fielderr.List, namespace string, exportTo []string, serviceEntry bool) {
	seen := map[string]bool{}
	for i, e := range exportTo {
		f := fmt.Sprintf("spec.exportTo[%d]", i)
		key := e
		if e == "." {
			key = namespace
		}
		switch {
		case seen[key]:
			el.Add(f, "%q is listed twice (\".\" is this namespace, %q)", e, namespace)
		case e == "~" && !serviceEntry:
			el.Add(f, "\"~\" (no namespace) is only allowed on a ServiceEntry")
		case e != "." && e != "*" && e != "~" && (len(e) > 63 || !dns1123Label.MatchString(e)):
			el.Add(f, "%q is not \".\", \"*\" or a namespace name", e)
		}
		seen[key] = true
	}
	if len(exportTo) > 1 && (seen["*"] || seen["~"]) {
		el.Add("spec.exportTo", "\"*\" and \"~\" cannot be combined with other entries")
	}
}
