package gatewayapi

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	networking "istio.io/api/networking/v1alpha3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// routeError is a problem with a route: refused (Accepted=False) or a
// backend that does not resolve (ResolvedRefs=False, the route served
// with a 500 in its place).
type routeError struct {
	reason, message string
}

// httpRoutes translates the HTTPRoutes bound to our Gateways.
func (t *translator) httpRoutes() {
	for _, r := range sortByAge(t.in.HTTPRoutes) {
		ref := Ref{"HTTPRoute", r.Namespace, r.Name}
		parents := t.bind("HTTPRoute", r.Namespace, r.Spec.CommonRouteSpec, r.Spec.Hostnames)
		if len(parents) == 0 {
			continue
		}
		t.attach(ref, r.Generation, parents, t.convertFor(parents, func() conversion {
			routes, refused, unresolved := t.convertHTTPRules("HTTPRoute", r)
			return conversion{routes: routes, refused: refused, unresolved: unresolved}
		}))
	}
}

// conversion is a route's rules translated for one kind of parent: the
// routes, the refusal of the whole route and the first reference that
// does not resolve.
type conversion struct {
	routes              []*networking.HTTPRoute
	refused, unresolved *routeError
}

// conversions are a route's rules translated for its Gateway parents
// and for its Service (mesh) parents, each only when it has such.
type conversions struct {
	gateway, mesh conversion
}

// convertFor runs convert for the kinds of parents there are (Istio's
// buildMeshAndGatewayRoutes): for the mesh with t.meshConversion set, so
// that backendRefs to other namespaces need no ReferenceGrant.
func (t *translator) convertFor(parents []*parentResult, convert func() conversion) conversions {
	var out conversions
	var gw, mesh bool
	for _, p := range parents {
		if p.mesh != nil {
			mesh = true
		} else {
			gw = true
		}
	}
	if gw {
		out.gateway = convert()
	}
	if mesh {
		t.meshConversion = true
		out.mesh = convert()
		t.meshConversion = false
	}
	return out
}

// convertHTTPRules translates r's rules in order (kind names the object
// the messages are about: an HTTPRoute, or the GRPCRoute r was rewritten
// from): the routes, the first rule's refusal (which stops it), and the
// first unresolved reference.
func (t *translator) convertHTTPRules(kind string, r *gwv1.HTTPRoute) (routes []*networking.HTTPRoute, refused, unresolved *routeError) {
	for i, rule := range r.Spec.Rules {
		rs, bad, err := t.convertHTTPRule(kind, r, i, rule)
		if err != nil {
			return routes, err, unresolved
		}
		if bad != nil && unresolved == nil {
			unresolved = bad
		}
		routes = append(routes, rs...)
	}
	return routes, nil, unresolved
}

// attach binds a translated route to its parents (unless refused): the
// gateway conversion to its Gateways' listeners, the mesh one to its
// Services; and records its status.
func (t *translator) attach(ref Ref, generation int64, parents []*parentResult, c conversions) {
	for _, conv := range []*conversion{&c.gateway, &c.mesh} {
		if conv.refused == nil {
			if err := validateRoutes(ref, &networking.VirtualService{Http: conv.routes}); err != nil {
				conv.refused = &routeError{reason: string(gwv1.RouteReasonUnsupportedValue), message: err.Error()}
			}
		}
	}
	outcome := func(p *parentResult) (refused, unresolved *routeError) {
		if p.mesh != nil {
			return c.mesh.refused, c.mesh.unresolved
		}
		return c.gateway.refused, c.gateway.unresolved
	}
	t.attachEach(ref, generation, parents, outcome, func(l *listener, host string) {
		for _, r := range c.gateway.routes {
			l.routes[host] = append(l.routes[host], boundRoute{route: r, from: ref})
		}
	}, func(p *meshParent) { t.bindMesh(ref, p, c.mesh.routes) })
}

// attachWith binds a translated route to its Gateway parents' listeners
// with bind (once per listener and host, unless refused) and records its
// status.
func (t *translator) attachWith(ref Ref, generation int64, parents []*parentResult, refused, unresolved *routeError, bind func(l *listener, host string)) {
	t.attachEach(ref, generation, parents, func(*parentResult) (*routeError, *routeError) { return refused, unresolved }, bind, nil)
}

