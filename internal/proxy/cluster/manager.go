package cluster

import (
	"bytes"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"

	"github.com/straitmesh/strait/internal/proxy/cluster/idlewatch"
	"github.com/straitmesh/strait/internal/proxy/pgv"
	"github.com/straitmesh/strait/internal/proxy/stats"
	"github.com/straitmesh/strait/internal/proxy/tlsconf"
)

// idleCloseDelay is how long a replaced cluster keeps its idle upstream
// connections before they are closed (requests in flight are unaffected).
const idleCloseDelay = 5 * time.Second

// Manager holds the active clusters. Get is lock-free (hot path); every
// update is serialized by mu and publishes a new immutable map.
type Manager struct {
	// Set at creation, read-only.
	log     *slog.Logger
	stats   *stats.Store
	secrets *tlsconf.Provider // SetSecrets, before any cluster
	// exchangeFrame is SetExchangeFrame's, before any cluster.
	exchangeFrame []byte
	// watch watches the idle HTTP/1.1 connections of every cluster
	// (package idlewatch).
	watch *idlewatch.Watch

	active atomic.Pointer[map[string]*Cluster]

	mu     sync.Mutex // guards everything below
	static map[string]bool
	// warming are the EDS clusters waiting for their first
	// ClusterLoadAssignment and the DNS clusters waiting for their first
	// resolution.
	warming map[string]*Cluster
	// cla are the ClusterLoadAssignments applied, by name, in their
	// deterministic wire form (configwire.go).
	cla        map[string][]byte
	cdsVersion string
	edsVersion string
	onWarmed   func() // called, without mu, when a cluster leaves warming on its own
	// fetchTimers end the warming of EDS clusters whose endpoints do not
	// come within their initial fetch timeout (startFetchTimerLocked).
	fetchTimers map[*Cluster]*time.Timer
}

// NewManager returns an empty cluster manager.
func NewManager(log *slog.Logger, st *stats.Store) *Manager {
	m := &Manager{
		log:     log.With("component", "cluster-manager"),
		stats:   st,
		static:  map[string]bool{},
		warming: map[string]*Cluster{},
		cla:     map[string][]byte{},

		fetchTimers: map[*Cluster]*time.Timer{},
		watch:       idlewatch.New(log),
	}
	empty := map[string]*Cluster{}
	m.active.Store(&empty)
	return m
}

// Get returns the active cluster with the given name, or nil.
func (m *Manager) Get(name string) *Cluster { return (*m.active.Load())[name] }

// AddStatic adds the bootstrap's static clusters. They are never removed by CDS.
func (m *Manager) AddStatic(cs []*clusterv3.Cluster) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	next := m.copyActive()
	for _, c := range cs {
		if err := pgv.ValidateAll(c); err != nil {
			return fmt.Errorf("static cluster %q: %w", c.GetName(), err)
		}
		wire, err := configWire(c)
		if err != nil {
			return fmt.Errorf("static cluster %q: %w", c.GetName(), err)
		}
		b, err := m.build(c, wire)
		if err != nil {
			return err
		}
		if b.Kind == KindEDS {
			return fmt.Errorf("static cluster %q: type EDS is not supported in static_resources", c.GetName())
		}
		next[c.GetName()] = b
		m.static[c.GetName()] = true
		if b.dns != nil {
			b.dns.start(b, m.log, func() {})
		}
	}
	m.active.Store(&next)
	for _, c := range cs {
		next[c.GetName()].activate()
	}
	return nil
}

func (m *Manager) copyActive() map[string]*Cluster {
	cur := *m.active.Load()
	next := make(map[string]*Cluster, len(cur)+1)
	for k, v := range cur {
		next[k] = v
	}
	return next
}

