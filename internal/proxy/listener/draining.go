package listener

import (
	"slices"
	"time"
)

// Draining listeners, as Envoy's listener manager keeps them
// (source/common/listener_manager/listener_manager_impl.cc, drainListener):
// an LDS listener version that an update replaces (other than in place,
// inplace.go) or removes drains for the drain time (--drain-time-s), and
// until then the config dump shows it as the listener's draining_state and
// listener_manager.total_listeners_draining counts it. Its connections end
// as the drain ends them: HTTP ones at a request boundary, tcp_proxy ones
// when the drain time passes.

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
