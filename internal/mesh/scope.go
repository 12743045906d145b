package mesh

import (
	"maps"

	networking "istio.io/api/networking/v1alpha3"
	"reflect"
	"strings"

	"github.com/straitmesh/strait/internal/istioconfig"
	"github.com/straitmesh/strait/internal/protocol"
	"github.com/straitmesh/strait/internal/proxypush"
)

// DefaultRootNamespace is the root namespace when none is configured (the
// control plane's namespace, as in Istio, where meshConfig.rootNamespace
// defaults to istiod's namespace).
const DefaultRootNamespace = "istio-system"

// Scope is what one proxy may reach: the services visible from its
// namespace (exportTo) and selected by the Sidecar that applies to it
// (egress hosts), and the Telemetries that apply to it. Proxies with the
// same namespace, Sidecar and Telemetries share one Scope; Key says which.
type Scope struct {
	// Key identifies the scope: "NS" without a Sidecar, else
	// "NS|SIDECAR_NS/SIDECAR_NAME"; then "|tel:" and the Telemetries
	// that apply, when some do.
	Key       string
	Namespace string
	// Sidecar is the Sidecar that applies, or nil (everything visible).
	Sidecar *istioconfig.Config
	// Telemetry are the Telemetries that apply, in Istio's merge order
	// (Snapshot.TelemetriesFor); they are part of Key.
	Telemetry []*istioconfig.Config
	// Services are the services in scope, sorted like Snapshot.Services.
	Services []*Service
	// RegistryOnly is the outbound traffic policy REGISTRY_ONLY: the
	// Sidecar's outboundTrafficPolicy, else the mesh config's. Traffic to
	// destinations outside Services goes to BlackHoleCluster instead of
	// PassthroughCluster.
	RegistryOnly bool
	// Listeners are the Sidecar's egress listeners that name a port, in
	// the Sidecar's order.
	Listeners []*EgressListener
	// CatchAll are the services of the Sidecar's catch-all egress
	// listener (the one without a port): every service in scope without a
	// Sidecar or egress listeners, none when every listener names a port.
	// Their ports get the outbound listeners that Listeners do not claim.
	CatchAll []*Service

	egress []egressHost
}

// EgressListener is a Sidecar egress listener with a port: the services
// its hosts select are reachable on that port only through it (Istio's
// IstioEgressListenerWrapper).
type EgressListener struct {
	Port Port
	// Bind is the address to listen on; empty: the services' addresses
	// (captured) or 127.0.0.1 (CaptureNone).
	Bind string
	// CaptureNone is captureMode NONE: the proxy binds Bind:Port itself
	// and the application calls it there, instead of being captured.
	CaptureNone bool
	// Services are the services in scope that its hosts select.
	Services []*Service

	hosts []egressHost
}

// egressHost is one parsed "NAMESPACE/HOST" of a Sidecar.
type egressHost struct {
	namespace string // "*" for any, else a namespace ("." already resolved)
	host      string // "*", "*.suffix" or an exact host
}

// Includes reports whether a service of namespace svcNS and hostname host
// is in the scope's egress hosts. It does not check exportTo.
func (sc *Scope) Includes(host, svcNS string) bool {
	if sc.Sidecar == nil {
		return true
	}
	return hostsInclude(sc.egress, host, svcNS)
}

// hostsInclude reports whether egress hosts select the service host of
// namespace svcNS.
func hostsInclude(hosts []egressHost, host, svcNS string) bool {
	for _, e := range hosts {
		if e.namespace != "*" && e.namespace != svcNS {
			continue
		}
		if e.host == "*" || e.host == host || wildcardMatch(e.host, host) {
			return true
		}
	}
	return false
}

// DependsOn reports whether a proxy in this scope depends on the service
// named host: it is in scope now, or (for a service that no longer exists)
// its name matches the egress hosts in some namespace.
func (sc *Scope) DependsOn(snap *Snapshot, host string) bool {
	if svc := snap.Service(host); svc != nil {
		return svc.VisibleTo(sc.Namespace) && sc.Includes(svc.Hostname, svc.Namespace)
	}
	if sc.Sidecar == nil {
		return true
	}
	for _, e := range sc.egress {
		if e.host == "*" || e.host == host || wildcardMatch(e.host, host) {
			return true
		}
	}
	return false
}