// ApplyCDS applies a state-of-the-world CDS response. On error nothing
// changes. It returns the EDS service names that must be subscribed.
func (m *Manager) ApplyCDS(version string, cs []*clusterv3.Cluster) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	built := make(map[string]*Cluster, len(cs))
	for _, c := range cs {
		name := c.GetName()
		if m.static[name] {
			return nil, fmt.Errorf("cluster %q: name clashes with a static cluster", name)
		}
		if _, dup := built[name]; dup {
			return nil, fmt.Errorf("cluster %q: duplicate name in response", name)
		}
		wire, err := configWire(c)
		if err != nil {
			return nil, fmt.Errorf("cluster %q: %w", name, err)
		}
		if cur := m.Get(name); cur != nil && bytes.Equal(cur.config, wire) {
			built[name] = cur
			continue
		}
		if w := m.warming[name]; w != nil && bytes.Equal(w.config, wire) {
			built[name] = w
			continue
		}
		b, err := m.build(c, wire)
		if err != nil {
			return nil, err
		}
		built[name] = b
	}

	cur := *m.active.Load()
	next := make(map[string]*Cluster, len(built)+len(m.static))
	for name := range m.static {
		next[name] = cur[name]
	}
	warming := map[string]*Cluster{}
	var retired []*Cluster
	for name, b := range built {
		old := cur[name]
		if old == b {
			next[name] = b
			continue
		}
		if b.Kind == KindEDS && !b.hasEndpoints() {
			if cla, ok := m.cla[b.EDSName]; ok {
				eps, err := endpointsFrom(decodeAssignment(cla))
				if err != nil {
					return nil, fmt.Errorf("cluster %q: endpoints %q: %w", name, b.EDSName, err)
				}
				b.setEndpointList(eps)
			}
		}
		if (b.Kind == KindEDS && !b.hasEndpoints()) || (b.dns != nil && !b.dnsReady.Load()) {
			// Warming: the previous version (if any) keeps serving.
			warming[name] = b
			m.startFetchTimerLocked(name, b)
			if b.dns != nil {
				b.dns.start(b, m.log, func() { m.dnsResolved(name, b) })
			}
			if old != nil {
				next[name] = old
			}
			continue
		}
		next[name] = b
		if old != nil {
			retired = append(retired, old)
		}
	}
	for name, old := range cur {
		if _, keep := next[name]; !keep {
			retired = append(retired, old)
		}
	}
	for name, w := range m.warming {
		if warming[name] != w && next[name] != w {
			w.stopDiscovery() // dropped while warming
		}
	}
	m.warming = warming
	m.stopFetchTimersLocked()
	m.active.Store(&next)
	for name, b := range built {
		if next[name] == b {
			b.activate()
		}
	}
	m.cdsVersion = version
	m.retire(retired)
	m.stats.Gauge("cluster_manager.warming_clusters").Store(int64(len(warming)))
	m.stats.Gauge("cluster_manager.active_clusters").Store(int64(len(next)))
	return m.edsNamesLocked(), nil
}

func (m *Manager) retire(cs []*Cluster) {
	for _, c := range cs {
		c.stopDiscovery()
		time.AfterFunc(idleCloseDelay, c.close)
	}
}

func (m *Manager) edsNamesLocked() []string {
	set := map[string]bool{}
	for _, c := range *m.active.Load() {
		if c.Kind == KindEDS {
			set[c.EDSName] = true
		}
	}
	for _, c := range m.warming {
		if c.Kind == KindEDS {
			set[c.EDSName] = true
		}
	}
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ApplyEDS applies ClusterLoadAssignments. Assignments not in the response
// are kept (EDS responses name only the resources that changed or were
// asked for).
func (m *Manager) ApplyEDS(version string, clas []*endpointv3.ClusterLoadAssignment) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	parsed := map[string]endpointList{}
	wires := make([][]byte, len(clas))
	for i, cla := range clas {
		eps, err := endpointsFrom(cla)
		if err != nil {
			return fmt.Errorf("cluster_load_assignment %q: %w", cla.GetClusterName(), err)
		}
		parsed[cla.GetClusterName()] = eps
		if wires[i], err = configWire(cla); err != nil {
			return fmt.Errorf("cluster_load_assignment %q: %w", cla.GetClusterName(), err)
		}
	}
	next := m.copyActive()
	changed := false
	for i, cla := range clas {
		name := cla.GetClusterName()
		if old, ok := m.cla[name]; ok && bytes.Equal(old, wires[i]) {
			continue
		}
		m.cla[name] = wires[i]
		for _, c := range next {
			if c.Kind == KindEDS && c.EDSName == name {
				c.setEndpointList(parsed[name])
			}
		}
	}
	for cname, w := range m.warming {
		eps, ok := parsed[w.EDSName]
		if !ok || w.Kind != KindEDS {
			continue
		}
		w.setEndpointList(eps)
		if old := next[cname]; old != nil {
			m.retire([]*Cluster{old})
		}
		next[cname] = w
		w.activate()
		delete(m.warming, cname)
		changed = true
	}
	m.stopFetchTimersLocked()
	if changed {
		m.active.Store(&next)
		m.stats.Gauge("cluster_manager.active_clusters").Store(int64(len(next)))
	}
	m.edsVersion = version
	m.stats.Gauge("cluster_manager.warming_clusters").Store(int64(len(m.warming)))
	return nil
}