// attachEach is attachWith with each parent's refusal and unresolved
// reference given by outcome, and the Service parents bound with
// bindMesh (a route kind without mesh parents passes nil).
func (t *translator) attachEach(ref Ref, generation int64, parents []*parentResult, outcome func(*parentResult) (refused, unresolved *routeError),
	bind func(l *listener, host string), bindMesh func(*meshParent),
) {
	var st gwv1.RouteStatus
	for _, p := range parents {
		refused, unresolved := outcome(p)
		reason, msg := p.reason, p.message
		if reason == "" && refused != nil {
			reason, msg = refused.reason, refused.message
		}
		if reason == "" && p.mesh != nil && bindMesh != nil {
			bindMesh(p.mesh)
		}
		if reason == "" {
			for _, b := range p.bindings {
				b.listener.attached++
				for _, h := range b.hosts {
					bind(b.listener, h)
				}
			}
		}
		accepted := t.condition(generation, string(gwv1.RouteConditionAccepted), reason == "", string(gwv1.RouteReasonAccepted), "Route was valid")
		if reason != "" {
			accepted = t.condition(generation, string(gwv1.RouteConditionAccepted), false, reason, msg)
		}
		resolved := t.condition(generation, string(gwv1.RouteConditionResolvedRefs), true, string(gwv1.RouteReasonResolvedRefs), "All references resolved")
		if unresolved != nil {
			resolved = t.condition(generation, string(gwv1.RouteConditionResolvedRefs), false, unresolved.reason, unresolved.message)
		}
		st.Parents = append(st.Parents, gwv1.RouteParentStatus{ParentRef: p.ref, ControllerName: ControllerName,
			Conditions: []metav1.Condition{accepted, resolved}})
	}
	t.out.Routes[ref] = st
}

