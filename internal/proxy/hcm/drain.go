package hcm

import (
	"context"
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
	ctx            context.Context // done once started; connections hang callbacks on it
	cancel         context.CancelFunc
	endCtx         context.Context // done once ended
	endCancel      context.CancelFunc
}

// NewDrain returns a drain that has not started.
func NewDrain() *Drain {
	ctx, cancel := context.WithCancel(context.Background())
	endCtx, endCancel := context.WithCancel(context.Background())
	return &Drain{ctx: ctx, cancel: cancel, endCtx: endCtx, endCancel: endCancel}
}

// Start starts draining; later calls do nothing.
func (d *Drain) Start() {
	if d == nil || d.started.Swap(true) {
		return
	}
	d.cancel()
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
}

// Ended reports whether End was called.
func (d *Drain) Ended() bool { return d != nil && d.ended.Load() }

// onStart runs f (in its own goroutine) when the drain starts, or at once
// if it has; the returned function unregisters f. No goroutine waits in the
// meantime, so an idle connection costs nothing more.
func (d *Drain) onStart(f func()) (stop func() bool) {
	if d == nil {
		return func() bool { return false }
	}
	return context.AfterFunc(d.ctx, f)
}

// onEnd is onStart for the drain's end.
func (d *Drain) onEnd(f func()) (stop func() bool) {
	if d == nil {
		return func() bool { return false }
	}
	return context.AfterFunc(d.endCtx, f)
}

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
