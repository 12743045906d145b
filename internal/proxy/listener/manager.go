package listener

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/proto"

	"github.com/straitmesh/strait/internal/origdst"
	"github.com/straitmesh/strait/internal/proxy/accesslog"
	"github.com/straitmesh/strait/internal/proxy/hcm"
	"github.com/straitmesh/strait/internal/proxy/pgv"
	"github.com/straitmesh/strait/internal/proxy/stats"
	"github.com/straitmesh/strait/internal/proxy/tcpproxy"
	"github.com/straitmesh/strait/internal/proxy/tlsconf"
	"github.com/straitmesh/strait/internal/proxy/tracing"
	"github.com/straitmesh/strait/internal/transparent"
)

// OriginalDstFunc returns a connection's pre-redirect destination.
type OriginalDstFunc func(net.Conn) (netip.AddrPort, error)

// Options configure a Manager.
type Options struct {
	Logger   *slog.Logger
	Stats    *stats.Store
	Routes   hcm.Routes
	Clusters tcpproxy.Clusters
	HTTP     *hcm.Server
	// Workers is the number of accept goroutines per bound socket (>= 1).
	Workers int
	// DrainTime is how long the connections of a listener version that
	// LDS replaced or removed (or of a filter chain an in-place update
	// dropped) go on before the ones left are closed (--drain-time-s); 0
	// means Envoy's default, 600 s.
	DrainTime time.Duration
	// OriginalDst reads SO_ORIGINAL_DST; tests inject their own. Defaults
	// to origdst.Get.
	OriginalDst OriginalDstFunc
	// Secrets serves SDS secrets to TLS transport sockets.
	Secrets *tlsconf.Provider
	// AccessLogs are the files of the filters' access logs.
	AccessLogs *accesslog.Files
	// Local is the proxy's own workload for Istio's network filters
	// (NewLocal from the bootstrap node).
	Local Local
	// Tracing are the proxy's span reporters, for HCMs with tracing.
	Tracing *tracing.Reporters
	// Held: listeners bind their sockets but do not listen until
	// StartListening, as Envoy's workers start only once the
	// server has initialized.
	Held bool
}

// socket is a bound listening socket. It outlives listener versions with
// the same address: an update swaps current, and new connections get it.
// While the manager is held (holdLocked) it is bound but not listening: held
// is set and ln is nil. ln and held are guarded by Manager.mu; the accept
// loops, started once ln is set, read ln.
type socket struct {
	ln      net.Listener
	held    *reservation
	current atomic.Pointer[Listener]
}

// close closes the socket; live connections are not affected.
func (s *socket) close() {
	if s.ln != nil {
		s.ln.Close()
	}
	s.held.close()
}

// set is an immutable snapshot of active listeners.
type set struct {
	byName map[string]*Listener
	byAddr map[netip.AddrPort]*Listener
}

// Manager owns the listeners. Connection handling reads the active set
// lock-free; updates are serialized by mu.
type Manager struct {
	// Set at creation, read-only.
	opts Options
	log  *slog.Logger
	ctx  context.Context
	stop context.CancelFunc

	active atomic.Pointer[set]

	loops sync.WaitGroup // accept loops

	// Listener manager stats (Envoy's listener_manager.*).
	warmingGauge, activeGauge, drainingGauge                             *atomic.Int64
	addedCount, modifiedCount, removedCount, createFailure, inPlaceCount *atomic.Uint64

	mu      sync.Mutex // guards everything below
	static  map[string]bool
	sockets map[string]*socket // by listener name
	version string
	closed  bool
	// warming are the LDS listener versions waiting for their route
	// configurations, by name (promoteLocked); the active set keeps the
	// version each replaces until it is warm.
	warming map[string]*Listener
	// fetches are the route configurations warming listeners wait for.
	fetches  map[string]*routeFetch
	onWarmed func()
	// reserved are the sockets bound for warming listeners, not yet
	// listening (reserve), by listener name.
	reserved map[string]*reservation
	// held: sockets do not listen until StartListening.
	held bool
	// drained is the admin drain in force (DrainListeners): listeners
	// it covers, also ones added later, drain at once and, when it stops
	// them, do not listen.
	drained adminDrain
	// draining are the LDS listener versions replaced or removed whose
	// drain time has not passed yet, oldest first (addDrainingLocked).
	draining []*drainingListener
	// ending are the drains whose drain time has not passed yet: then
	// their chains' connections are closed (endDrainLocked).
	ending map[*drainEnd]*time.Timer
}