// SidecarFor returns the Sidecar that applies to a workload in namespace ns
// with the given labels: one in ns whose workloadSelector matches, else the
// one in ns without selector, else the root namespace's one without
// selector; nil when none applies. Ties go to the first by name.
func (s *Snapshot) SidecarFor(ns string, labels map[string]string) *istioconfig.Config {
	var nsDefault, rootDefault *istioconfig.Config
	for _, c := range s.sidecars {
		sel := c.Sidecar().GetWorkloadSelector().GetLabels()
		switch {
		case c.Namespace == ns && len(sel) > 0:
			if len(labels) > 0 && labelsMatch(sel, labels) {
				return c
			}
		case c.Namespace == ns && nsDefault == nil:
			nsDefault = c
		case c.Namespace == s.RootNamespace && len(sel) == 0 && rootDefault == nil:
			rootDefault = c
		}
	}
	if nsDefault != nil {
		return nsDefault
	}
	return rootDefault
}

// ProxyScope returns the scope of a proxy. Its labels are those of the
// WorkloadEntry at its IP. The result is cached in the snapshot: every
// proxy with the same namespace and Sidecar gets the same *Scope.
func (s *Snapshot) ProxyScope(p *proxypush.Proxy) *Scope {
	var ns, ip string
	if p != nil {
		ns, ip = p.Namespace, p.IP
	}
	var labels map[string]string
	if w := s.WorkloadByIP(ip); w != nil {
		labels = w.Labels
	}
	sc := s.SidecarFor(ns, labels)
	key := ns
	if sc != nil {
		key = ns + "|" + sc.Namespace + "/" + sc.Name
	}
	// Proxies whose Telemetries differ get different listeners.
	tel := s.TelemetriesFor(ns, labels)
	key += telemetryKey(tel) // telemetry.go
	// DNS-capture proxies see the services' allocated addresses
	// (allocateAutoAddresses): a scope of their own.
	family := autoFamily(p)
	if family != "" {
		key += "|auto" + family
	}
	s.scopeMu.RLock()
	cached, ok := s.scopes[key]
	s.scopeMu.RUnlock()
	if ok {
		return cached
	}
	s.scopeMu.Lock()
	defer s.scopeMu.Unlock()
	if cached, ok := s.scopes[key]; ok {
		return cached // built by another caller meanwhile
	}
	scope := &Scope{Key: key, Namespace: ns, Sidecar: sc, Telemetry: tel, RegistryOnly: s.Mesh.RegistryOnly}
	if sc != nil {
		if p := sc.Sidecar().GetOutboundTrafficPolicy(); p != nil {
			// Present, the Sidecar's policy replaces the mesh's; its
			// mode's zero value is REGISTRY_ONLY, as in Istio.
			scope.RegistryOnly = p.GetMode() == networking.OutboundTrafficPolicy_REGISTRY_ONLY
		}
		egress := sc.Sidecar().GetEgress()
		if len(egress) == 0 {
			// A Sidecar without egress listeners reaches everything, as
			// Istio's ConvertToSidecarScope defaults it to "*/*".
			egress = []*networking.IstioEgressListener{{Hosts: []string{"*/*"}}}
		}
		var catchAll []egressHost
		hasCatchAll := false
		for _, eg := range egress {
			var hosts []egressHost
			for _, h := range eg.GetHosts() {
				hns, host, _ := strings.Cut(h, "/")
				// "." is the proxy's namespace: the Sidecar's own, or for
				// the root namespace's default Sidecar the namespace of each
				// proxy it applies to (Istio's ConvertToSidecarScope gets
				// the proxy's namespace as configNamespace).
				switch hns {
				case "~":
					continue
				case ".":
					hns = ns
				}
				hosts = append(hosts, egressHost{namespace: hns, host: s.ResolveHost(host, sc.Namespace)})
			}
			scope.egress = append(scope.egress, hosts...)
			if eg.GetPort() == nil {
				catchAll, hasCatchAll = hosts, true
				continue
			}
			proto, _ := protocol.Parse(eg.GetPort().GetProtocol()) // validated on load
			scope.Listeners = append(scope.Listeners, &EgressListener{
				Port:        Port{Name: eg.GetPort().GetName(), Number: eg.GetPort().GetNumber(), Protocol: proto},
				Bind:        eg.GetBind(),
				CaptureNone: eg.GetCaptureMode() == networking.CaptureMode_NONE,
				hosts:       hosts,
			})
		}
		for _, svc := range s.Services {
			if !svc.VisibleTo(ns) {
				continue
			}
			svc = svc.autoView(family)
			for _, l := range scope.Listeners {
				if hostsInclude(l.hosts, svc.Hostname, svc.Namespace) {
					l.Services = append(l.Services, svc)
				}
			}
			if hasCatchAll && hostsInclude(catchAll, svc.Hostname, svc.Namespace) {
				scope.CatchAll = append(scope.CatchAll, svc)
			}
		}
	}
	for _, svc := range s.Services {
		if svc.VisibleTo(ns) && scope.Includes(svc.Hostname, svc.Namespace) {
			scope.Services = append(scope.Services, svc.autoView(family))
		}
	}
	if sc == nil {
		scope.CatchAll = scope.Services
	}
	if s.scopes == nil {
		s.scopes = map[string]*Scope{}
	}
	s.scopes[key] = scope
	return scope
}

