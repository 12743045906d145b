package mesh

import (
	"slices"
	"time"

	"github.com/straitmesh/strait/internal/istioconfig"
	"github.com/straitmesh/strait/internal/proxypush"
)

// PushRequestFor builds the push request for a change from old to new
// (old may be nil), given the changed config keys. It names what the
// change concerns so that the xDS server pushes only to dependent proxies:
//
//   - ServicesUpdated: hosts whose service or endpoints changed
//     (DiffServices), plus the hosts of changed VirtualServices that bind
//     the sidecars (BindsMesh; of the roots that do and delegate to a
//     changed delegate) and DestinationRules, before and after;
//   - AddressesUpdated: IPs whose inbound side changed, plus the old and
//     new address of every changed WorkloadEntry (its labels may pick
//     another Sidecar);
//   - Full is false only when nothing but endpoints changed.
func PushRequestFor(old, new *Snapshot, changed map[proxypush.ConfigKey]struct{}, start time.Time) *proxypush.PushRequest {
	diff := DiffServices(old, new)
	req := &proxypush.PushRequest{
		ConfigsUpdated:   changed,
		ServicesUpdated:  diff.Hosts,
		AddressesUpdated: diff.Addresses,
		Reason:           []proxypush.TriggerReason{proxypush.ConfigUpdate},
		Start:            start,
	}
	full := !diff.EndpointsOnly
	if !full && old != nil {
		// The outbound clusters carry the SANs of the endpoints with a
		// sidecar, so a change of that identity set needs CDS, not only
		// EDS (Istio's EDS update turns into a full push when the service
		// accounts change).
		for h := range diff.Hosts {
			if !slices.Equal(old.sidecarIdentities(h), new.sidecarIdentities(h)) {
				full = true
				break
			}
		}
	}
	for k := range changed {
		for _, snap := range []*Snapshot{old, new} {
			if snap == nil {
				continue
			}
			c := snap.Configs.Get(k)
			if c == nil {
				continue
			}
			switch k.Kind {
			case istioconfig.KindVirtualService:
				if !BindsMesh(c.VirtualService().GetGateways()) {
					// Bound to gateways only: no sidecar takes it, and
					// a gateway takes every config change.
					break
				}
				for _, h := range c.VirtualService().GetHosts() {
					req.ServicesUpdated[snap.ResolveHost(h, c.Namespace)] = struct{}{}
				}
				// A delegate has no hosts: its roots' hosts changed.
				for _, h := range snap.delegatingHosts(c) {
					req.ServicesUpdated[h] = struct{}{}
				}
			case istioconfig.KindDestinationRule:
				req.ServicesUpdated[snap.ResolveHost(c.DestinationRule().GetHost(), c.Namespace)] = struct{}{}
			case istioconfig.KindWorkloadEntry:
				req.AddressesUpdated[c.WorkloadEntry().GetAddress()] = struct{}{}
			}
		}
		switch k.Kind {
		case istioconfig.KindServiceEntry, istioconfig.KindWorkloadEntry:
		default:
			full = true
		}
	}
	req.Full = full
	if full {
		req.Reason = []proxypush.TriggerReason{proxypush.ConfigUpdate}
	} else {
		req.Reason = []proxypush.TriggerReason{proxypush.EndpointUpdate}
	}
	return req
}

// MeshGateway is the name that, in a VirtualService's gateways, stands for
// the sidecars.
const MeshGateway = "mesh"

// BindsMesh reports whether a VirtualService with these gateways applies
// to the sidecars: none named (the default), or "mesh" among them.
func BindsMesh(gateways []string) bool {
	return len(gateways) == 0 || slices.Contains(gateways, MeshGateway)
}

// delegatingHosts returns the resolved hosts of the VirtualServices that
// bind the sidecars and whose http routes delegate to VirtualService d.
func (s *Snapshot) delegatingHosts(d *istioconfig.Config) []string {
	var out []string
	for _, c := range s.Configs.List(istioconfig.KindVirtualService) {
		if !BindsMesh(c.VirtualService().GetGateways()) {
			continue
		}
		for _, r := range c.VirtualService().GetHttp() {
			ref := r.GetDelegate()
			if ref == nil || ref.GetName() != d.Name {
				continue
			}
			if ns := ref.GetNamespace(); ns == d.Namespace || (ns == "" && c.Namespace == d.Namespace) {
				for _, h := range c.VirtualService().GetHosts() {
					out = append(out, s.ResolveHost(h, c.Namespace))
				}
				break
			}
		}
	}
	return out
}

// sidecarIdentities is the sorted set of the namespace/service account of
// host's endpoints that have a sidecar (Istio's tlsMode label), the
// identities an auto mTLS cluster's SANs list.
func (s *Snapshot) sidecarIdentities(host string) []string {
	svc := s.servicesByHost[host]
	if svc == nil {
		return nil
	}
	var ids []string
	for _, ep := range svc.Endpoints {
		if ep.Labels["security.istio.io/tlsMode"] != "istio" || ep.Workload.Name == "" {
			continue
		}
		sa := ""
		if w := s.WorkloadByIP(ep.Address); w != nil {
			sa = w.ServiceAccount
		}
		ids = append(ids, ep.Workload.Namespace+"/"+sa)
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}
