package gen

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"

	"github.com/straitmesh/strait/internal/istioconfig"
	"github.com/straitmesh/strait/internal/mesh"
	"github.com/straitmesh/strait/internal/meshconfig"
	"github.com/straitmesh/strait/internal/proxypush"
)

// cache holds generated, marshalled resources so that what many proxies
// share is built once, and what a change did not touch is not rebuilt:
//
//   - per scope (proxies with the same namespace and Sidecar) and snapshot:
//     the outbound clusters, outbound listeners and route configurations;
//   - per service, across snapshots: its clusters and load assignments,
//     valid while the snapshot holds the same *Service and DestinationRule
//     (the registry keeps the pointer of an unchanged service).
//
// Each cached resource carries a Version, a hash of its bytes, so the
// server compares versions instead of re-hashing. Safe for concurrent use.
type cache struct {
	// mu guards the maps. Lookups, by far the most common (every proxy's
	// EDS push looks up each of its clusters), take it shared.
	mu sync.RWMutex
	// scopes holds one entry per scope key, for the latest snapshot seen.
	scopes map[string]*scopeEntry
	// clusters holds each service's outbound clusters, by hostname.
	clusters map[string]*serviceEntry
	// eds holds load assignments by cluster name, followed by "\x00" and
	// the proxy's locality view when a locality setting applies.
	eds map[string]*serviceEntry

	// builds counts resource builds, for tests.
	builds map[string]int
	// latest is the newest snapshot version seen; entries of services
	// missing from it are dropped when it changes.
	latest uint64
}

// serviceEntry is a cached result for one service.
type serviceEntry struct {
	svc  *mesh.Service
	dr   *istioconfig.Config
	mesh *meshconfig.Config
	res  []*discovery.Resource
	// mtls is the auto mTLS decision the clusters were built with
	// (autoMTLSKey), or, for a load assignment, which endpoints take mTLS
	// (endpointMTLSKey): endpoints and PeerAuthentications change it.
	mtls string
	// ready, when set, is closed once res (or err) is filled in: proxies
	// asking for the same entry while it is built wait for that build
	// instead of building it again.
	ready chan struct{}
	err   error
}

// scopeEntry is the shared part of one scope's resources in one snapshot.
type scopeEntry struct {
	snap  *mesh.Snapshot
	scope *mesh.Scope
	once  sync.Once
	err   error

	clusters  []*discovery.Resource // outbound and special clusters, by name
	listeners []*discovery.Resource // virtualOutbound and hand-off listeners
	// byLabels are hand-off listeners whose tcp/tls routes match on
	// sourceLabels: each proxy gets its own (Generate replaces them).
	byLabels []labelListener
	routes   []*discovery.Resource // every route configuration, by name
	edsNames []string              // the EDS clusters among clusters

	// selectors are the match sourceLabels of the scope's VirtualServices:
	// routes is for proxies whose labels satisfy none of them; the others
	// get the routes of their variant (sourceVariant), built on first use.
	selectors  []map[string]string
	variantsMu sync.Mutex // guards variants
	variants   map[string][]*discovery.Resource
}

func newCache() *cache {
	return &cache{
		scopes:   map[string]*scopeEntry{},
		clusters: map[string]*serviceEntry{},
		eds:      map[string]*serviceEntry{},
		builds:   map[string]int{},
	}
}

// resource marshals m into a Resource with a content Version.
func resource(name string, m proto.Message) (*discovery.Resource, error) {
	a, err := marshalAny(m)
	if err != nil {
		return nil, fmt.Errorf("marshal %s: %w", name, err)
	}
	sum := sha256.Sum256(a.GetValue())
	return &discovery.Resource{Name: name, Version: hex.EncodeToString(sum[:12]), Resource: a}, nil
}

