package mesh

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/straitmesh/strait/internal/istioconfig"
	"github.com/straitmesh/strait/internal/meshconfig"
	"github.com/straitmesh/strait/internal/protocol"
	"github.com/straitmesh/strait/internal/proxypush"
)

// DefaultDomain is the cluster DNS domain used when none is configured.
const DefaultDomain = "cluster.local"

// Snapshot is an immutable view of the mesh: every config plus the service
// model derived from it. Nothing reachable from a Snapshot is modified after
// Build returns, so any number of goroutines may read it without locking.
type Snapshot struct {
	// Version is set by the registry; it increases with every change.
	Version uint64
	// Domain is the cluster DNS domain, e.g. "cluster.local".
	Domain string
	// RootNamespace is the namespace whose selector-less Sidecar is the
	// mesh default (the control plane's namespace).
	RootNamespace string
	Configs       *istioconfig.Store
	// Mesh is the mesh config (never nil).
	Mesh *meshconfig.Config
	// Services are sorted by hostname, then namespace.
	Services []*Service

	servicesByHost  map[string]*Service
	serviceSources  map[string]*istioconfig.Config // the ServiceEntry each host came from
	workloadsByIP   map[string]*Workload
	virtualServices map[string][]*istioconfig.Config // by resolved host, sorted by namespace/name
	vsList          []*istioconfig.Config            // every VirtualService, delegates merged, sorted by namespace/name
	drs             *drIndex                         // DestinationRules by namespace and host
	sidecars        []*istioconfig.Config            // sorted by namespace/name
	telemetries     []*istioconfig.Config            // oldest first (telemetry.go)
	peerAuthn       *peerAuthn                       // PeerAuthentications (buildPeerAuthn)
	credentials     gatewayCredentials               // the Gateways' credentialNames checked (credentials.go)

	// scopeMu guards scopes, the per-proxy-scope cache filled by
	// ProxyScope (the only lazily computed part of a snapshot).
	scopeMu sync.RWMutex
	scopes  map[string]*Scope
}

// BuildOptions configure Build.
type BuildOptions struct {
	Domain string // default DefaultDomain
	// RootNamespace defaults to DefaultRootNamespace. The mesh config's
	// rootNamespace, when set, wins over it (as in Istio, where the
	// control plane's namespace is only rootNamespace's default).
	RootNamespace string
	// Mesh is the mesh config; nil is meshconfig.Default().
	Mesh    *meshconfig.Config
	Version uint64
	// Previous is the snapshot this one replaces, if any: services that did
	// not change keep their *Service pointer from it (structural sharing),
	// which DiffServices and the generators' caches rely on.
	Previous *Snapshot
	// Credentials checks the Gateways' tls.credentialName (credentials.go);
	// nil serves every credential unchecked.
	Credentials Credentials
}