// convertHTTPRule translates one rule into one Istio HTTP route per
// match (Istio's convertHTTPRoute); the second result is a backend that
// does not resolve, the third a refusal of the whole route.
func (t *translator) convertHTTPRule(kind string, r *gwv1.HTTPRoute, i int, rule gwv1.HTTPRouteRule) ([]*networking.HTTPRoute, *routeError, *routeError) {
	field := fmt.Sprintf("spec.rules[%d]", i)
	refuse := func(format string, args ...any) *routeError {
		return &routeError{reason: string(gwv1.RouteReasonUnsupportedValue), message: fmt.Sprintf(format, args...)}
	}
	base := &networking.HTTPRoute{Name: r.Namespace + "." + r.Name + "." + strconv.Itoa(i)}
	if rule.Name != nil {
		base.Name = string(*rule.Name)
	}
	if rule.SessionPersistence != nil {
		return nil, nil, refuse("%s.sessionPersistence: not supported by Strait yet", field)
	}
	var unresolved *routeError
	for j, f := range rule.Filters {
		ff := fmt.Sprintf("%s.filters[%d]", field, j)
		switch f.Type {
		case gwv1.HTTPRouteFilterRequestHeaderModifier:
			h, err := headerOps(f.RequestHeaderModifier, ff+".requestHeaderModifier")
			if err != nil {
				return nil, nil, err
			}
			if base.Headers == nil {
				base.Headers = &networking.Headers{}
			}
			base.Headers.Request = h
		case gwv1.HTTPRouteFilterResponseHeaderModifier:
			h, err := headerOps(f.ResponseHeaderModifier, ff+".responseHeaderModifier")
			if err != nil {
				return nil, nil, err
			}
			if base.Headers == nil {
				base.Headers = &networking.Headers{}
			}
			base.Headers.Response = h
		case gwv1.HTTPRouteFilterRequestRedirect:
			if f.RequestRedirect == nil {
				return nil, nil, refuse("%s.requestRedirect: must be set for type RequestRedirect", ff)
			}
			base.Redirect = redirect(f.RequestRedirect)
		case gwv1.HTTPRouteFilterURLRewrite:
			if f.URLRewrite == nil {
				return nil, nil, refuse("%s.urlRewrite: must be set for type URLRewrite", ff)
			}
			base.Rewrite = rewrite(f.URLRewrite)
		case gwv1.HTTPRouteFilterRequestMirror:
			if f.RequestMirror == nil {
				return nil, nil, refuse("%s.requestMirror: must be set for type RequestMirror", ff)
			}
			dst, bad, err := t.destination(kind, r.Namespace, f.RequestMirror.BackendRef, ff+".requestMirror.backendRef")
			if err != nil {
				return nil, nil, err
			}
			if bad != nil {
				unresolved = bad
				continue
			}
			m := &networking.HTTPMirrorPolicy{Destination: dst}
			if fr := f.RequestMirror.Fraction; fr != nil {
				den := int32(100)
				if fr.Denominator != nil {
					den = *fr.Denominator
				}
				m.Percentage = &networking.Percent{Value: 100 * float64(fr.Numerator) / float64(den)}
			} else if p := f.RequestMirror.Percent; p != nil {
				m.Percentage = &networking.Percent{Value: float64(*p)}
			}
			base.Mirrors = append(base.Mirrors, m)
		default:
			return nil, nil, refuse("%s.type: filter %s is not supported by Strait yet", ff, f.Type)
		}
	}
	if rule.Retry != nil {
		retryOn := []string{"connect-failure", "refused-stream", "unavailable", "cancelled"}
		for _, c := range rule.Retry.Codes {
			retryOn = append(retryOn, strconv.Itoa(int(c)))
		}
		attempts := 2
		if rule.Retry.Attempts != nil {
			attempts = *rule.Retry.Attempts
		}
		base.Retries = &networking.HTTPRetry{Attempts: int32(attempts), RetryOn: strings.Join(retryOn, ",")}
		if attempts == 0 {
			base.Retries.RetryOn = ""
		}
		if rule.Retry.Backoff != nil {
			d, err := time.ParseDuration(string(*rule.Retry.Backoff))
			if err != nil {
				return nil, nil, refuse("%s.retry.backoff: %v", field, err)
			}
			base.Retries.Backoff = durationpb.New(d)
		}
	}
	if to := rule.Timeouts; to != nil {
		if to.Request != nil {
			d, err := time.ParseDuration(string(*to.Request))
			if err != nil {
				return nil, nil, refuse("%s.timeouts.request: %v", field, err)
			}
			if d != 0 {
				base.Timeout = durationpb.New(d)
			}
		}
		if to.BackendRequest != nil {
			d, err := time.ParseDuration(string(*to.BackendRequest))
			if err != nil {
				return nil, nil, refuse("%s.timeouts.backendRequest: %v", field, err)
			}
			switch {
			case d == 0:
			case base.Retries != nil && base.Retries.Attempts > 0:
				base.Retries.PerTryTimeout = durationpb.New(d)
			case base.Timeout == nil || d < base.Timeout.AsDuration():
				// One try (retries off): the backend request's timeout is
				// the route's, unless the request timeout is shorter.
				base.Timeout = durationpb.New(d)
			}
		}
	}
	if base.Redirect == nil {
		bad, err := t.httpDestinations(kind, r.Namespace, rule.BackendRefs, field, base)
		if err != nil {
			return nil, nil, err
		}
		if bad != nil {
			unresolved = bad
		}
	} else if len(rule.BackendRefs) > 0 {
		return nil, nil, &routeError{reason: string(gwv1.RouteReasonIncompatibleFilters), message: field + ": a RequestRedirect filter and backendRefs cannot be combined"}
	}
	if len(rule.Matches) == 0 {
		return []*networking.HTTPRoute{base}, unresolved, nil
	}
	var out []*networking.HTTPRoute
	for j, m := range rule.Matches {
		mr, err := httpMatch(m, fmt.Sprintf("%s.matches[%d]", field, j))
		if err != nil {
			return nil, nil, err
		}
		c := cloneRoute(base)
		c.Match = []*networking.HTTPMatchRequest{mr}
		stripPrefixRewrite(c)
		out = append(out, c)
	}
	return out, unresolved, nil
}

