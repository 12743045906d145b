package hcm

import (
	"context"
	"sync"
	"sync/atomic"
)

// Drain tells the connections served under it to end gracefully, as
// Envoy's drain manager does with drain_strategy immediate (the one Istio's
// pilot-agent asks for): an HTTP/1.1 connection answers its request in
// progress with "connection: close" and closes after it, an idle one is
// closed, and an HTTP/2 connection gets a GOAWAY and closes once its
// streams end. Once the drain time has passed, End closes the connections
// still open, a request in flight or not, as Envoy does when it removes a
// drained listener (ActiveTcpListener's destructor) or the filter chains
// an in-place update dropped (removeFilterChain). One Drain belongs to one
// filter chain of a listener version; a nil *Drain never starts.
type Drain struct {
	started, ended atomic.Bool
	endCtx         context.Context // done once ended
	endCancel      context.CancelFunc

	// Connections register here (watch) rather than with two context
	// callbacks each: a map entry costs a parked connection far less
	// (h1park.go, h2.go).
	mu    sync.Mutex
	conns map[drainWatcher]struct{}
}

// drainWatcher is a connection a Drain watches: an HTTP/1.1 one (h1keep)
// or an HTTP/2 one (h2keep).
type drainWatcher interface {
	drainIdle() // the drain started
	cut()       // the drain ended
}

// NewDrain returns a drain that has not started.
func NewDrain() *Drain {
	endCtx, endCancel := context.WithCancel(context.Background())
	return &Drain{endCtx: endCtx, endCancel: endCancel}
}

// Start starts draining; later calls do nothing.
func (d *Drain) Start() {
	if d == nil || d.started.Swap(true) {
		return
	}
	go d.each(drainWatcher.drainIdle)
}

// each runs f on every watched connection.
func (d *Drain) each(f func(drainWatcher)) {
	d.mu.Lock()
	ks := make([]drainWatcher, 0, len(d.conns))
	for k := range d.conns {
		ks = append(ks, k)
	}
	d.mu.Unlock()
	for _, k := range ks {
		f(k)
	}
}

// watch registers a connection: its drainIdle runs when the drain starts
// and its cut when it ends, at once (on another goroutine) if that already
// happened. unwatch removes it.
func (d *Drain) watch(k drainWatcher) {
	if d == nil {
		return
	}
	d.mu.Lock()
	if d.conns == nil {
		d.conns = map[drainWatcher]struct{}{}
	}
	d.conns[k] = struct{}{}
	d.mu.Unlock()
	// Start and End set their flag before they list the connections: if
	// they listed before k was added, k sees the flag here.
	started, ended := d.started.Load(), d.ended.Load()
	if started || ended {
		go func() {
			if started {
				k.drainIdle()
			}
			if ended {
				k.cut()
			}
		}()
	}
}

// unwatch removes a connection watch registered.
func (d *Drain) unwatch(k drainWatcher) {
	if d == nil {
		return
	}
	d.mu.Lock()
	delete(d.conns, k)
	d.mu.Unlock()
}

// Started reports whether Start was called.
func (d *Drain) Started() bool { return d != nil && d.started.Load() }

// End ends the drain (starting it first if it had not started): the
// connections still open are closed, cutting the requests in flight on
// them. Later calls do nothing.
func (d *Drain) End() {
	if d == nil {
		return
	}
	d.Start()
	if d.ended.Swap(true) {
		return
	}
	d.endCancel()
	go d.each(drainWatcher.cut)
}

// Ended reports whether End was called.
func (d *Drain) Ended() bool { return d != nil && d.ended.Load() }

// EndContext returns a context that is done once the drain ends (never,
// for a nil Drain). Other protocols (tcp_proxy, which has no way to ask a
// connection to end) close their connections on it.
func (d *Drain) EndContext() context.Context {
	if d == nil {
		return context.Background()
	}
	return d.endCtx
}

// Idle states of an HTTP/1.1 connection with a Drain: the drain closes a
// connection only while it waits for a request with nothing buffered.
const (
	connBusy int32 = iota
	connIdle
	connDrained // closed by the drain while idle
)
