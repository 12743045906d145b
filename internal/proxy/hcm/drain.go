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
// streams end. One Drain belongs to one listener version; a nil *Drain
// never starts.
type Drain struct {
	started atomic.Bool
	ctx     context.Context // done once started; connections hang callbacks on it
	cancel  context.CancelFunc
}

// NewDrain returns a drain that has not started.
func NewDrain() *Drain {
	ctx, cancel := context.WithCancel(context.Background())
	return &Drain{ctx: ctx, cancel: cancel}
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

// onStart runs f (in its own goroutine) when the drain starts, or at once
// if it has; the returned function unregisters f. No goroutine waits in the
// meantime, so an idle connection costs nothing more.
func (d *Drain) onStart(f func()) (stop func() bool) {
	if d == nil {
		return func() bool { return false }
	}
	return context.AfterFunc(d.ctx, f)
}

// Context returns a context that is done once the drain starts (never, for
// a nil Drain). Other protocols (tcp_proxy) hang their own ending on it.
func (d *Drain) Context() context.Context {
	if d == nil {
		return context.Background()
	}
	return d.ctx
}

// Idle states of an HTTP/1.1 connection with a Drain: the drain closes a
// connection only while it waits for a request with nothing buffered.
const (
	connBusy int32 = iota
	connIdle
	connDrained // closed by the drain while idle
)
