package gen

import (
	"net/netip"
	"sort"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/mesh"
	"github.com/straitmesh/strait/internal/proxypush"
)

// BuildEndpoints returns the load assignments of the named outbound
// clusters (all of the proxy's EDS clusters when names is empty), sorted by
// cluster name. Unknown names are left out; a known cluster without
// endpoints gets an empty assignment so that Envoy stops waiting for it.
func (g *Generator) BuildEndpoints(proxy *proxypush.Proxy, names []string) []*endpoint.ClusterLoadAssignment {
	return buildEndpoints(g.snapshot(), proxy, names)
}

func buildEndpoints(snap *mesh.Snapshot, proxy *proxypush.Proxy, names []string) []*endpoint.ClusterLoadAssignment {
	if len(names) == 0 {
		for _, c := range buildClusters(snap, proxy) {
			if c.EdsClusterConfig != nil {
				names = append(names, c.Name)
			}
		}
	}
	names = sortedUnique(append([]string(nil), names...))
	scope := snap.ProxyScope(proxy)
	var out []*endpoint.ClusterLoadAssignment
	for _, name := range names {
		if cla := clusterLoadAssignment(snap, scope, proxy, name); cla != nil {
			out = append(out, cla)
		}
	}
	return out
}

// clusterLoadAssignment is the EDS resource of one outbound cluster, or
// nil when the cluster is unknown or out of the scope.
func clusterLoadAssignment(snap *mesh.Snapshot, scope *mesh.Scope, proxy *proxypush.Proxy, name string) *endpoint.ClusterLoadAssignment {
	svc, port, selector, ok := edsTarget(snap, scope, name)
	if !ok {
		return nil
	}
	_, subset, _, _ := ParseOutboundClusterName(name)
	lv, _ := newLocalityView(snap, scope.Namespace, proxy, svc.Hostname, subset, port)
	return loadAssignment(snap, name, svc, port, selector, lv)
}

// edsTarget resolves an outbound cluster name to its service, port and
// subset selector, if the scope may reach it.
func edsTarget(snap *mesh.Snapshot, scope *mesh.Scope, name string) (*mesh.Service, uint32, map[string]string, bool) {
	port, subset, host, ok := ParseOutboundClusterName(name)
	if !ok {
		return nil, 0, nil, false
	}
	svc := snap.Service(host)
	if svc == nil || !svc.VisibleTo(scope.Namespace) || !scope.Includes(svc.Hostname, svc.Namespace) {
		return nil, 0, nil, false
	}
	if _, ok := svc.Port(port); !ok {
		return nil, 0, nil, false
	}
	var selector map[string]string
	if subset != "" {
		if selector, ok = snap.SubsetLabelsFor(scope.Namespace, host, subset); !ok {
			return nil, 0, nil, false
		}
	}
	return svc, port, selector, true
}

// loadAssignment is the EDS resource of cluster name: the endpoints of svc
// that selector selects, one LocalityLbEndpoints per locality (weighted by
// its endpoints' weights, as Istio's EndpointBuilder), with the
// priorities or weights of lv's locality setting for its proxy when lv is
// not nil. An endpoint that takes Istio mTLS on port carries the
// {tlsMode: istio} transport socket match metadata (mtls.go), which
// selects the mTLS socket of an auto mTLS cluster.
func loadAssignment(snap *mesh.Snapshot, name string, svc *mesh.Service, port uint32, selector map[string]string, lv *localityView) *endpoint.ClusterLoadAssignment {
	type entry struct {
		lb *endpoint.LbEndpoint
		ep *mesh.Endpoint
	}
	var entries []entry
	for _, ep := range svc.Endpoints {
		if !ep.Matches(selector) {
			continue
		}
		// EDS carries IPs only; host names would need a DNS cluster.
		if _, err := netip.ParseAddr(ep.Address); err != nil {
			continue
		}
		w := ep.Weight
		if w == 0 {
			w = 1
		}
		entries = append(entries, entry{ep: ep, lb: &endpoint.LbEndpoint{
			HostIdentifier: &endpoint.LbEndpoint_Endpoint{Endpoint: &endpoint.Endpoint{
				Address: socketAddress(ep.Address, ep.Ports[port]),
			}},
			LoadBalancingWeight: wrapperspb.UInt32(w),
		}})
		if mtlsEndpoint(snap, ep, port) { // mtls.go
			entries[len(entries)-1].lb.Metadata = endpointTLSMetadata()
		}
	}
	sort.SliceStable(entries, func(i, j int) bool {
		a := entries[i].lb.GetEndpoint().GetAddress().GetSocketAddress()
		b := entries[j].lb.GetEndpoint().GetAddress().GetSocketAddress()
		if a.GetAddress() != b.GetAddress() {
			return a.GetAddress() < b.GetAddress()
		}
		return a.GetPortValue() < b.GetPortValue()
	})
	cla := &endpoint.ClusterLoadAssignment{ClusterName: name}
	if len(entries) == 0 {
		return cla
	}
	lbs := make([]*endpoint.LbEndpoint, len(entries))
	eps := make([]*mesh.Endpoint, len(entries))
	for i, e := range entries {
		lbs[i], eps[i] = e.lb, e.ep
	}
	groups := groupByLocality(lbs, eps) // locality.go
	if lv != nil {
		groups = lv.apply(groups)
	}
	for _, g := range groups {
		cla.Endpoints = append(cla.Endpoints, g.lle)
	}
	return cla
}

func socketAddress(ip string, port uint32) *core.Address {
	return &core.Address{Address: &core.Address_SocketAddress{SocketAddress: &core.SocketAddress{
		Protocol:      core.SocketAddress_TCP,
		Address:       ip,
		PortSpecifier: &core.SocketAddress_PortValue{PortValue: port},
	}}}
}
