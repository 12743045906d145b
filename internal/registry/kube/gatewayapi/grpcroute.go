package gatewayapi

import (
	"fmt"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// grpcRoutes translates the GRPCRoutes bound to our Gateways: each is
// rewritten as the HTTPRoute it means (a method match is a path match on
// /SERVICE/METHOD, as Istio's createGRPCURIMatch), then translated like
// one; the messages name the GRPCRoute's fields.
func (t *translator) grpcRoutes() {
	for _, r := range sortByAge(t.in.GRPCRoutes) {
		ref := Ref{"GRPCRoute", r.Namespace, r.Name}
		parents := t.bind("GRPCRoute", r.Namespace, r.Spec.CommonRouteSpec, r.Spec.Hostnames)
		if len(parents) == 0 {
			continue
		}
		h := &gwv1.HTTPRoute{ObjectMeta: r.ObjectMeta}
		var refused *routeError
		for i, rule := range r.Spec.Rules {
			hr, err := httpRuleOf(rule, fmt.Sprintf("spec.rules[%d]", i))
			if err != nil {
				refused = err
				break
			}
			h.Spec.Rules = append(h.Spec.Rules, hr)
		}
		t.attach(ref, r.Generation, parents, t.convertFor(parents, func() conversion {
			if refused != nil {
				return conversion{refused: refused}
			}
			routes, refused, unresolved := t.convertHTTPRules("GRPCRoute", h)
			return conversion{routes: routes, refused: refused, unresolved: unresolved}
		}))
	}
}

// httpRuleOf is the HTTPRoute rule a GRPCRoute rule means.
func httpRuleOf(rule gwv1.GRPCRouteRule, field string) (gwv1.HTTPRouteRule, *routeError) {
	refuse := func(format string, args ...any) *routeError {
		return &routeError{reason: string(gwv1.RouteReasonUnsupportedValue), message: fmt.Sprintf(format, args...)}
	}
	out := gwv1.HTTPRouteRule{Name: rule.Name}
	if rule.SessionPersistence != nil {
		return out, refuse("%s.sessionPersistence: not supported by Strait yet", field)
	}
	for j, m := range rule.Matches {
		mf := fmt.Sprintf("%s.matches[%d]", field, j)
		var hm gwv1.HTTPRouteMatch
		if mm := m.Method; mm != nil {
			typ := gwv1.GRPCMethodMatchExact
			if mm.Type != nil {
				typ = *mm.Type
			}
			svc, method := ptrString(mm.Service), ptrString(mm.Method)
			var pt gwv1.PathMatchType
			var v string
			switch {
			case mm.Service == nil && mm.Method == nil:
				return out, refuse("%s.method: a gRPC match must have a method or a service", mf)
			case typ == gwv1.GRPCMethodMatchExact && mm.Method == nil:
				pt, v = gwv1.PathMatchPathPrefix, "/"+svc+"/"
			case mm.Service == nil:
				pt, v = gwv1.PathMatchRegularExpression, "/[^/]+/"+method
			case typ == gwv1.GRPCMethodMatchExact:
				pt, v = gwv1.PathMatchExact, "/"+svc+"/"+method
			case typ == gwv1.GRPCMethodMatchRegularExpression && mm.Method == nil:
				pt, v = gwv1.PathMatchRegularExpression, "/"+svc+"/.+"
			case typ == gwv1.GRPCMethodMatchRegularExpression:
				pt, v = gwv1.PathMatchRegularExpression, "/"+svc+"/"+method
			default:
				return out, refuse("%s.method.type: %q is not supported", mf, typ)
			}
			hm.Path = &gwv1.HTTPPathMatch{Type: &pt, Value: &v}
			if pt == gwv1.PathMatchPathPrefix {
				// httpMatch trims a prefix's trailing "/", which a
				// service prefix must keep: match it as a regex.
				rx := gwv1.PathMatchRegularExpression
				v = "/" + svc + "/.*"
				hm.Path = &gwv1.HTTPPathMatch{Type: &rx, Value: &v}
			}
		}
		for _, h := range m.Headers {
			typ := gwv1.HeaderMatchExact
			if h.Type != nil && *h.Type == gwv1.GRPCHeaderMatchRegularExpression {
				typ = gwv1.HeaderMatchRegularExpression
			}
			hm.Headers = append(hm.Headers, gwv1.HTTPHeaderMatch{Type: &typ, Name: gwv1.HTTPHeaderName(h.Name), Value: h.Value})
		}
		out.Matches = append(out.Matches, hm)
	}
	for j, f := range rule.Filters {
		switch f.Type {
		case gwv1.GRPCRouteFilterRequestHeaderModifier:
			out.Filters = append(out.Filters, gwv1.HTTPRouteFilter{Type: gwv1.HTTPRouteFilterRequestHeaderModifier, RequestHeaderModifier: f.RequestHeaderModifier})
		case gwv1.GRPCRouteFilterResponseHeaderModifier:
			out.Filters = append(out.Filters, gwv1.HTTPRouteFilter{Type: gwv1.HTTPRouteFilterResponseHeaderModifier, ResponseHeaderModifier: f.ResponseHeaderModifier})
		case gwv1.GRPCRouteFilterRequestMirror:
			out.Filters = append(out.Filters, gwv1.HTTPRouteFilter{Type: gwv1.HTTPRouteFilterRequestMirror, RequestMirror: f.RequestMirror})
		default:
			return out, refuse("%s.filters[%d].type: filter %s is not supported by Strait yet", field, j, f.Type)
		}
	}
	for k, b := range rule.BackendRefs {
		hb := gwv1.HTTPBackendRef{BackendRef: b.BackendRef}
		for j, f := range b.Filters {
			switch f.Type {
			case gwv1.GRPCRouteFilterRequestHeaderModifier:
				hb.Filters = append(hb.Filters, gwv1.HTTPRouteFilter{Type: gwv1.HTTPRouteFilterRequestHeaderModifier, RequestHeaderModifier: f.RequestHeaderModifier})
			case gwv1.GRPCRouteFilterResponseHeaderModifier:
				hb.Filters = append(hb.Filters, gwv1.HTTPRouteFilter{Type: gwv1.HTTPRouteFilterResponseHeaderModifier, ResponseHeaderModifier: f.ResponseHeaderModifier})
			default:
				return out, refuse("%s.backendRefs[%d].filters[%d].type: filter %s on a backendRef is not supported by Strait yet", field, k, j, f.Type)
			}
		}
		out.BackendRefs = append(out.BackendRefs, hb)
	}
	return out, nil
}