// Build derives the service model from a store. It returns the problems it
// had to resolve (e.g. two ServiceEntries for one host: the first by
// namespace/name wins) as *istioconfig.FieldError values; the snapshot is usable
// either way.
func Build(store *istioconfig.Store, opts BuildOptions) (*Snapshot, []error) {
	if opts.Domain == "" {
		opts.Domain = DefaultDomain
	}
	if opts.Mesh == nil {
		// The same config as before keeps the same pointer, which caches
		// compare.
		if opts.Previous != nil {
			opts.Mesh = opts.Previous.Mesh
		} else {
			opts.Mesh = meshconfig.Default()
		}
	}
	if opts.Mesh.RootNamespace != "" {
		opts.RootNamespace = opts.Mesh.RootNamespace
	}
	if opts.RootNamespace == "" {
		opts.RootNamespace = DefaultRootNamespace
	}
	if store == nil {
		store = istioconfig.NewStore()
	}
	s := &Snapshot{
		Version:         opts.Version,
		Domain:          opts.Domain,
		RootNamespace:   opts.RootNamespace,
		Configs:         store,
		Mesh:            opts.Mesh,
		servicesByHost:  map[string]*Service{},
		serviceSources:  map[string]*istioconfig.Config{},
		workloadsByIP:   map[string]*Workload{},
		virtualServices: map[string][]*istioconfig.Config{},
	}
	var problems []error

	var workloads []*Workload
	for _, c := range store.List(istioconfig.KindWorkloadEntry) {
		we := c.WorkloadEntry()
		w := &Workload{Name: c.Name, Namespace: c.Namespace, Address: we.Address, Labels: we.Labels, Ports: we.Ports, ServiceAccount: we.ServiceAccount,
			Weight: we.Weight, Locality: we.Locality}
		workloads = append(workloads, w)
		if prev, ok := s.workloadsByIP[w.Address]; ok {
			problems = append(problems, &istioconfig.FieldError{File: c.Source.File, Document: c.Source.Document, Field: "spec.address",
				Problem: fmt.Sprintf("%s is also the address of WorkloadEntry %s/%s; proxies with this IP use that one", w.Address, prev.Namespace, prev.Name)})
			continue
		}
		s.workloadsByIP[w.Address] = w
	}

	for _, c := range store.List(istioconfig.KindServiceEntry) {
		se := c.ServiceEntry()
		var (
			built     bool
			ports     []Port
			selector  map[string]string
			endpoints []*Endpoint
		)
		build := func() {
			if built {
				return
			}
			built = true
			ports = servicePorts(se)
			if se.WorkloadSelector != nil {
				selector = se.WorkloadSelector.Labels
				if selector == nil {
					selector = map[string]string{}
				}
			}
			endpoints = buildEndpoints(c, se, ports, workloads)
		}
		for i, h := range se.Hosts {
			h = strings.TrimSuffix(h, ".")
			if prev, ok := s.servicesByHost[h]; ok {
				problems = append(problems, &istioconfig.FieldError{File: c.Source.File, Document: c.Source.Document, Field: fmt.Sprintf("spec.hosts[%d]", i),
					Problem: fmt.Sprintf("host %s is already defined by ServiceEntry %s/%s; ignoring this one", h, prev.Config.Namespace, prev.Config.Name)})
				continue
			}
			s.serviceSources[h] = c
			// A service made from the very same config, without a workload
			// selector (whose endpoints depend on the workloads), is the
			// same: keep the previous one without rebuilding it.
			if p := opts.Previous; p != nil && p.Mesh == opts.Mesh && se.WorkloadSelector == nil && p.serviceSources[h] == c && p.servicesByHost[h] != nil {
				svc := p.servicesByHost[h]
				s.servicesByHost[h] = svc
				s.Services = append(s.Services, svc)
				continue
			}
			build()
			svc := newService(c, h, ports, selector, endpoints, opts.Mesh.DefaultServiceExportTo)
			s.servicesByHost[h] = svc
			s.Services = append(s.Services, svc)
		}
	}
	slices.SortFunc(s.Services, func(a, b *Service) int {
		return cmp.Or(cmp.Compare(a.Hostname, b.Hostname), cmp.Compare(a.Namespace, b.Namespace))
	})
	allocateAutoAddresses(s, opts.Previous)
	s.reuseUnchanged(opts.Previous)

	vss, vsProblems := s.mergeDelegates(store.List(istioconfig.KindVirtualService), opts.Mesh.DefaultVirtualServiceExportTo)
	problems = append(problems, vsProblems...)
	s.vsList = vss
	for _, c := range vss {
		seen := map[string]bool{}
		for _, h := range c.VirtualService().Hosts {
			h = s.ResolveHost(h, c.Namespace)
			if seen[h] {
				continue
			}
			seen[h] = true
			s.virtualServices[h] = append(s.virtualServices[h], c)
		}
	}
	s.sidecars = store.List(istioconfig.KindSidecar)
	s.telemetries = sortTelemetries(store.List(istioconfig.KindTelemetry))
	var paProblems []error
	s.peerAuthn, paProblems = buildPeerAuthn(store, opts.RootNamespace)
	problems = append(problems, paProblems...)
	problems = append(problems, s.buildDestinationRules(store, opts.Mesh.DefaultDestinationRuleExportTo)...)
	problems = append(problems, s.gatewayProblems(workloads)...) // gateway.go
	var credProblems []error
	s.credentials, credProblems = checkGatewayCredentials(s, workloads, opts.Credentials) // credentials.go
	problems = append(problems, credProblems...)
	return s, problems
}