// scope returns the shared resources of scope in snap, building them once.
func (c *cache) scope(snap *mesh.Snapshot, scope *mesh.Scope) (*scopeEntry, error) {
	c.mu.Lock()
	e := c.scopes[scope.Key]
	if e == nil || e.snap != snap {
		if e != nil && e.snap.Version > snap.Version {
			// A generation still running on an older snapshot: build its
			// entry without caching it.
			c.mu.Unlock()
			e = &scopeEntry{snap: snap, scope: scope}
			e.once.Do(func() { e.err = c.buildScope(e) })
			return e, e.err
		}
		e = &scopeEntry{snap: snap, scope: scope}
		c.scopes[scope.Key] = e
		if snap.Version > c.latest {
			c.latest = snap.Version
			c.prune(snap)
		}
	}
	c.mu.Unlock()
	e.once.Do(func() { e.err = c.buildScope(e) })
	return e, e.err
}

func (c *cache) count(what string) {
	c.mu.Lock()
	c.builds[what]++
	c.mu.Unlock()
}

// Builds returns how many resources of each kind were built ("cluster",
// "eds", "listener", "route").
func (c *cache) Builds() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.builds))
	for k, v := range c.builds {
		out[k] = v
	}
	return out
}

func (c *cache) buildScope(e *scopeEntry) error {
	snap, scope := e.snap, e.scope
	for _, svc := range scope.Services {
		res, err := c.serviceClusters(snap, scope.Namespace, svc)
		if err != nil {
			return err
		}
		e.clusters = append(e.clusters, res...)
		if UsesEDS(svc) {
			for _, r := range res {
				e.edsNames = append(e.edsNames, r.Name)
			}
		}
	}
	for _, cl := range append(specialClusters(snap), tracingClusters(snap)...) { // tracing.go
		r, err := resource(cl.Name, cl)
		if err != nil {
			return err
		}
		e.clusters = append(e.clusters, r)
	}
	slices.SortFunc(e.clusters, func(a, b *discovery.Resource) int { return strings.Compare(a.Name, b.Name) })
	e.clusters = slices.CompactFunc(e.clusters, func(a, b *discovery.Resource) bool { return a.Name == b.Name })
	e.edsNames = sortedUnique(e.edsNames)
	ls, byLabels := outboundListeners(snap, scope, nil, false)
	e.byLabels = byLabels
	tp := telemetryFor(snap, scope)                                                                     // telemetryapi.go
	for _, l := range withTracing(snap, tp, withTelemetry(tp, withAccessLogs(snap, tp, ls...)...)...) { // accesslog.go, telemetry.go, tracing.go
		c.count("listener")
		r, err := resource(l.Name, l)
		if err != nil {
			return err
		}
		e.listeners = append(e.listeners, r)
	}
	e.selectors = sourceSelectors(snap, scope)
	routes, err := c.buildRoutes(snap, scope, routeSource{namespace: scope.Namespace})
	if err != nil {
		return err
	}
	e.routes = routes
	return nil
}