// ServiceChanges is what changed in the service model between two
// snapshots.
type ServiceChanges struct {
	// Hosts are the hostnames whose service was added, removed or changed.
	Hosts map[string]struct{}
	// EndpointsOnly is true when every changed service kept everything but
	// its endpoints (an EDS-only change).
	EndpointsOnly bool
	// Addresses are the endpoint addresses whose service instances changed:
	// the proxies at these IPs have a new inbound side.
	Addresses map[string]struct{}
}

// DiffServices compares the services of two snapshots (old may be nil).
// It relies on Build's structural sharing: an unchanged service is the
// same pointer in both.
func DiffServices(old, new *Snapshot) ServiceChanges {
	ch := ServiceChanges{Hosts: map[string]struct{}{}, EndpointsOnly: true, Addresses: map[string]struct{}{}}
	var oldByHost map[string]*Service
	if old != nil {
		oldByHost = old.servicesByHost
	}
	addAll := func(svc *Service) {
		for _, ep := range svc.Endpoints {
			ch.Addresses[ep.Address] = struct{}{}
		}
	}
	for h, n := range new.servicesByHost {
		o := oldByHost[h]
		if o == n {
			continue
		}
		ch.Hosts[h] = struct{}{}
		if o == nil || !SameExceptEndpoints(o, n) || n.ResolvesDNS() {
			ch.EndpointsOnly = false
			addAll(n)
			if o != nil {
				addAll(o)
			}
			continue
		}
		// Endpoints only: the addresses whose entry differs.
		before := map[string]*Endpoint{}
		for _, ep := range o.Endpoints {
			before[ep.Address] = ep
		}
		for _, ep := range n.Endpoints {
			if b, ok := before[ep.Address]; !ok || !maps.Equal(b.Ports, ep.Ports) {
				ch.Addresses[ep.Address] = struct{}{}
			}
			delete(before, ep.Address)
		}
		for a := range before {
			ch.Addresses[a] = struct{}{}
		}
	}
	for h, o := range oldByHost {
		if _, ok := new.servicesByHost[h]; !ok {
			ch.Hosts[h] = struct{}{}
			ch.EndpointsOnly = false
			addAll(o)
		}
	}
	return ch
}

// SameExceptEndpoints reports whether two services differ at most in
// their endpoints.
func SameExceptEndpoints(a, b *Service) bool {
	ac, bc := *a, *b
	ac.Endpoints, bc.Endpoints = nil, nil
	// The views differ from the services only in their addresses.
	ac.auto4, ac.auto6, bc.auto4, bc.auto6 = nil, nil, nil, nil
	return reflect.DeepEqual(ac, bc)
}

// reuseUnchanged replaces every service equal to the previous snapshot's
// service of the same host by that previous pointer, so that caches keyed
// by *Service survive unrelated changes and DiffServices is cheap.
func (s *Snapshot) reuseUnchanged(prev *Snapshot) {
	if prev == nil {
		return
	}
	for i, svc := range s.Services {
		p := prev.servicesByHost[svc.Hostname]
		if p == svc {
			continue // reused by Build already
		}
		if p == nil || p.Namespace != svc.Namespace || !reflect.DeepEqual(p, svc) {
			continue
		}
		s.Services[i] = p
		if s.servicesByHost[svc.Hostname] == svc {
			s.servicesByHost[svc.Hostname] = p
		}
	}
}