// dnsResolved is called once a DNS cluster's first resolution is done: a
// cluster still warming becomes active, replacing the previous version.
func (m *Manager) dnsResolved(name string, c *Cluster) {
	c.dnsReady.Store(true)
	m.mu.Lock()
	hook := m.onWarmed
	defer func() {
		m.mu.Unlock()
		if hook != nil {
			hook()
		}
	}()
	if m.warming[name] != c {
		hook = nil
		return // replaced or removed meanwhile
	}
	delete(m.warming, name)
	next := m.copyActive()
	if old := next[name]; old != nil {
		m.retire([]*Cluster{old})
	}
	next[name] = c
	m.active.Store(&next)
	c.activate()
	m.stats.Gauge("cluster_manager.warming_clusters").Store(int64(len(m.warming)))
	m.stats.Gauge("cluster_manager.active_clusters").Store(int64(len(next)))
}

// OnWarmed sets a function called whenever a cluster leaves warming on its
// own (a DNS cluster's first resolution), so that readiness can be
// checked again. It must not call back into the manager's updates.
func (m *Manager) OnWarmed(f func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.onWarmed = f
}

// Close stops every cluster's DNS resolution and waits for it, and stops
// watching idle connections. The manager must not be used afterwards.
func (m *Manager) Close() {
	m.mu.Lock()
	var cs []*Cluster
	for _, c := range *m.active.Load() {
		cs = append(cs, c)
	}
	for _, c := range m.warming {
		cs = append(cs, c)
	}
	m.warming = map[string]*Cluster{}
	m.stopFetchTimersLocked()
	m.mu.Unlock()
	for _, c := range cs {
		if c.dns != nil {
			c.dns.cancel()
			c.dns.wait()
		}
	}
	m.watch.Close()
}

// Warming returns the number of clusters waiting for endpoints.
func (m *Manager) Warming() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.warming)
}

// EachConfig calls f with the name and the deterministic wire form
// (configwire.go) of each cluster a Snapshot lists: static, active and
// warming. f must not call back into the manager.
func (m *Manager) EachConfig(f func(name string, wire []byte)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for name, c := range *m.active.Load() {
		f(name, c.config)
	}
	for name, c := range m.warming {
		f(name, c.config)
	}
}

// Snapshot is a consistent copy of the manager's state for /config_dump.
type Snapshot struct {
	CDSVersion, EDSVersion string
	Static                 []*clusterv3.Cluster
	Dynamic                []*clusterv3.Cluster
	Warming                []*clusterv3.Cluster
	Endpoints              []*endpointv3.ClusterLoadAssignment
}

// Snapshot returns the current state, decoded afresh from what the
// manager keeps (configwire.go): the caller owns the messages.
func (m *Manager) Snapshot() Snapshot {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := Snapshot{CDSVersion: m.cdsVersion, EDSVersion: m.edsVersion}
	for name, c := range *m.active.Load() {
		if m.static[name] {
			s.Static = append(s.Static, decodeCluster(c.config))
		} else {
			s.Dynamic = append(s.Dynamic, decodeCluster(c.config))
		}
	}
	for _, c := range m.warming {
		s.Warming = append(s.Warming, decodeCluster(c.config))
	}
	for _, cla := range m.cla {
		s.Endpoints = append(s.Endpoints, decodeAssignment(cla))
	}
	byName := func(cs []*clusterv3.Cluster) {
		sort.Slice(cs, func(i, j int) bool { return cs[i].GetName() < cs[j].GetName() })
	}
	byName(s.Static)
	byName(s.Dynamic)
	byName(s.Warming)
	sort.Slice(s.Endpoints, func(i, j int) bool { return s.Endpoints[i].GetClusterName() < s.Endpoints[j].GetClusterName() })
	return s
}
