package gatewayapi

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	networking "istio.io/api/networking/v1alpha3"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/straitmesh/strait/internal/istioconfig"
)

// The mesh (GAMMA): an HTTPRoute or GRPCRoute whose parentRef is a
// Service (group "", kind Service) applies to the sidecars that call
// that Service, as Istio's: it becomes a VirtualService of the route's
// namespace for the Service's host, bound to the mesh, named after its
// merge key (NAMESPACE[.PORT].HOST: Istio's name has "~" where Strait,
// which checks config names, has "."; the routes of one namespace for
// one Service, and port, are merged, the oldest route's first). A parentRef
// port restricts the rules to requests to that port. The backendRefs of
// a mesh route need no ReferenceGrant (Istio enforces none for the
// mesh). A consumer route, of another namespace than its Service, is
// exported to its own namespace only: it applies to the requests of that
// namespace's workloads (GEP-1426); a producer route, of the Service's
// namespace, to every namespace's.

// meshGateway is the VirtualService gateways name of the sidecars.
const meshGateway = "mesh"

// meshParent is a Service parentRef that binds.
type meshParent struct {
	// host is the Service's NAME.NAMESPACE.svc.DOMAIN.
	host string
	port *gwv1.PortNumber
}

// meshVirtualService collects the routes bound to one Service (and
// port) from the routes of one namespace.
type meshVirtualService struct {
	namespace, host string
	routes          []*networking.HTTPRoute
	parents         []string
}

// bindService binds a route of kind to the Service parentRef p (index
// i) of namespace ns.
func (t *translator) bindService(kind string, i int, p gwv1.ParentReference, ns string) *parentResult {
	res := &parentResult{ref: p}
	switch {
	case kind != "HTTPRoute" && kind != "GRPCRoute":
		res.reason, res.message = string(gwv1.RouteReasonUnsupportedValue),
			fmt.Sprintf("spec.parentRefs[%d]: a Service parent (the mesh, GAMMA) of a %s is not supported by Strait yet", i, kind)
	case p.SectionName != nil:
		res.reason, res.message = string(gwv1.RouteReasonUnsupportedValue),
			fmt.Sprintf("spec.parentRefs[%d].sectionName: a Service parent's sectionName is not supported by Strait yet (use port)", i)
	case !t.in.ServiceExists(ns, string(p.Name)):
		// Istio's reason and message.
		res.reason, res.message = string(gwv1.RouteReasonNoMatchingParent), fmt.Sprintf("parent service: %q not found", p.Name)
	default:
		res.mesh = &meshParent{host: string(p.Name) + "." + ns + ".svc." + t.in.Domain, port: p.Port}
	}
	return res
}

// bindMesh adds the translated routes of the route ref to the mesh
// VirtualService of its namespace for the parent's Service (and port).
func (t *translator) bindMesh(ref Ref, p *meshParent, routes []*networking.HTTPRoute) {
	if len(routes) == 0 {
		return
	}
	key := ref.Namespace
	if p.port != nil {
		key += "/" + strconv.Itoa(int(*p.port))
	}
	key += "/" + p.host
	vs := t.meshRoutes[key]
	if vs == nil {
		vs = &meshVirtualService{namespace: ref.Namespace, host: p.host}
		t.meshRoutes[key] = vs
	}
	own := make([]*networking.HTTPRoute, 0, len(routes))
	for _, r := range routes {
		r = cloneRoute(r)
		if p.port != nil {
			for _, m := range r.Match {
				m.Port = uint32(*p.port)
			}
			if len(r.Match) == 0 {
				r.Match = []*networking.HTTPMatchRequest{{Port: uint32(*p.port)}}
			}
		}
		own = append(own, r)
	}
	// Istio sorts each route's rules, then appends the routes oldest
	// first. A PathPrefix matches whole segments here as on a gateway.
	sortHTTPRoutes(own)
	for i, r := range own {
		own[i] = segmentPrefixes(r)
	}
	vs.routes = append(vs.routes, own...)
	if from := ref.Kind + "/" + ref.Name + "." + ref.Namespace; !slices.Contains(vs.parents, from) {
		vs.parents = append(vs.parents, from)
	}
}

// meshVirtualServices are the VirtualServices of the mesh routes, by
// name.
func (t *translator) meshVirtualServices() []*istioconfig.Config {
	var out []*istioconfig.Config
	for _, key := range slices.Sorted(mapsKeys(t.meshRoutes)) {
		vs := t.meshRoutes[key]
		spec := &networking.VirtualService{Hosts: []string{vs.host}, Gateways: []string{meshGateway}, Http: vs.routes}
		if consumerRoute(vs) {
			// A consumer route (GEP-1426) only applies to the requests of
			// its own namespace's workloads.
			spec.ExportTo = []string{vs.namespace}
		}
		c, err := validated(istioconfig.KindVirtualService, vs.namespace, strings.ReplaceAll(key, "/", "."), spec,
			map[string]string{"internal.istio.io/parents": strings.Join(vs.parents, ",")})
		if err != nil {
			// Each route was validated alone: only their combination can
			// fail here. Leave it out rather than serve part.
			t.out.Dropped = append(t.out.Dropped, fmt.Errorf("routes %s: %w", strings.Join(vs.parents, ", "), err))
			continue
		}
		out = append(out, c)
	}
	return out
}

// consumerRoute says whether the routes of vs are consumer routes: of
// another namespace than the Service they are bound to (whose host is
// NAME.NAMESPACE.svc.DOMAIN).
func consumerRoute(vs *meshVirtualService) bool {
	parts := strings.SplitN(vs.host, ".", 3)
	return len(parts) == 3 && parts[1] != vs.namespace
}