func (c *cache) buildRoutes(snap *mesh.Snapshot, scope *mesh.Scope, src routeSource) ([]*discovery.Resource, error) {
	var out []*discovery.Resource
	for _, rc := range scopeRoutes(snap, scope, nil, src) {
		c.count("route")
		r, err := resource(rc.Name, rc)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// routesFor returns the route configurations of a proxy with these labels:
// the scope's shared ones, unless the labels satisfy a match's
// sourceLabels, then those of the proxy's variant, built once per variant.
func (c *cache) routesFor(e *scopeEntry, labels map[string]string) ([]*discovery.Resource, error) {
	variant := sourceVariant(e.selectors, labels)
	if variant == "" {
		return e.routes, nil
	}
	e.variantsMu.Lock()
	defer e.variantsMu.Unlock()
	if r, ok := e.variants[variant]; ok {
		return r, nil
	}
	r, err := c.buildRoutes(e.snap, e.scope, routeSource{namespace: e.scope.Namespace, labels: labels})
	if err != nil {
		return nil, err
	}
	if e.variants == nil {
		e.variants = map[string][]*discovery.Resource{}
	}
	e.variants[variant] = r
	return r, nil
}

// serviceClusters returns svc's outbound clusters for proxies of namespace
// ns, from the cache when neither the service (but for the endpoints of an
// EDS service), its DestinationRule for ns nor the mesh config changed.
func (c *cache) serviceClusters(snap *mesh.Snapshot, ns string, svc *mesh.Service) ([]*discovery.Resource, error) {
	// Clusters do not depend on the addresses: a DNS-capture scope's view
	// of a service shares the clusters of the service itself.
	svc = snap.Unviewed(svc)
	dr := snap.DestinationRuleFor(ns, svc.Hostname)
	c.mu.RLock()
	e := c.clusters[svc.Hostname]
	c.mu.RUnlock()
	mtls := autoMTLSKey(snap, ns, svc)
	if e != nil && e.dr == dr && e.mesh == snap.Mesh && e.mtls == mtls && (e.svc == svc || (UsesEDS(svc) && mesh.SameExceptEndpoints(e.svc, svc))) {
		return e.res, nil
	}
	var res []*discovery.Resource
	for _, cl := range serviceClusters(snap, ns, svc) {
		c.count("cluster")
		r, err := resource(cl.Name, cl)
		if err != nil {
			return nil, err
		}
		res = append(res, r)
	}
	c.mu.Lock()
	c.clusters[svc.Hostname] = &serviceEntry{svc: svc, dr: dr, mesh: snap.Mesh, mtls: mtls, res: res}
	c.mu.Unlock()
	return res, nil
}

// loadAssignment returns the EDS resource of one cluster, from the cache
// when neither its service nor the service's DestinationRule changed; nil
// when the cluster is unknown or out of scope.
func (c *cache) loadAssignment(snap *mesh.Snapshot, scope *mesh.Scope, proxy *proxypush.Proxy, name string) (*discovery.Resource, error) {
	svc, port, selector, ok := edsTarget(snap, scope, name)
	if !ok {
		return nil, nil
	}
	dr := snap.DestinationRuleFor(scope.Namespace, svc.Hostname)
	_, subset, _, _ := ParseOutboundClusterName(name)
	lv, view := newLocalityView(snap, scope.Namespace, proxy, svc.Hostname, subset, port) // locality.go
	// Proxies in other localities (or, with failoverPriority, with other
	// labels) get other priorities: one entry per view.
	key := name
	if lv != nil {
		key = name + "\x00" + view
	}
	// built waits for a cached (or in-progress) build of the same inputs.
	built := func(e *serviceEntry) (*discovery.Resource, error) {
		<-e.ready
		if e.err != nil {
			return nil, e.err
		}
		return e.res[0], nil
	}
	// A PeerAuthentication changes which endpoints EDS marks for mTLS
	// without changing the service.
	mtls := endpointMTLSKey(snap, svc, port)
	c.mu.RLock()
	e := c.eds[key]
	c.mu.RUnlock()
	if e != nil && e.svc == svc && e.dr == dr && e.mesh == snap.Mesh && e.mtls == mtls {
		return built(e)
	}
	c.mu.Lock()
	if e = c.eds[key]; e != nil && e.svc == svc && e.dr == dr && e.mesh == snap.Mesh && e.mtls == mtls {
		// Another proxy started this build meanwhile.
		c.mu.Unlock()
		return built(e)
	}
	e = &serviceEntry{svc: svc, dr: dr, mesh: snap.Mesh, mtls: mtls, ready: make(chan struct{})}
	c.eds[key] = e
	c.mu.Unlock()

	c.count("eds")
	r, err := resource(name, loadAssignment(snap, name, svc, port, selector, lv))
	e.res, e.err = []*discovery.Resource{r}, err
	close(e.ready)
	if err != nil {
		c.mu.Lock()
		if c.eds[key] == e {
			delete(c.eds, key) // the next request tries again
		}
		c.mu.Unlock()
		return nil, err
	}
	return r, nil
}

// prune drops the cached resources of services that snap no longer has.
// c.mu must be held.
func (c *cache) prune(snap *mesh.Snapshot) {
	for host := range c.clusters {
		if snap.Service(host) == nil {
			delete(c.clusters, host)
		}
	}
	for key := range c.eds {
		name, _, _ := strings.Cut(key, "\x00")
		if _, _, host, ok := ParseOutboundClusterName(name); !ok || snap.Service(host) == nil {
			delete(c.eds, key)
		}
	}
	for key, e := range c.scopes {
		if e.snap.Version < snap.Version && e.snap != snap {
			delete(c.scopes, key)
		}
	}
}