// adminDrain is what DrainListeners calls asked for so far.
type adminDrain struct {
	all, inbound         bool // drain every listener / the inbound ones
	stopAll, stopInbound bool // and stop accepting (not graceful)
}

func (d *adminDrain) add(inboundOnly, graceful bool) {
	if inboundOnly {
		d.inbound = true
		d.stopInbound = d.stopInbound || !graceful
		return
	}
	d.all = true
	d.stopAll = d.stopAll || !graceful
}

// covers reports whether the drain applies to l, and whether l must stop
// accepting. A listener with drain_type MODIFY_ONLY drains only when an
// update replaces or removes it.
func (d *adminDrain) covers(l *Listener) (drain, stop bool) {
	if l.Config.GetDrainType() == listenerv3.Listener_MODIFY_ONLY {
		return false, false
	}
	in := l.Config.GetTrafficDirection() == corev3.TrafficDirection_INBOUND
	return d.all || d.inbound && in, d.stopAll || d.stopInbound && in
}

// NewManager returns a manager with no listeners.
func NewManager(o Options) *Manager {
	if o.Workers < 1 {
		o.Workers = 1
	}
	if o.OriginalDst == nil {
		o.OriginalDst = origdst.Get
	}
	if o.Stats == nil {
		o.Stats = stats.New()
	}
	ctx, stop := context.WithCancel(context.Background())
	m := &Manager{
		opts:          o,
		log:           o.Logger.With("component", "listener-manager"),
		ctx:           ctx,
		stop:          stop,
		warmingGauge:  o.Stats.Gauge("listener_manager.total_listeners_warming"),
		activeGauge:   o.Stats.Gauge("listener_manager.total_listeners_active"),
		addedCount:    o.Stats.Counter("listener_manager.listener_added"),
		modifiedCount: o.Stats.Counter("listener_manager.listener_modified"),
		removedCount:  o.Stats.Counter("listener_manager.listener_removed"),
		createFailure: o.Stats.Counter("listener_manager.listener_create_failure"),
		inPlaceCount:  o.Stats.Counter("listener_manager.listener_in_place_updated"),
		drainingGauge: o.Stats.Gauge("listener_manager.total_listeners_draining"),
		static:        map[string]bool{},
		sockets:       map[string]*socket{},
		warming:       map[string]*Listener{},
		fetches:       map[string]*routeFetch{},
		reserved:      map[string]*reservation{},
		ending:        map[*drainEnd]*time.Timer{},
		held:          o.Held,
	}
	m.active.Store(&set{byName: map[string]*Listener{}, byAddr: map[netip.AddrPort]*Listener{}})
	return m
}

func (m *Manager) deps() Deps {
	return Deps{Routes: m.opts.Routes, Stats: m.opts.Stats, Secrets: m.opts.Secrets, AccessLogs: m.opts.AccessLogs, Local: m.opts.Local, Tracing: m.opts.Tracing}
}

// AddStatic adds the bootstrap's static listeners; LDS never removes them.
func (m *Manager) AddStatic(ls []*listenerv3.Listener) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, l := range ls {
		if err := pgv.ValidateAll(l); err != nil {
			return fmt.Errorf("static listener %q: %w", l.GetName(), err)
		}
	}
	cur := m.active.Load()
	next := copySet(cur)
	var built []*Listener
	for _, l := range ls {
		b, err := Build(l, m.deps())
		if err != nil {
			return err
		}
		built = append(built, b)
	}
	if err := m.applyLocked(cur, next, built, nil); err != nil {
		return err
	}
	for _, b := range built {
		m.static[b.Name] = true
	}
	m.updateGaugesLocked()
	return nil
}

func copySet(s *set) *set {
	n := &set{byName: make(map[string]*Listener, len(s.byName)), byAddr: make(map[netip.AddrPort]*Listener, len(s.byAddr))}
	for k, v := range s.byName {
		n.byName[k] = v
	}
	for k, v := range s.byAddr {
		n.byAddr[k] = v
	}
	return n
}

