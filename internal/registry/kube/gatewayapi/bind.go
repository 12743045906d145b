package gatewayapi

import (
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// parentResult is the outcome of binding a route to one parentRef.
type parentResult struct {
	ref gwv1.ParentReference
	// reason "" = Accepted.
	reason, message string
	// bindings are the listeners bound and the hosts on each.
	bindings []binding
	// mesh is set for a Service parent that binds (mesh.go).
	mesh *meshParent
}

type binding struct {
	listener *listener
	hosts    []string
}

// bind binds a route of kind to its parentRefs: our Gateways, and
// Services (the mesh: bindService); other parents are left out (another
// controller reports on them).
func (t *translator) bind(kind, namespace string, spec gwv1.CommonRouteSpec, hostnames []gwv1.Hostname) []*parentResult {
	var out []*parentResult
	for i, p := range spec.ParentRefs {
		group, pkind := Group, "Gateway"
		if p.Group != nil {
			group = string(*p.Group)
		}
		if p.Kind != nil {
			pkind = string(*p.Kind)
		}
		ns := namespace
		if p.Namespace != nil {
			ns = string(*p.Namespace)
		}
		if group == "" && pkind == "Service" {
			out = append(out, t.bindService(kind, i, p, ns))
			continue
		}
		if group != Group || pkind != "Gateway" {
			continue
		}
		gw := t.gateways[gatewayRef(ns, string(p.Name))]
		if gw == nil {
			continue // not ours, or no such Gateway
		}
		out = append(out, t.bindGateway(kind, namespace, p, gw, hostnames))
	}
	return out
}

// bindGateway binds to the listeners of gw that p names and that allow
// the route (Istio's referenceAllowed).
func (t *translator) bindGateway(kind, namespace string, p gwv1.ParentReference, gw *gateway, hostnames []gwv1.Hostname) *parentResult {
	res := &parentResult{ref: p}
	if gw.reason != "" {
		res.reason, res.message = string(gwv1.RouteReasonNoMatchingParent), "the parent Gateway is not accepted: "+gw.message
		return res
	}
	var named, allowed, hostMatched int
	for _, l := range gw.listeners {
		if p.SectionName != nil && *p.SectionName != l.spec.Name {
			continue
		}
		if p.Port != nil && *p.Port != l.spec.Port {
			continue
		}
		named++
		if !l.bindable() || !t.allows(gw.obj, l, kind, namespace) {
			continue
		}
		allowed++
		hosts := intersectHosts(l.spec.Hostname, hostnames)
		if len(hosts) == 0 {
			continue
		}
		hostMatched++
		res.bindings = append(res.bindings, binding{listener: l, hosts: isolate(hosts, l, gw.listeners)})
	}
	switch {
	case named == 0:
		res.reason, res.message = string(gwv1.RouteReasonNoMatchingParent), "no listener of the Gateway matches the parentRef's sectionName and port"
	case allowed == 0:
		res.reason, res.message = string(gwv1.RouteReasonNotAllowedByListeners), "no listener of the Gateway allows a "+kind+" of namespace "+namespace
	case hostMatched == 0:
		res.reason, res.message = string(gwv1.RouteReasonNoMatchingListenerHostname), "no hostname of the route matches a listener's hostname"
	}
	return res
}

// allows applies a listener's allowedRoutes (namespaces and kinds).
func (t *translator) allows(g *gwv1.Gateway, l *listener, kind, namespace string) bool {
	kindOK := false
	for _, k := range l.kinds {
		if string(k.Kind) == kind {
			kindOK = true
		}
	}
	if !kindOK {
		return false
	}
	from := gwv1.NamespacesFromSame
	var sel *metav1.LabelSelector
	if ar := l.spec.AllowedRoutes; ar != nil && ar.Namespaces != nil {
		if ar.Namespaces.From != nil {
			from = *ar.Namespaces.From
		}
		sel = ar.Namespaces.Selector
	}
	switch from {
	case gwv1.NamespacesFromAll:
		return true
	case gwv1.NamespacesFromSame:
		return namespace == g.Namespace
	case gwv1.NamespacesFromSelector:
		if sel == nil {
			return false
		}
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			return false
		}
		ls := t.in.NamespaceLabels(namespace)
		if ls == nil {
			return false
		}
		return s.Matches(labels.Set(ls))
	}
	return false
}

