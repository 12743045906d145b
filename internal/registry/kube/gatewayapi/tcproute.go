package gatewayapi

import (
	"fmt"

	networking "istio.io/api/networking/v1alpha3"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// streamRoutes translates the TLSRoutes (on TLS Passthrough listeners:
// a VirtualService tls rule per hostname, matched by SNI) and TCPRoutes
// (on TCP listeners: tcp rules) bound to our Gateways, as Istio's
// convertTLSRoute and convertTCPRoute. A backend that does not resolve
// is left out (ResolvedRefs=False): a rule with none left forwards
// nowhere, and its connections are closed.
func (t *translator) streamRoutes() {
	for _, r := range sortByAge(t.in.TLSRoutes) {
		ref := Ref{"TLSRoute", r.Namespace, r.Name}
		parents := t.bind("TLSRoute", r.Namespace, r.Spec.CommonRouteSpec, r.Spec.Hostnames)
		if len(parents) == 0 {
			continue
		}
		var rules [][]*networking.RouteDestination
		var unresolved, refused *routeError
		for i, rule := range r.Spec.Rules {
			dsts, bad, err := t.streamDestinations("TLSRoute", r.Namespace, rule.BackendRefs, fmt.Sprintf("spec.rules[%d]", i))
			if err != nil {
				refused = err
				break
			}
			if bad != nil {
				unresolved = bad
			}
			rules = append(rules, dsts)
		}
		if refused == nil {
			var probe []*networking.TLSRoute
			for _, d := range rules {
				if len(d) > 0 {
					probe = append(probe, &networking.TLSRoute{Match: []*networking.TLSMatchAttributes{{SniHosts: []string{"probe.example.com"}}}, Route: d})
				}
			}
			if err := validateRoutes(ref, &networking.VirtualService{Tls: probe}); err != nil {
				refused = &routeError{reason: string(gwv1.RouteReasonUnsupportedValue), message: err.Error()}
			}
		}
		t.attachWith(ref, r.Generation, parents, refused, unresolved, func(l *listener, host string) {
			for _, d := range rules {
				if len(d) == 0 {
					continue
				}
				l.addStreamParent(host, ref)
				l.tlsRoutes[host] = append(l.tlsRoutes[host], &networking.TLSRoute{
					Match: []*networking.TLSMatchAttributes{{SniHosts: []string{host}}}, Route: d,
				})
			}
		})
	}
	for _, r := range sortByAge(t.in.TCPRoutes) {
		ref := Ref{"TCPRoute", r.Namespace, r.Name}
		parents := t.bind("TCPRoute", r.Namespace, r.Spec.CommonRouteSpec, nil)
		if len(parents) == 0 {
			continue
		}
		var routes []*networking.TCPRoute
		var unresolved, refused *routeError
		for i, rule := range r.Spec.Rules {
			dsts, bad, err := t.streamDestinations("TCPRoute", r.Namespace, rule.BackendRefs, fmt.Sprintf("spec.rules[%d]", i))
			if err != nil {
				refused = err
				break
			}
			if bad != nil {
				unresolved = bad
			}
			if len(dsts) > 0 {
				routes = append(routes, &networking.TCPRoute{Route: dsts})
			}
		}
		if refused == nil {
			if err := validateRoutes(ref, &networking.VirtualService{Tcp: routes}); err != nil {
				refused = &routeError{reason: string(gwv1.RouteReasonUnsupportedValue), message: err.Error()}
			}
		}
		t.attachWith(ref, r.Generation, parents, refused, unresolved, func(l *listener, _ string) {
			l.addStreamParent("*", ref)
			l.tcpRoutes = append(l.tcpRoutes, routes...)
		})
	}
}

// streamDestinations resolves a TLS or TCP rule's backendRefs (Istio's
// buildTCPDestination): weighted when more than one.
func (t *translator) streamDestinations(kind, namespace string, refs []gwv1.BackendRef, field string) ([]*networking.RouteDestination, *routeError, *routeError) {
	var out []*networking.RouteDestination
	var unresolved *routeError
	for k, b := range refs {
		w := int32(1)
		if b.Weight != nil {
			w = *b.Weight
		}
		if w == 0 {
			continue
		}
		dst, bad, err := t.destination(kind, namespace, b.BackendObjectReference, fmt.Sprintf("%s.backendRefs[%d]", field, k))
		if err != nil {
			return nil, nil, err
		}
		if bad != nil {
			unresolved = bad
			continue
		}
		out = append(out, &networking.RouteDestination{Destination: dst, Weight: w})
	}
	if len(out) == 1 {
		out[0].Weight = 0
	}
	return out, unresolved, nil
}