// stripPrefixRewrite handles a URLRewrite ReplacePrefixMatch of "/" after
// a prefix match: replacing the prefix with "/" would leave the slash that
// follows the prefix ("/strip/three" → "//three"), so the prefix and the
// slashes after it are replaced with one "/" by a regex rewrite instead
// ("/strip/three" → "/three", "/strip" → "/"), as Istio does.
func stripPrefixRewrite(r *networking.HTTPRoute) {
	prefix := r.GetMatch()[0].GetUri().GetPrefix()
	if r.GetRewrite().GetUri() != "/" || prefix == "" || prefix == "/" {
		return
	}
	r.Rewrite.Uri = ""
	r.Rewrite.UriRegexRewrite = &networking.RegexRewrite{Match: "^" + regexp.QuoteMeta(prefix) + "/*", Rewrite: "/"}
}

// httpDestinations fills route's destinations from backendRefs (Istio's
// buildHTTPDestination). A backend that does not resolve gets its share
// of the requests answered 500, as the spec asks: all of them through a
// direct response, a part of them through an abort of that percentage.
func (t *translator) httpDestinations(kind, namespace string, refs []gwv1.HTTPBackendRef, field string, route *networking.HTTPRoute) (*routeError, *routeError) {
	var total, invalidWeight int32
	var unresolved *routeError
	type weighted struct {
		d *networking.HTTPRouteDestination
		w int32
	}
	var valid []weighted
	for k, b := range refs {
		bf := fmt.Sprintf("%s.backendRefs[%d]", field, k)
		w := int32(1)
		if b.Weight != nil {
			w = *b.Weight
		}
		if w == 0 {
			continue
		}
		total += w
		dst, bad, err := t.destination(kind, namespace, b.BackendObjectReference, bf)
		if err != nil {
			return nil, err
		}
		if bad != nil {
			unresolved = bad
			invalidWeight += w
			continue
		}
		d := &networking.HTTPRouteDestination{Destination: dst}
		for j, f := range b.Filters {
			ff := fmt.Sprintf("%s.filters[%d]", bf, j)
			var (
				h   *networking.Headers_HeaderOperations
				err *routeError
			)
			switch f.Type {
			case gwv1.HTTPRouteFilterRequestHeaderModifier:
				h, err = headerOps(f.RequestHeaderModifier, ff+".requestHeaderModifier")
				if d.Headers == nil {
					d.Headers = &networking.Headers{}
				}
				d.Headers.Request = h
			case gwv1.HTTPRouteFilterResponseHeaderModifier:
				h, err = headerOps(f.ResponseHeaderModifier, ff+".responseHeaderModifier")
				if d.Headers == nil {
					d.Headers = &networking.Headers{}
				}
				d.Headers.Response = h
			default:
				err = &routeError{reason: string(gwv1.RouteReasonUnsupportedValue), message: fmt.Sprintf("%s.type: filter %s on a backendRef is not supported by Strait yet", ff, f.Type)}
			}
			if err != nil {
				return nil, err
			}
		}
		valid = append(valid, weighted{d, w})
	}
	switch {
	case total == 0 || len(valid) == 0:
		// No backend to send to: the gateway answers 500 itself, so the
		// rule's rewrite, mirrors, retries and timeout have nothing to act
		// on (and a direct response cannot carry them).
		route.DirectResponse = &networking.HTTPDirectResponse{Status: 500}
		route.Rewrite, route.Mirrors, route.Retries, route.Timeout = nil, nil, nil, nil
		return unresolved, nil
	case invalidWeight > 0:
		route.Fault = &networking.HTTPFaultInjection{Abort: &networking.HTTPFaultInjection_Abort{
			ErrorType:  &networking.HTTPFaultInjection_Abort_HttpStatus{HttpStatus: 500},
			Percentage: &networking.Percent{Value: 100 * float64(invalidWeight) / float64(total)},
		}}
	}
	for _, v := range valid {
		if len(valid) > 1 {
			v.d.Weight = v.w
		}
		route.Route = append(route.Route, v.d)
	}
	return unresolved, nil
}