// intersectHosts returns the hosts a route with hostnames serves on a
// listener of hostname (nil: any): the spec's hostname intersection, "*"
// when neither sets one.
func intersectHosts(listener *gwv1.Hostname, hostnames []gwv1.Hostname) []string {
	if len(hostnames) == 0 {
		if listener == nil {
			return []string{"*"}
		}
		return []string{string(*listener)}
	}
	var out []string
	for _, h := range hostnames {
		r := string(h)
		switch {
		case listener == nil:
			out = append(out, r)
		case r == string(*listener):
			out = append(out, r)
		case wildcardMatches(string(*listener), r):
			out = append(out, r)
		case wildcardMatches(r, string(*listener)):
			out = append(out, string(*listener))
		}
	}
	return dedupe(out)
}

// isolate drops the hosts that a more specific listener of the Gateway
// on the same port and protocol owns (the spec's listener isolation;
// Istio's hostnameAllowedByIsolation): a request for abc.foo.example.com
// is then answered only by the routes of a listener abc.foo.example.com,
// even when a route of the listener *.example.com (or of one without a
// hostname) names that host. The route stays attached.
func isolate(hosts []string, l *listener, all []*listener) []string {
	ours := ptrString(l.spec.Hostname)
	if ours != "" && !strings.HasPrefix(ours, "*") {
		return hosts // an exact listener hostname is the most specific
	}
	return slices.DeleteFunc(slices.Clone(hosts), func(h string) bool {
		for _, o := range all {
			other := ptrString(o.spec.Hostname)
			if o == l || !o.bindable() || o.spec.Port != l.spec.Port || o.spec.Protocol != l.spec.Protocol || other == ours {
				continue
			}
			if len(ours) <= len(other) && hostSubsetOf(h, other) {
				return true
			}
		}
		return false
	})
}

// hostSubsetOf reports whether every name host stands for is one that
// pattern stands for (Istio's host.Name.SubsetOf); "" stands for none.
func hostSubsetOf(host, pattern string) bool {
	switch {
	case pattern == "":
		return false
	case strings.HasPrefix(host, "*"):
		return strings.HasPrefix(pattern, "*") && strings.HasSuffix(host[1:], pattern[1:])
	case strings.HasPrefix(pattern, "*"):
		return strings.HasSuffix(host, pattern[1:])
	}
	return host == pattern
}

// wildcardMatches reports whether pattern "*.suffix" covers host (which
// has at least one more label).
func wildcardMatches(pattern, host string) bool {
	suffix, ok := strings.CutPrefix(pattern, "*")
	if !ok || strings.HasPrefix(host, "*") {
		return false
	}
	return strings.HasSuffix(host, suffix) && len(host) > len(suffix)
}

func dedupe(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// granted reports a ReferenceGrant in toNamespace allowing fromKind
// objects of fromNamespace to refer to toGroup/toKind toName.
func (t *translator) granted(fromKind, fromNamespace, toGroup, toKind, toNamespace, toName string) bool {
	for _, g := range t.in.ReferenceGrants {
		if g.Namespace != toNamespace {
			continue
		}
		fromOK := false
		for _, f := range g.Spec.From {
			if string(f.Group) == Group && string(f.Kind) == fromKind && string(f.Namespace) == fromNamespace {
				fromOK = true
			}
		}
		if !fromOK {
			continue
		}
		for _, to := range g.Spec.To {
			if string(to.Group) == toGroup && string(to.Kind) == toKind && (to.Name == nil || string(*to.Name) == toName) {
				return true
			}
		}
	}
	return false
}