// servicePorts are the ports of a ServiceEntry's services.
func servicePorts(se *networking.ServiceEntry) []Port {
	ports := make([]Port, 0, len(se.GetPorts()))
	for _, p := range se.GetPorts() {
		ports = append(ports, Port{Name: p.Name, Number: p.Number, Protocol: protocol.ForPort(p.Protocol, p.Name), TargetPort: p.TargetPort})
	}
	return ports
}

// newService is the service of host h made from ServiceEntry c;
// defExport is the mesh's defaultServiceExportTo.
func newService(c *istioconfig.Config, h string, ports []Port, selector map[string]string, endpoints []*Endpoint, defExport []string) *Service {
	se := c.ServiceEntry()
	return &Service{
		Hostname: h, Namespace: c.Namespace, Addresses: se.Addresses, Ports: ports,
		Resolution: se.Resolution, Location: se.Location, WorkloadSelector: selector,
		ExportTo: meshconfig.ExportTo(se.ExportTo, defExport), Config: c.Key(), Endpoints: endpoints,
	}
}

// buildEndpoints returns the endpoints of a ServiceEntry: its inline
// endpoints, or the WorkloadEntries in its namespace that its
// workloadSelector selects.
func buildEndpoints(c *istioconfig.Config, se *networking.ServiceEntry, ports []Port, workloads []*Workload) []*Endpoint {
	var eps []*Endpoint
	portsFor := func(named map[string]uint32) map[uint32]uint32 {
		m := make(map[uint32]uint32, len(ports))
		for _, p := range ports {
			switch {
			case named[p.Name] != 0:
				m[p.Number] = named[p.Name]
			case p.TargetPort != 0:
				m[p.Number] = p.TargetPort
			default:
				m[p.Number] = p.Number
			}
		}
		return m
	}
	if se.WorkloadSelector != nil {
		for _, w := range workloads {
			if w.Namespace != c.Namespace || !labelsMatch(se.WorkloadSelector.Labels, w.Labels) {
				continue
			}
			eps = append(eps, &Endpoint{Address: w.Address, Labels: w.Labels, Ports: portsFor(w.Ports), Weight: w.Weight, Locality: w.Locality,
				Workload: proxypush.ConfigKey{Kind: istioconfig.KindWorkloadEntry, Name: w.Name, Namespace: w.Namespace}})
		}
	}
	hostnames := endpointHostnames(c.Annotations[EndpointHostnamesAnnotation])
	for _, e := range se.Endpoints {
		eps = append(eps, &Endpoint{Address: e.Address, Labels: e.Labels, Ports: portsFor(e.Ports), Weight: e.Weight, Locality: e.Locality,
			Hostname: hostnames[e.Address]})
	}
	slices.SortStableFunc(eps, func(a, b *Endpoint) int {
		return cmp.Or(cmp.Compare(a.Address, b.Address), cmp.Compare(a.Workload.Name, b.Workload.Name))
	})
	return eps
}

// ResolveHost turns a host as written in a config of namespace ns into the
// FQDN it means: a short name ("reviews") becomes
// "reviews.NS.svc.DOMAIN"; names with a dot and wildcards are kept.
func (s *Snapshot) ResolveHost(host, ns string) string {
	host = strings.TrimSuffix(host, ".")
	if host == "" || host == "*" || strings.Contains(host, ".") {
		return host
	}
	return host + "." + ns + ".svc." + s.Domain
}

// Service returns the service with the given FQDN, or nil.
func (s *Snapshot) Service(host string) *Service { return s.servicesByHost[host] }

// VisibleServices returns the services a proxy in namespace ns may see,
// sorted by hostname.
func (s *Snapshot) VisibleServices(ns string) []*Service {
	out := make([]*Service, 0, len(s.Services))
	for _, svc := range s.Services {
		if svc.VisibleTo(ns) {
			out = append(out, svc)
		}
	}
	return out
}

// VirtualServicesFor returns the VirtualServices of host (as
// VirtualServices does) that are exported to namespace ns: exportTo, else
// the mesh's defaultVirtualServiceExportTo, else everywhere.
func (s *Snapshot) VirtualServicesFor(ns, host string) []*istioconfig.Config {
	all := s.VirtualServices(host)
	out := all[:0:0]
	for _, c := range all {
		if visibleTo(c.VirtualService().GetExportTo(), s.Mesh.DefaultVirtualServiceExportTo, c.Namespace, ns) {
			out = append(out, c)
		}
	}
	return out
}

