package gen

import (
	"net/netip"
	"sort"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/mesh"
	"github.com/straitmesh/strait/internal/model"
)

// BuildEndpoints returns the load assignments of the named outbound
// clusters (all of the proxy's EDS clusters when names is empty), sorted by
// cluster name. Unknown names are left out; a known cluster without
// endpoints gets an empty assignment so that Envoy stops waiting for it.
func (g *Generator) BuildEndpoints(proxy *model.Proxy, names []string) []*endpoint.ClusterLoadAssignment {
	return buildEndpoints(g.snapshot(), proxy, names)
}

func buildEndpoints(snap *mesh.Snapshot, proxy *model.Proxy, names []string) []*endpoint.ClusterLoadAssignment {
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
		if cla := clusterLoadAssignment(snap, scope, name); cla != nil {
			out = append(out, cla)
		}
	}
	return out
}

// clusterLoadAssignment is the EDS resource of one outbound cluster, or
// nil when the cluster is unknown or out of the scope.
func clusterLoadAssignment(snap *mesh.Snapshot, scope *mesh.Scope, name string) *endpoint.ClusterLoadAssignment {
	svc, port, selector, ok := edsTarget(snap, scope, name)
	if !ok {
		return nil
	}
	return loadAssignment(name, svc, port, selector)
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

func loadAssignment(name string, svc *mesh.Service, port uint32, selector map[string]string) *endpoint.ClusterLoadAssignment {
	var lbs []*endpoint.LbEndpoint
	for _, ep := range svc.Endpoints {
		if !ep.Matches(selector) {
			continue
		}
		// EDS carries IPs only; host names would need a DNS cluster.
		if _, err := netip.ParseAddr(ep.Address); err != nil {
			continue
		}
		lb := &endpoint.LbEndpoint{
			HostIdentifier: &endpoint.LbEndpoint_Endpoint{Endpoint: &endpoint.Endpoint{
				Address: socketAddress(ep.Address, ep.Ports[port]),
			}},
		}
		if ep.Weight > 0 {
			lb.LoadBalancingWeight = wrapperspb.UInt32(ep.Weight)
		}
		lbs = append(lbs, lb)
	}
	sort.SliceStable(lbs, func(i, j int) bool {
		a := lbs[i].GetEndpoint().GetAddress().GetSocketAddress()
		b := lbs[j].GetEndpoint().GetAddress().GetSocketAddress()
		if a.GetAddress() != b.GetAddress() {
			return a.GetAddress() < b.GetAddress()
		}
		return a.GetPortValue() < b.GetPortValue()
	})
	cla := &endpoint.ClusterLoadAssignment{ClusterName: name}
	if len(lbs) > 0 {
		cla.Endpoints = []*endpoint.LocalityLbEndpoints{{LbEndpoints: lbs}}
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
