package proxy

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Start-up, as Envoy's server initializes (source/server/server.cc,
// RunHelper; source/common/upstream/cluster_manager_impl.cc,
// ClusterManagerInitHelper): the ADS stream asks for clusters first. Once
// the first CDS response is applied (or rejected, or cds_config's
// initial_fetch_timeout passed without one) and every cluster it brought
// has left warming (an EDS cluster has its endpoints or its own
// initial_fetch_timeout passed, cluster.Manager's fetch timer; a DNS cluster has
// resolved), the cluster manager is initialized and the stream asks for
// listeners. The proxy is ready (/ready 200 LIVE) once the first LDS
// response is applied (or rejected, or lds_config's initial_fetch_timeout
// passed) and the listeners it brought have warmed (listener.Manager.OnWarmed).
// Until then the listeners, the bootstrap's static ones included, are
// bound but do not listen (listener.Options.Held); they all start listening
// then, as Envoy starts its workers. So no listener accepts a connection
// before the clusters its routes name have their endpoints: no request
// meets a cluster still warming (503 "no healthy upstream" at start).

// Values of the server.state gauge: Envoy's admin ServerInfo.State.
const (
	stateLive            = 0
	stateDraining        = 1
	statePreInitializing = 2
	stateInitializing    = 3
)

// warming is what the start-up asks of the cluster and listener managers.
type warming interface {
	// Warming is how many of the manager's resources are warming.
	Warming() int
}

// listeners is what the start-up asks of the listener manager.
type listeners interface {
	warming
	// StartListening lets the held listeners listen.
	StartListening()
}

// startup is the proxy's initialization and its server state: the
// initial fetch timeouts, how far the start-up is, readiness and
// draining, and Envoy's server.state and listener_manager.workers_started
// gauges, which Istio's pilot-agent reads to tell whether the proxy is
// ready. The proxy calls it on every update and rejection; the cluster and
// listener managers call check when a resource leaves warming.
type startup struct {
	// Set at creation, read-only.
	log       *slog.Logger
	clusters  warming
	listeners listeners
	// Initial fetch timeouts of the bootstrap's cds_config and lds_config.
	cdsTimeout, ldsTimeout time.Duration
	// clustersInit is closed once the cluster manager has initialized: the
	// xDS client then asks for listeners (start).
	clustersInit                chan struct{}
	serverState, workersStarted *atomic.Int64

	ready, draining atomic.Bool

	mu sync.Mutex // guards everything below
	// cdsDone, ldsDone: the first response of the type was applied or
	// rejected, or its initial fetch timeout passed.
	cdsDone, ldsDone bool
	clustersDone     bool // clustersInit is closed
	timers           []*time.Timer
	closed           bool
}

// newStartup is the start-up of a proxy whose managers are clusters and
// ls, with the initial fetch timeouts cds and lds, keeping its state in
// the gauges serverState and workersStarted (PRE_INITIALIZING until it
// moves on).
func newStartup(log *slog.Logger, clusters warming, ls listeners, cds, lds time.Duration, serverState, workersStarted *atomic.Int64) *startup {
	s := &startup{log: log, clusters: clusters, listeners: ls, cdsTimeout: cds, ldsTimeout: lds,
		clustersInit: make(chan struct{}), serverState: serverState, workersStarted: workersStarted}
	s.serverState.Store(statePreInitializing)
	return s
}

// live makes a proxy without ADS ready at once: it has nothing to wait for.
func (s *startup) live() {
	s.ready.Store(true)
	s.serverState.Store(stateLive)
	s.workersStarted.Store(1)
}

// isReady reports whether the start-up is done and no drain started.
func (s *startup) isReady() bool { return s.ready.Load() && !s.draining.Load() }

// initializing reports whether the clusters are initialized and the
// start-up waits for the listeners (check).
func (s *startup) initializing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.clustersDone
}

// isDraining reports whether a drain started.
func (s *startup) isDraining() bool { return s.draining.Load() }

// setDraining marks the proxy as draining: /ready answers 503 DRAINING
// and server.state says so.
func (s *startup) setDraining() {
	s.mu.Lock() // check must not turn it LIVE again
	defer s.mu.Unlock()
	s.draining.Store(true)
	s.serverState.Store(stateDraining)
}

// start arms the CDS initial fetch timeout; Start calls it once the ADS
// client runs.
func (s *startup) start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armLocked(s.cdsTimeout, &s.cdsDone, "clusters")
}

// armLocked ends the wait for *done after d (0: no limit).
func (s *startup) armLocked(d time.Duration, done *bool, what string) {
	if d <= 0 || s.closed {
		return
	}
	s.timers = append(s.timers, time.AfterFunc(d, func() {
		s.mu.Lock()
		late := !*done && !s.closed
		s.mu.Unlock()
		if late {
			s.log.Warn("no "+what+" received within the initial fetch timeout; starting without them", "initial_fetch_timeout", d)
			s.done(done)
		}
	}))
}

// clustersCame records that the first CDS response was applied or
// rejected, and moves the start-up on.
func (s *startup) clustersCame() { s.done(&s.cdsDone) }

// listenersCame is clustersCame for the first LDS response.
func (s *startup) listenersCame() { s.done(&s.ldsDone) }

// done records that a first response (or its timeout) came, and moves
// the start-up on.
func (s *startup) done(done *bool) {
	s.mu.Lock()
	*done = true
	s.mu.Unlock()
	s.check()
}

// check moves the start-up on as far as it can: it lets the xDS client
// ask for listeners once the clusters are initialized, and latches
// readiness once the first listeners have warmed too. Called after every
// update and whenever a cluster or listener leaves warming on its own.
func (s *startup) check() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ready.Load() || s.closed {
		return
	}
	if !s.clustersDone {
		if !s.cdsDone || s.clusters.Warming() > 0 {
			return
		}
		s.clustersDone = true
		// The state first: closing clustersInit lets the xDS client
		// ask for listeners at once, and whoever sees that request
		// must see INITIALIZING.
		if !s.draining.Load() {
			s.serverState.Store(stateInitializing)
		}
		close(s.clustersInit)
		s.log.Info("all clusters initialized; asking for listeners")
		s.armLocked(s.ldsTimeout, &s.ldsDone, "listeners")
	}
	if !s.ldsDone || s.listeners.Warming() > 0 {
		return
	}
	s.listeners.StartListening()
	s.workersStarted.Store(1)
	if !s.draining.Load() {
		s.serverState.Store(stateLive)
	}
	s.ready.Store(true)
	s.log.Info("initial configuration applied; ready")
}

// stop stops the start-up's timers.
func (s *startup) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, t := range s.timers {
		t.Stop()
	}
}