// destination resolves a backendRef to a Service (Istio's
// buildDestination): the second result is why it does not resolve
// (ResolvedRefs=False), the third a refusal of the route.
func (t *translator) destination(kind, namespace string, ref gwv1.BackendObjectReference, field string) (*networking.Destination, *routeError, *routeError) {
	group, backendKind := "", "Service"
	if ref.Group != nil {
		group = string(*ref.Group)
	}
	if ref.Kind != nil {
		backendKind = string(*ref.Kind)
	}
	if group != "" || backendKind != "Service" {
		return nil, &routeError{reason: string(gwv1.RouteReasonInvalidKind), message: fmt.Sprintf("%s: referencing unsupported backendRef: group %q kind %q", field, group, backendKind)}, nil
	}
	ns := namespace
	if ref.Namespace != nil && string(*ref.Namespace) != namespace {
		ns = string(*ref.Namespace)
		if !t.meshConversion && !t.granted(kind, namespace, "", "Service", ns, string(ref.Name)) {
			return nil, &routeError{reason: string(gwv1.RouteReasonRefNotPermitted),
				message: fmt.Sprintf("%s: backendRef %s/%s not accessible to a %s in namespace %q (missing a ReferenceGrant?)", field, ns, ref.Name, kind, namespace)}, nil
		}
	}
	if strings.Contains(string(ref.Name), ".") {
		return nil, nil, &routeError{reason: string(gwv1.RouteReasonUnsupportedValue), message: field + ".name: service name invalid; the name of the Service must be used, not the hostname"}
	}
	if ref.Port == nil {
		return nil, nil, &routeError{reason: string(gwv1.RouteReasonUnsupportedValue), message: field + ".port: port is required in backendRef"}
	}
	host := string(ref.Name) + "." + ns + ".svc." + t.in.Domain
	if !t.in.ServiceExists(ns, string(ref.Name)) {
		return nil, &routeError{reason: string(gwv1.RouteReasonBackendNotFound), message: fmt.Sprintf("%s: backend(%s) not found", field, host)}, nil
	}
	return &networking.Destination{Host: host, Port: &networking.PortSelector{Number: uint32(*ref.Port)}}, nil, nil
}

func headerOps(f *gwv1.HTTPHeaderFilter, field string) (*networking.Headers_HeaderOperations, *routeError) {
	if f == nil {
		return nil, &routeError{reason: string(gwv1.RouteReasonUnsupportedValue), message: field + ": must be set for its filter type"}
	}
	for _, h := range append(append([]gwv1.HTTPHeader(nil), f.Set...), f.Add...) {
		for _, c := range []byte(h.Value) {
			if c != '\t' && (c < 0x20 || c == 0x7f) {
				return nil, &routeError{reason: string(gwv1.RouteReasonUnsupportedValue), message: fmt.Sprintf("%s: header %q value contains invalid characters", field, h.Name)}
			}
		}
	}
	return &networking.Headers_HeaderOperations{Set: headerMap(f.Set), Add: headerMap(f.Add), Remove: f.Remove}, nil
}

// headerMap keeps the first of equivalent header names, as the spec says.
func headerMap(hs []gwv1.HTTPHeader) map[string]string {
	if len(hs) == 0 {
		return nil
	}
	m := map[string]string{}
	for _, h := range hs {
		k := strings.ToLower(string(h.Name))
		if _, ok := m[k]; !ok {
			m[k] = h.Value
		}
	}
	return m
}

func redirect(f *gwv1.HTTPRequestRedirectFilter) *networking.HTTPRedirect {
	r := &networking.HTTPRedirect{}
	if f.StatusCode != nil {
		r.RedirectCode = uint32(*f.StatusCode)
	}
	if f.Hostname != nil {
		r.Authority = string(*f.Hostname)
	}
	if f.Scheme != nil {
		r.Scheme = *f.Scheme
	}
	switch {
	case f.Port != nil:
		r.RedirectPort = &networking.HTTPRedirect_Port{Port: uint32(*f.Port)}
	case f.Scheme != nil:
		r.RedirectPort = &networking.HTTPRedirect_DerivePort{DerivePort: networking.HTTPRedirect_FROM_PROTOCOL_DEFAULT}
	default:
		r.RedirectPort = &networking.HTTPRedirect_DerivePort{DerivePort: networking.HTTPRedirect_FROM_REQUEST_PORT}
	}
	if f.Path != nil {
		switch f.Path.Type {
		case gwv1.FullPathHTTPPathModifier:
			r.Uri = ptrString(f.Path.ReplaceFullPath)
		case gwv1.PrefixMatchHTTPPathModifier:
			r.PrefixRewrite = ptrString(f.Path.ReplacePrefixMatch)
		}
	}
	return r
}