// ApplyLDS applies a state-of-the-world LDS response. On error nothing
// changes. A listener that is new or changed warms until its route
// configurations are there (routesReadyLocked); the version it replaces keeps
// serving meanwhile. It returns the RDS route configuration names the
// active and warming listeners use.
func (m *Manager) ApplyLDS(version string, ls []*listenerv3.Listener) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.active.Load()
	seen := map[string]bool{}
	var built []*Listener          // the active set's dynamic listeners
	warm := map[string]*Listener{} // the next warming set
	var added, modified uint64
	for _, l := range ls {
		name := l.GetName()
		if m.static[name] {
			return nil, fmt.Errorf("listener %q: name clashes with a static listener", name)
		}
		if seen[name] {
			return nil, fmt.Errorf("listener %q: duplicate name in response", name)
		}
		seen[name] = true
		old, w := cur.byName[name], m.warming[name]
		if old != nil && proto.Equal(old.Config, l) {
			// Back to the active version: a warming one is dropped.
			built = append(built, old)
			if w != nil {
				modified++
			}
			continue
		}
		if old != nil {
			built = append(built, old) // serves until the new version is warm
		}
		if w != nil && proto.Equal(w.Config, l) {
			warm[name] = w
			continue
		}
		b, err := Build(l, m.deps())
		if err != nil {
			return nil, err
		}
		b.version = version
		if old != nil || w != nil {
			modified++
		} else {
			added++
		}
		if m.routesReadyLocked(b) {
			if old != nil {
				built[len(built)-1] = b
			} else {
				built = append(built, b)
			}
			continue
		}
		warm[name] = b
	}
	next := &set{byName: map[string]*Listener{}, byAddr: map[netip.AddrPort]*Listener{}}
	var removed []string
	var removedCount uint64
	for name, l := range cur.byName {
		if m.static[name] {
			next.byName[name] = l
			next.byAddr[l.Addr] = l
		} else if !seen[name] {
			removed = append(removed, name)
			removedCount++
		}
	}
	for name := range m.warming {
		if !seen[name] && cur.byName[name] == nil {
			removedCount++
		}
	}
	if err := checkWarmingAddrs(next, built, warm); err != nil {
		return nil, err
	}
	fresh, err := m.reserveLocked(cur, warm)
	if err != nil {
		return nil, err
	}
	if err := m.applyLocked(cur, next, built, removed); err != nil {
		for _, r := range fresh {
			r.close()
		}
		return nil, err
	}
	for name, r := range fresh {
		m.reserved[name].close()
		m.reserved[name] = r
	}
	m.warming = warm
	m.releaseReservationsLocked()
	m.version = version
	m.addedCount.Add(added)
	m.modifiedCount.Add(modified)
	m.removedCount.Add(removedCount)
	for name, w := range warm {
		m.log.Info("listener warming: waiting for its route configurations", "listener", name, "version", w.version)
	}
	m.trackFetchesLocked()
	m.updateGaugesLocked()
	return m.rdsNamesLocked(), nil
}

// checkWarmingAddrs refuses a warming listener whose address another
// listener, active (next's static ones, built) or warming, has: it could
// not listen once warm.
func checkWarmingAddrs(next *set, built []*Listener, warm map[string]*Listener) error {
	owner := map[netip.AddrPort]string{}
	for _, l := range next.byName {
		owner[l.Addr] = l.Name
	}
	for _, l := range built {
		owner[l.Addr] = l.Name
	}
	names := make([]string, 0, len(warm))
	for name := range warm {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		l := warm[name]
		if l.Addr.Port() == 0 {
			continue
		}
		if other, ok := owner[l.Addr]; ok && other != name {
			return fmt.Errorf("listener %q: address %s is already used by listener %q", name, l.Addr, other)
		}
		owner[l.Addr] = name
	}
	return nil
}

