package listener

import (
	"fmt"
	"net"
	"sort"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
)

// Listener warming, as Envoy's listener manager does it
// (source/common/listener_manager/listener_manager_impl.cc,
// addOrUpdateListenerInternal and onListenerWarmed): a listener version
// that LDS adds or changes is warming until the route configurations its
// HTTP connection managers name over RDS are there. Meanwhile a new
// listener is not bound (a client's connect is refused) and the version it
// replaces keeps serving on its socket; once warm, it takes the old one's
// place (the old version drains, or only its dropped filter chains do:
// adoptChains) or starts listening. The clusters the filters name need no
// wait here: the proxy asks for listeners only once its first clusters are
// warm (the proxy's start-up, startup.check), and a changed cluster's old version serves
// while the new one warms (cluster.Manager's warming).
//
// Each RDS subscription has the initial_fetch_timeout of its config
// source (Envoy's default 15 s; 0: none). When it passes without the route
// configuration, or a response carrying it is rejected, the subscription
// counts as ready
// (RdsRouteConfigSubscription::onConfigUpdateFailed in
// source/common/rds/rds_route_config_subscription.cc) and the listener goes
// on without it: its HCM answers 404 NR until the routes arrive.
//
// Unlike Envoy, the listeners of the first LDS response warm the same way
// (Envoy adds them active at once but accepts nothing before its init
// manager, which waits for their RDS, is done): either way no connection
// is served before the routes are there. With Options.Held (holdLocked) a
// warm listener then still waits, bound, for StartListening.

// routeDeps returns the RDS route configurations the listener's HTTP
// connection managers name, each with its initial fetch timeout (the first
// chain's when several name it).
func (l *Listener) routeDeps() map[string]time.Duration {
	var out map[string]time.Duration
	for _, c := range append(append([]*filterChain(nil), l.chains...), l.defaultChain) {
		if c == nil || c.http == nil || c.http.RDSName == "" {
			continue
		}
		if out == nil {
			out = map[string]time.Duration{}
		}
		if _, ok := out[c.http.RDSName]; !ok {
			out[c.http.RDSName] = c.rdsFetchTimeout
		}
	}
	return out
}

// routeFetch is the wait for one route configuration that a warming
// listener needs. Guarded by Manager.mu.
type routeFetch struct {
	timer *time.Timer // nil: no initial fetch timeout
	// failed: the initial fetch timed out or its response was rejected;
	// the listeners stop waiting for it.
	failed bool
}

// routesReadyLocked reports whether l may leave warming: each route
// configuration it names is there or its initial fetch timed out.
func (m *Manager) routesReadyLocked(l *Listener) bool {
	for name := range l.routeDeps() {
		if m.opts.Routes != nil && m.opts.Routes.Get(name) != nil {
			continue
		}
		if f := m.fetches[name]; f != nil && f.failed {
			continue
		}
		return false
	}
	return true
}

// trackFetchesLocked starts the initial fetch timer of every missing route
// configuration a warming listener needs, and forgets the ones no warming
// listener needs any more.
func (m *Manager) trackFetchesLocked() {
	needed := map[string]bool{}
	for _, l := range m.warming {
		for name, timeout := range l.routeDeps() {
			needed[name] = true
			if m.fetches[name] != nil {
				continue
			}
			f := &routeFetch{}
			m.fetches[name] = f
			if timeout > 0 {
				f.timer = time.AfterFunc(timeout, func() { m.fetchTimedOut(name, f, timeout) })
			}
		}
	}
	for name, f := range m.fetches {
		if !needed[name] {
			if f.timer != nil {
				f.timer.Stop()
			}
			delete(m.fetches, name)
		}
	}
}

// fetchTimedOut runs when the initial fetch timeout of a route
// configuration passes: the listeners waiting only for it leave warming.
func (m *Manager) fetchTimedOut(name string, f *routeFetch, timeout time.Duration) {
	m.mu.Lock()
	if m.closed || m.fetches[name] != f {
		m.mu.Unlock()
		return
	}
	if m.opts.Routes == nil || m.opts.Routes.Get(name) == nil {
		m.log.Warn("route configuration not received within its initial fetch timeout; its listeners start without it (404 NR until it comes)",
			"route_config", name, "initial_fetch_timeout", timeout)
	}
	f.failed = true
	warmed := m.promoteLocked()
	m.mu.Unlock()
	if warmed {
		m.notifyWarmed()
	}
}

// RoutesUpdated tells the manager that route configurations arrived: the
// warming listeners that now have all of theirs take the place of the
// versions they replace (which drain) or start listening.
func (m *Manager) RoutesUpdated() {
	m.mu.Lock()
	warmed := m.promoteLocked()
	m.mu.Unlock()
	if warmed {
		m.notifyWarmed()
	}
}

// RoutesRejected tells the manager that an RDS response carrying the
// named route configurations was rejected (NACKed): listeners waiting for
// one of them stop waiting for it and start without it, as Envoy's RDS
// subscription counts a failed update as its initial fetch being done
// (RdsRouteConfigSubscription::onConfigUpdateFailed).
func (m *Manager) RoutesRejected(names []string) {
	m.mu.Lock()
	for _, name := range names {
		f := m.fetches[name]
		if f == nil || f.failed {
			continue
		}
		if f.timer != nil {
			f.timer.Stop()
		}
		f.failed = true
		m.log.Warn("route configuration rejected while listeners wait for it; they start without it (404 NR until a good one comes)", "route_config", name)
	}
	warmed := m.promoteLocked()
	m.mu.Unlock()
	if warmed {
		m.notifyWarmed()
	}
}