func rewrite(f *gwv1.HTTPURLRewriteFilter) *networking.HTTPRewrite {
	r := &networking.HTTPRewrite{}
	if f.Path != nil {
		switch f.Path.Type {
		case gwv1.PrefixMatchHTTPPathModifier:
			r.Uri = strings.TrimSuffix(ptrString(f.Path.ReplacePrefixMatch), "/")
			if r.Uri == "" {
				r.Uri = "/"
			}
		case gwv1.FullPathHTTPPathModifier:
			r.UriRegexRewrite = &networking.RegexRewrite{Match: "/.*", Rewrite: ptrString(f.Path.ReplaceFullPath)}
		}
	}
	if f.Hostname != nil {
		r.Authority = string(*f.Hostname)
	}
	if r.Uri == "" && r.UriRegexRewrite == nil && r.Authority == "" {
		return nil
	}
	return r
}

// httpMatch translates one match (Istio's createURIMatch,
// createHeadersMatch, createQueryParamsMatch, createMethodMatch).
func httpMatch(m gwv1.HTTPRouteMatch, field string) (*networking.HTTPMatchRequest, *routeError) {
	out := &networking.HTTPMatchRequest{}
	if m.Path != nil {
		typ := gwv1.PathMatchPathPrefix
		if m.Path.Type != nil {
			typ = *m.Path.Type
		}
		v := "/"
		if m.Path.Value != nil {
			v = *m.Path.Value
		}
		switch typ {
		case gwv1.PathMatchPathPrefix:
			if v != "/" {
				v = strings.TrimSuffix(v, "/")
			}
			out.Uri = &networking.StringMatch{MatchType: &networking.StringMatch_Prefix{Prefix: v}}
		case gwv1.PathMatchExact:
			out.Uri = &networking.StringMatch{MatchType: &networking.StringMatch_Exact{Exact: v}}
		case gwv1.PathMatchRegularExpression:
			out.Uri = &networking.StringMatch{MatchType: &networking.StringMatch_Regex{Regex: v}}
		default:
			return nil, &routeError{reason: string(gwv1.RouteReasonUnsupportedValue), message: fmt.Sprintf("%s.path.type: %q is not supported", field, typ)}
		}
	}
	for k, h := range m.Headers {
		if out.Headers == nil {
			out.Headers = map[string]*networking.StringMatch{}
		}
		typ := gwv1.HeaderMatchExact
		if h.Type != nil {
			typ = *h.Type
		}
		name := strings.ToLower(string(h.Name))
		if _, dup := out.Headers[name]; dup {
			continue // the spec: later equivalent names are ignored
		}
		switch typ {
		case gwv1.HeaderMatchExact:
			out.Headers[name] = &networking.StringMatch{MatchType: &networking.StringMatch_Exact{Exact: h.Value}}
		case gwv1.HeaderMatchRegularExpression:
			out.Headers[name] = &networking.StringMatch{MatchType: &networking.StringMatch_Regex{Regex: h.Value}}
		default:
			return nil, &routeError{reason: string(gwv1.RouteReasonUnsupportedValue), message: fmt.Sprintf("%s.headers[%d].type: %q is not supported", field, k, typ)}
		}
	}
	for k, q := range m.QueryParams {
		if out.QueryParams == nil {
			out.QueryParams = map[string]*networking.StringMatch{}
		}
		typ := gwv1.QueryParamMatchExact
		if q.Type != nil {
			typ = *q.Type
		}
		if _, dup := out.QueryParams[string(q.Name)]; dup {
			continue
		}
		switch typ {
		case gwv1.QueryParamMatchExact:
			out.QueryParams[string(q.Name)] = &networking.StringMatch{MatchType: &networking.StringMatch_Exact{Exact: q.Value}}
		case gwv1.QueryParamMatchRegularExpression:
			out.QueryParams[string(q.Name)] = &networking.StringMatch{MatchType: &networking.StringMatch_Regex{Regex: q.Value}}
		default:
			return nil, &routeError{reason: string(gwv1.RouteReasonUnsupportedValue), message: fmt.Sprintf("%s.queryParams[%d].type: %q is not supported", field, k, typ)}
		}
	}
	if m.Method != nil {
		out.Method = &networking.StringMatch{MatchType: &networking.StringMatch_Exact{Exact: string(*m.Method)}}
	}
	return out, nil
}
