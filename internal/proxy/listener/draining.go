package listener

import (
	"slices"
	"time"
)

// Draining listeners, as Envoy's listener manager keeps them
// (source/common/listener_manager/listener_manager_impl.cc, drainListener):
// an LDS listener version that an update replaces (other than in place,
// inPlaceUpdate) or removes drains for the drain time (--drain-time-s), and
// until then the config dump shows it as the listener's draining_state and
// listener_manager.total_listeners_draining counts it. Its connections end
// as the drain ends them: HTTP ones at a request boundary (hcm.Drain);
// then, once the drain time has passed, every connection still open on it
// is closed, a request in flight or not, tcp_proxy ones too, as Envoy does
// when it removes the drained listener (ActiveTcpListener's destructor).
// The filter chains an in-place update drops end the same way (Envoy's
// removeFilterChain). An admin drain (DrainListeners) has no such end:
// Envoy only stops the listeners accepting then.

// drainingListener is one draining listener version. Guarded by
// Manager.mu.
type drainingListener struct {
	l     *Listener
	timer *time.Timer
}

// addDrainingLocked records l as draining until the drain time passes.
func (m *Manager) addDrainingLocked(l *Listener) {
	d := &drainingListener{l: l}
	d.timer = time.AfterFunc(m.drainTime(), func() { m.drainDone(d) })
	m.draining = append(m.draining, d)
	m.drainingGauge.Store(int64(len(m.draining)))
}

// drainDone forgets d once its drain time has passed.
func (m *Manager) drainDone(d *drainingListener) {
	m.mu.Lock()
	defer m.mu.Unlock()
	i := slices.Index(m.draining, d)
	if i < 0 {
		return // the manager closed meanwhile
	}
	m.draining = slices.Delete(m.draining, i, i+1)
	m.drainingGauge.Store(int64(len(m.draining)))
	m.log.Debug("listener drained", "listener", d.l.Name, "version", d.l.version)
}

// drainEnd is the end of the drain of some filter chains. Guarded by
// Manager.mu.
type drainEnd struct{ chains []*filterChain }

// endDrainLocked ends the drains of chains once the drain time has passed:
// the connections still open on them are closed then.
func (m *Manager) endDrainLocked(chains []*filterChain) {
	if len(chains) == 0 {
		return
	}
	e := &drainEnd{chains: chains}
	m.ending[e] = time.AfterFunc(m.drainTime(), func() { m.endDrain(e) })
}

func (m *Manager) endDrain(e *drainEnd) {
	m.mu.Lock()
	_, ok := m.ending[e]
	delete(m.ending, e)
	m.mu.Unlock()
	if !ok {
		return // the manager closed meanwhile
	}
	for _, c := range e.chains {
		c.drain.End()
	}
	m.log.Debug("drain time over; closing the connections left", "chains", len(e.chains))
}

// EndDrains ends the drain of every listener's filter chains now, those
// still waiting for their drain time too: every connection they serve is
// closed, HTTP and tcp_proxy ones, a request in flight or not. The proxy
// calls it as it exits (Envoy closes every connection then).
func (m *Manager) EndDrains() {
	m.mu.Lock()
	var chains []*filterChain
	for _, l := range m.active.Load().byName {
		chains = append(chains, l.allChains()...)
	}
	for e, t := range m.ending {
		t.Stop()
		delete(m.ending, e)
		chains = append(chains, e.chains...)
	}
	m.mu.Unlock()
	for _, c := range chains {
		c.drain.End()
	}
}