// OnWarmed registers f, called (without the manager's lock) after
// listeners left warming. Call it before the first LDS update.
func (m *Manager) OnWarmed(f func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.onWarmed = f
}

func (m *Manager) notifyWarmed() {
	m.mu.Lock()
	f := m.onWarmed
	m.mu.Unlock()
	if f != nil {
		f()
	}
}

// promoteLocked activates every warming listener whose routes are ready,
// one at a time so that one that cannot bind does not hold back the
// others, and reports whether any left warming. A listener that fails to
// bind is dropped (Envoy's listener_create_failure); the version it was to
// replace keeps serving.
func (m *Manager) promoteLocked() bool {
	if m.closed {
		return false
	}
	names := make([]string, 0, len(m.warming))
	for name, l := range m.warming {
		if m.routesReadyLocked(l) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		w := m.warming[name]
		delete(m.warming, name)
		cur := m.active.Load()
		next := copySet(cur)
		if old := cur.byName[name]; old != nil && next.byAddr[old.Addr] == old {
			delete(next.byAddr, old.Addr) // the new version may have another address
		}
		if err := m.applyLocked(cur, next, []*Listener{w}, nil); err != nil {
			m.createFailure.Add(1)
			m.log.Error("warmed listener could not start; dropped", "listener", name, "error", err)
			continue
		}
		m.log.Info("listener warmed", "listener", name, "version", w.version)
	}
	m.releaseReservationsLocked()
	m.trackFetchesLocked()
	m.updateGaugesLocked()
	return len(names) > 0
}

// updateGaugesLocked sets Envoy's listener manager gauges.
func (m *Manager) updateGaugesLocked() {
	m.warmingGauge.Store(int64(len(m.warming)))
	m.activeGauge.Store(int64(len(m.active.Load().byName)))
}

// Warming returns how many listener versions are warming.
func (m *Manager) Warming() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.warming)
}

// ListenerState is one version of a listener: its config and the LDS
// version_info that carried it.
type ListenerState struct {
	Version string
	Config  *listenerv3.Listener
}

// DynamicListener is an LDS listener as Envoy's config dump shows it: the
// version serving (Active), the one waiting for its routes (Warming) and
// the latest one an update replaced or removed that is still draining
// (Draining, addDrainingLocked); any may be nil.
type DynamicListener struct {
	Name                      string
	Active, Warming, Draining *ListenerState
}

// Dynamic returns the LDS listeners, active, warming and draining, sorted
// by name.
func (m *Manager) Dynamic() []DynamicListener {
	m.mu.Lock()
	defer m.mu.Unlock()
	by := map[string]*DynamicListener{}
	get := func(name string) *DynamicListener {
		d := by[name]
		if d == nil {
			d = &DynamicListener{Name: name}
			by[name] = d
		}
		return d
	}
	for name, l := range m.active.Load().byName {
		if !m.static[name] {
			get(name).Active = &ListenerState{Version: l.version, Config: l.Config}
		}
	}
	for name, l := range m.warming {
		get(name).Warming = &ListenerState{Version: l.version, Config: l.Config}
	}
	for _, d := range m.draining { // oldest first: the latest version wins
		get(d.l.Name).Draining = &ListenerState{Version: d.l.version, Config: d.l.Config}
	}
	out := make([]DynamicListener, 0, len(by))
	for _, d := range by {
		out = append(out, *d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// reserveLocked binds a socket, without listening, for each warming
// listener that will need one of its own once warm (not for an update that
// keeps its address: the old version's socket carries on), so that an
// address in use refuses the LDS update now, as in Envoy. A reservation
// the previous warming version of the same address made is kept. It
// returns the new reservations; on error it made none.
func (m *Manager) reserveLocked(cur *set, warm map[string]*Listener) (map[string]*reservation, error) {
	fresh := map[string]*reservation{}
	fail := func(err error) (map[string]*reservation, error) {
		for _, r := range fresh {
			r.close()
		}
		return nil, err
	}
	names := make([]string, 0, len(warm))
	for name := range warm {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		w := warm[name]
		if _, stop := m.drained.covers(w); !w.Bind || stop {
			continue
		}
		if old := cur.byName[name]; old != nil && old.Bind && old.Addr == w.Addr && m.sockets[name] != nil {
			continue
		}
		if r := m.reserved[name]; r != nil && r.addr == w.Addr && r.transparent == w.Transparent {
			continue
		}
		r, err := reserve(w.Addr, w.Transparent)
		if err != nil {
			return fail(fmt.Errorf("listener %q: bind %s: %w", name, w.Addr, err))
		}
		if r != nil {
			fresh[name] = r
		}
	}
	return fresh, nil
}

// listenLocked listens for b: on the socket reserved while it warmed when
// there is one for its address, else on a new one.
func (m *Manager) listenLocked(b *Listener, lc *net.ListenConfig, network string) (net.Listener, error) {
	if r := m.reserved[b.Name]; r != nil {
		delete(m.reserved, b.Name)
		if r.addr == b.Addr && r.transparent == b.Transparent {
			return r.listen()
		}
		r.close()
	}
	return lc.Listen(m.ctx, network, b.Addr.String())
}

// releaseReservationsLocked closes the reservations of listeners that no
// longer warm.
func (m *Manager) releaseReservationsLocked() {
	for name, r := range m.reserved {
		if m.warming[name] == nil {
			r.close()
			delete(m.reserved, name)
		}
	}
}