// AllVirtualServices returns every root VirtualService (delegates merged
// into them), sorted by namespace/name, whatever their exportTo: a
// gateway's routes come from those bound to it by name, whatever their
// hosts.
func (s *Snapshot) AllVirtualServices() []*istioconfig.Config { return s.vsList }

// VirtualServiceVisibleTo reports whether VirtualService c is exported to
// namespace ns (its exportTo, else the mesh's default).
func (s *Snapshot) VirtualServiceVisibleTo(c *istioconfig.Config, ns string) bool {
	return visibleTo(c.VirtualService().GetExportTo(), s.Mesh.DefaultVirtualServiceExportTo, c.Namespace, ns)
}

// VirtualServices returns the VirtualServices whose hosts include host
// (exactly, or by a "*.suffix" wildcard), exact matches first, each group
// sorted by namespace/name, whatever their exportTo.
func (s *Snapshot) VirtualServices(host string) []*istioconfig.Config {
	out := slices.Clone(s.virtualServices[host])
	var wild []*istioconfig.Config
	for h, cs := range s.virtualServices {
		if h != host && wildcardMatch(h, host) {
			wild = append(wild, cs...)
		}
	}
	slices.SortFunc(wild, func(a, b *istioconfig.Config) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return append(out, wild...)
}

func wildcardMatch(pattern, host string) bool {
	if pattern == "*" {
		return true
	}
	suffix, ok := strings.CutPrefix(pattern, "*")
	return ok && strings.HasSuffix(host, suffix)
}

// DestinationRule returns the DestinationRule for host for a caller with
// no proxy namespace: the rules of the first namespace (by name) that has
// any, merged; nil when there are none. Generators use DestinationRuleFor.
func (s *Snapshot) DestinationRule(host string) *istioconfig.Config { return s.drs.any(host) }

// Subsets returns the DestinationRule subsets of host (DestinationRule's
// rule), in the rule's order.
func (s *Snapshot) Subsets(host string) []*networking.Subset {
	if dr := s.DestinationRule(host); dr != nil {
		return dr.DestinationRule().Subsets
	}
	return nil
}

// SubsetLabels returns the labels of a named subset of host.
func (s *Snapshot) SubsetLabels(host, subset string) (map[string]string, bool) {
	for _, ss := range s.Subsets(host) {
		if ss.Name == subset {
			return ss.Labels, true
		}
	}
	return nil, false
}

// WorkloadByIP returns the WorkloadEntry whose address is ip, or nil.
func (s *Snapshot) WorkloadByIP(ip string) *Workload { return s.workloadsByIP[ip] }

// WorkloadIPs returns the addresses of every workload, sorted.
func (s *Snapshot) WorkloadIPs() []string {
	out := make([]string, 0, len(s.workloadsByIP))
	for ip := range s.workloadsByIP {
		out = append(out, ip)
	}
	slices.Sort(out)
	return out
}

// InboundInstances returns the service ports served at ip: for every
// service with an endpoint at ip, each of its ports with the endpoint's
// port, sorted by endpoint port then hostname.
func (s *Snapshot) InboundInstances(ip string) []ServiceInstance {
	var out []ServiceInstance
	for _, svc := range s.Services {
		for _, ep := range svc.Endpoints {
			if ep.Address != ip {
				continue
			}
			for _, p := range svc.Ports {
				out = append(out, ServiceInstance{Service: svc, Port: p, EndpointPort: ep.Ports[p.Number]})
			}
			break
		}
	}
	slices.SortStableFunc(out, func(a, b ServiceInstance) int {
		return cmp.Or(cmp.Compare(a.EndpointPort, b.EndpointPort), cmp.Compare(a.Service.Hostname, b.Service.Hostname))
	})
	return out
}

// endpointHostnames parses EndpointHostnamesAnnotation ("ADDR=NAME,...");
// malformed items are skipped (the registry writes it).
func endpointHostnames(v string) map[string]string {
	if v == "" {
		return nil
	}
	m := map[string]string{}
	for item := range strings.SplitSeq(v, ",") {
		if addr, name, ok := strings.Cut(item, "="); ok && addr != "" && name != "" {
			m[addr] = name
		}
	}
	return m
}
