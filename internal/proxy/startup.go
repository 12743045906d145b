package proxy

import (
	"sync"
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

// setDraining marks the proxy as draining: /ready answers 503 DRAINING
// and server.state says so.
func (p *Proxy) setDraining() {
	p.init.mu.Lock() // checkReady must not turn it LIVE again
	defer p.init.mu.Unlock()
	p.draining.Store(true)
	p.serverState.Store(stateDraining)
}

// startup is the progress of the proxy's initialization.
type startup struct {
	mu sync.Mutex // guards everything below
	// cdsDone, ldsDone: the first response of the type was applied or
	// rejected, or its initial fetch timeout passed.
	cdsDone, ldsDone bool
	clustersInit     bool // p.clustersInit is closed
	timers           []*time.Timer
	closed           bool
}

// startInit arms the CDS initial fetch timeout; Start calls it once the
// ADS client runs.
func (p *Proxy) startInit() {
	p.init.mu.Lock()
	defer p.init.mu.Unlock()
	p.armLocked(p.cdsTimeout, &p.init.cdsDone, "clusters")
}

// armLocked ends the wait for *done after d (0: no limit).
func (p *Proxy) armLocked(d time.Duration, done *bool, what string) {
	if d <= 0 || p.init.closed {
		return
	}
	p.init.timers = append(p.init.timers, time.AfterFunc(d, func() {
		p.init.mu.Lock()
		late := !*done && !p.init.closed
		p.init.mu.Unlock()
		if late {
			p.log.Warn("no "+what+" received within the initial fetch timeout; starting without them", "initial_fetch_timeout", d)
			p.initDone(done)
		}
	}))
}

// initDone records that a first response (or its timeout) came, and
// moves the start-up on.
func (p *Proxy) initDone(done *bool) {
	p.init.mu.Lock()
	*done = true
	p.init.mu.Unlock()
	p.checkReady()
}

// checkReady moves the start-up on as far as it can: it lets the xDS
// client ask for listeners once the clusters are initialized, and latches
// readiness once the first listeners have warmed too. Called after every
// update and whenever a cluster or listener leaves warming on its own.
func (p *Proxy) checkReady() {
	p.init.mu.Lock()
	defer p.init.mu.Unlock()
	if p.ready.Load() || p.init.closed {
		return
	}
	if !p.init.clustersInit {
		if !p.init.cdsDone || p.Clusters.Warming() > 0 {
			return
		}
		p.init.clustersInit = true
		// The state first: closing clustersInit lets the xDS client
		// ask for listeners at once, and whoever sees that request
		// must see INITIALIZING.
		if !p.draining.Load() {
			p.serverState.Store(stateInitializing)
		}
		close(p.clustersInit)
		p.log.Info("all clusters initialized; asking for listeners")
		p.armLocked(p.ldsTimeout, &p.init.ldsDone, "listeners")
	}
	if !p.init.ldsDone || p.Listeners.Warming() > 0 {
		return
	}
	p.Listeners.StartListening()
	p.workersStarted.Store(1)
	if !p.draining.Load() {
		p.serverState.Store(stateLive)
	}
	p.ready.Store(true)
	p.log.Info("initial configuration applied; ready")
}

// stopInit stops the start-up's timers.
func (p *Proxy) stopInit() {
	p.init.mu.Lock()
	defer p.init.mu.Unlock()
	p.init.closed = true
	for _, t := range p.init.timers {
		t.Stop()
	}
}