// applyLocked adds built to next, binds or reuses sockets, publishes next
// and closes the sockets of removed listeners. On error no socket that
// existed before is touched and new ones are closed.
func (m *Manager) applyLocked(cur, next *set, built []*Listener, removed []string) error {
	if m.closed {
		return errors.New("listener manager is closed")
	}
	type bound struct {
		name string
		s    *socket
		l    *Listener
	}
	var fresh []bound
	var reused []bound
	// inPlaced are the listeners built updates in place, with the chains
	// of their old versions they drop.
	inPlaced := map[string][]*filterChain{}
	fail := func(err error) error {
		for _, b := range fresh {
			b.s.close()
		}
		return err
	}
	for _, b := range built {
		if other := next.byAddr[b.Addr]; other != nil && other.Name != b.Name && b.Addr.Port() != 0 {
			return fail(fmt.Errorf("listener %q: address %s is already used by listener %q", b.Name, b.Addr, other.Name))
		}
		next.byName[b.Name] = b
		next.byAddr[b.Addr] = b
		old := cur.byName[b.Name]
		if old != nil && old != b && !m.static[b.Name] && inPlaceUpdate(old, b) {
			inPlaced[b.Name] = adoptChains(old, b)
		}
		s := m.sockets[b.Name]
		if old != nil && s != nil && b.Bind && old.Addr == b.Addr && (s.held == nil || old.Transparent == b.Transparent) {
			if old.Transparent != b.Transparent {
				// Rebinding the same address would fail while the old
				// socket is open: flip the option on the socket instead.
				if err := transparent.SetListener(s.ln, b.Transparent); err != nil {
					return fail(fmt.Errorf("listener %q: transparent: %w", b.Name, err))
				}
			}
			reused = append(reused, bound{b.Name, s, b})
			continue
		}
		if _, stop := m.drained.covers(b); !b.Bind || stop {
			continue
		}
		network := "tcp4"
		if b.Addr.Addr().Is6() {
			network = "tcp6"
		}
		var lc net.ListenConfig
		if b.Transparent {
			// IP_TRANSPARENT: accept connections TPROXY diverts here,
			// whatever their destination.
			lc.Control = transparent.ListenerControl
		}
		if m.held {
			r, err := m.holdLocked(b)
			if err != nil {
				return fail(fmt.Errorf("listener %q: bind %s: %w", b.Name, b.Addr, err))
			}
			if r != nil {
				s = &socket{held: r}
				s.current.Store(b)
				fresh = append(fresh, bound{b.Name, s, b})
				continue
			}
		}
		ln, err := m.listenLocked(b, &lc, network)
		if err != nil {
			return fail(fmt.Errorf("listener %q: bind %s: %w", b.Name, b.Addr, err))
		}
		s = &socket{ln: ln}
		s.current.Store(b)
		fresh = append(fresh, bound{b.Name, s, b})
	}
	// Commit.
	for _, b := range reused {
		b.s.current.Store(b.l)
	}
	var toClose []*socket
	for _, b := range fresh {
		if old := m.sockets[b.name]; old != nil {
			toClose = append(toClose, old)
		}
		m.sockets[b.name] = b.s
	}
	for _, name := range removed {
		if s := m.sockets[name]; s != nil {
			toClose = append(toClose, s)
			delete(m.sockets, name)
		}
	}
	for name, s := range m.sockets {
		if l := next.byName[name]; l == nil || !l.Bind {
			toClose = append(toClose, s)
			delete(m.sockets, name)
		}
	}
	m.active.Store(next)
	for _, s := range toClose {
		s.close() // live connections are not affected
	}
	// The versions replaced or removed drain their connections (Envoy's
	// listener drain on update); an unchanged listener is the same
	// version and keeps them; an in-place update drains only the chains
	// it dropped (adoptChains).
	for name, l := range cur.byName {
		n := next.byName[name]
		switch dropped, inPlace := inPlaced[name]; {
		case n == l:
		case inPlace && n != nil:
			for _, c := range dropped {
				c.drain.Start()
			}
			m.endDrainLocked(dropped)
			m.inPlaceCount.Add(1)
			m.log.Info("listener updated in place", "listener", name, "version", n.version, "chains_drained", len(dropped))
		default:
			l.startDrain()
			m.endDrainLocked(l.allChains())
			if !m.static[name] {
				m.addDrainingLocked(l)
			}
		}
	}
	for _, l := range next.byName {
		if drain, _ := m.drained.covers(l); drain {
			l.startDrain()
		}
	}
	for _, b := range fresh {
		if b.s.held != nil {
			m.log.Info("bound; listening once started", "listener", b.name, "address", b.s.addr().String())
			continue
		}
		m.startAcceptingLocked(b.name, b.s)
	}
	return nil
}

