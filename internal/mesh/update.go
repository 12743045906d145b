package mesh

import (
	"cmp"
	"slices"
	"strings"

	"github.com/straitmesh/strait/internal/istioconfig"
	"github.com/straitmesh/strait/internal/proxypush"
)

// UpdateEndpoints is the incremental form of Build for the most frequent
// change in a mesh: endpoints coming and going. store must be s.Configs
// with the ServiceEntries named in changed replaced (istioconfig.Store.With).
// When every one of them keeps its hosts and everything else its services
// are made of except the inline endpoints, and none selects workloads, it
// returns the snapshot Build would return, made by replacing just those
// services: the rest of the snapshot (other services, workloads, routing
// configs) is shared with s, and s is not modified. Otherwise it returns
// false and the caller builds from scratch.
func (s *Snapshot) UpdateEndpoints(store *istioconfig.Store, changed map[proxypush.ConfigKey]struct{}, version uint64) (*Snapshot, bool) {
	replaced := map[string]*Service{} // by host
	for k := range changed {
		if k.Kind != istioconfig.KindServiceEntry {
			return nil, false
		}
		oldCfg, newCfg := s.Configs.Get(k), store.Get(k)
		if oldCfg == nil || newCfg == nil {
			return nil, false // added or removed: hosts change
		}
		if oldCfg.Labels[AutoAddressLabel] != newCfg.Labels[AutoAddressLabel] {
			return nil, false // the allocation changes
		}
		oldSE, newSE := oldCfg.ServiceEntry(), newCfg.ServiceEntry()
		if oldSE.GetWorkloadSelector() != nil || newSE.GetWorkloadSelector() != nil ||
			!slices.Equal(oldSE.GetHosts(), newSE.GetHosts()) {
			return nil, false
		}
		var (
			ports     []Port
			endpoints []*Endpoint
		)
		for _, h := range newSE.GetHosts() {
			h = strings.TrimSuffix(h, ".")
			prev := s.servicesByHost[h]
			if prev == nil || s.serviceSources[h] != oldCfg {
				return nil, false // the host is another entry's (a conflict)
			}
			if ports == nil {
				ports = servicePorts(newSE)
				endpoints = buildEndpoints(newCfg, newSE, ports, nil)
			}
			svc := newService(newCfg, h, ports, nil, endpoints, s.Mesh.DefaultServiceExportTo)
			if len(prev.AutoAddresses) > 0 {
				svc.setAutoAddresses(prev.AutoAddresses)
			}
			if !SameExceptEndpoints(prev, svc) {
				return nil, false
			}
			replaced[h] = svc
		}
	}

	next := &Snapshot{
		Version:         version,
		Domain:          s.Domain,
		RootNamespace:   s.RootNamespace,
		Configs:         store,
		Mesh:            s.Mesh,
		Services:        slices.Clone(s.Services),
		servicesByHost:  make(map[string]*Service, len(s.servicesByHost)),
		serviceSources:  make(map[string]*istioconfig.Config, len(s.serviceSources)),
		workloadsByIP:   s.workloadsByIP,
		virtualServices: s.virtualServices,
		// The gateways read every VirtualService (AllVirtualServices) and
		// the credentials checked: without them a gateway would lose its
		// routes (404) and its ADS credentials after an endpoints change.
		vsList:      s.vsList,
		credentials: s.credentials,
		drs:         s.drs,
		sidecars:    s.sidecars,
		telemetries: s.telemetries,
		peerAuthn:   s.peerAuthn,
	}
	for h, svc := range s.servicesByHost {
		next.servicesByHost[h] = svc
	}
	for h, c := range s.serviceSources {
		next.serviceSources[h] = c
	}
	for h, svc := range replaced {
		next.servicesByHost[h] = svc
		next.serviceSources[h] = store.Get(svc.Config)
		i, found := slices.BinarySearchFunc(next.Services, svc, func(a, b *Service) int {
			return cmp.Or(cmp.Compare(a.Hostname, b.Hostname), cmp.Compare(a.Namespace, b.Namespace))
		})
		if !found {
			return nil, false // cannot happen: the host is in servicesByHost
		}
		next.Services[i] = svc
	}
	return next, true
}