func (m *Manager) rdsNamesLocked() []string {
	set := map[string]bool{}
	for _, l := range m.active.Load().byName {
		for name := range l.routeDeps() {
			set[name] = true
		}
	}
	for _, l := range m.warming {
		for name := range l.routeDeps() {
			set[name] = true
		}
	}
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// RDSNames returns the route configuration names the active and warming
// listeners use.
func (m *Manager) RDSNames() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rdsNamesLocked()
}

// Addr returns the bound address of the named listener (useful with port 0).
func (m *Manager) Addr(name string) (net.Addr, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.sockets[name]
	if s == nil {
		return nil, false
	}
	return s.addr(), true
}

// Close closes every listening socket and waits for the accept loops to
// end. Connections being served are left to their filters.
func (m *Manager) Close() {
	m.mu.Lock()
	m.closed = true
	for name, f := range m.fetches {
		if f.timer != nil {
			f.timer.Stop()
		}
		delete(m.fetches, name)
	}
	for name, r := range m.reserved {
		r.close()
		delete(m.reserved, name)
	}
	for _, d := range m.draining {
		d.timer.Stop()
	}
	m.draining = nil
	for e, t := range m.ending {
		t.Stop()
		delete(m.ending, e)
	}
	for name, s := range m.sockets {
		s.close()
		delete(m.sockets, name)
	}
	m.stop()
	m.mu.Unlock()
	m.loops.Wait()
}

// DrainListeners starts draining the active listeners (Envoy's admin
// /drain_listeners): their HTTP connections end gracefully (hcm.Drain).
// inboundOnly limits it to listeners with traffic_direction INBOUND; unless
// graceful, they also stop accepting. Listeners with drain_type
// MODIFY_ONLY are left alone. The drain stays in force for listeners that
// LDS adds later. Connections of other network filters (tcp_proxy) are
// not affected.
func (m *Manager) DrainListeners(inboundOnly, graceful bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.drained.add(inboundOnly, graceful)
	for name, l := range m.active.Load().byName {
		drain, stop := m.drained.covers(l)
		if !drain {
			continue
		}
		l.startDrain()
		if s := m.sockets[name]; s != nil && stop {
			s.close()
			delete(m.sockets, name)
		}
	}
}

// DrainTime is how long a drained listener version's connections go on
// (Options.DrainTime, else Envoy's default).
func (m *Manager) DrainTime() time.Duration { return m.drainTime() }

// Snapshot returns the LDS version and the active listener configs
// (static first), sorted by name.
func (m *Manager) Snapshot() (version string, static, dynamic []*listenerv3.Listener) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for name, l := range m.active.Load().byName {
		if m.static[name] {
			static = append(static, l.Config)
		} else {
			dynamic = append(dynamic, l.Config)
		}
	}
	by := func(ls []*listenerv3.Listener) {
		sort.Slice(ls, func(i, j int) bool { return ls[i].GetName() < ls[j].GetName() })
	}
	by(static)
	by(dynamic)
	return m.version, static, dynamic
}

// Accept back-off after a failure that is not the socket closing (EMFILE,
// ENFILE, ENOBUFS...): doubling from minAcceptDelay to maxAcceptDelay, as
// net/http.Server.Serve does, so that running out of descriptors doesn't
// spin a core and flood the log.
const (
	minAcceptDelay = 5 * time.Millisecond
	maxAcceptDelay = time.Second
)

func (m *Manager) acceptLoop(s *socket) {
	var delay time.Duration
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if delay == 0 {
				delay = minAcceptDelay
				// Logged once per episode, not once per attempt.
				m.log.Warn("accept failed; backing off", "address", s.ln.Addr().String(), "error", err)
			} else if delay *= 2; delay > maxAcceptDelay {
				delay = maxAcceptDelay
			}
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-m.ctx.Done():
				t.Stop()
				return
			}
			continue
		}
		if delay != 0 {
			m.log.Info("accepting again", "address", s.ln.Addr().String())
			delay = 0
		}
		go m.handle(s.current.Load(), c)
	}
}
