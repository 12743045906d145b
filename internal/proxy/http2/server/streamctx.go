package server

import (
	"context"
	"time"

	"github.com/straitmesh/strait/internal/proxy/ctxend"
)

// streamCtx is a stream's request context when the connection's context
// is never done (Done() == nil, as the HCM's is): it is part of the
// stream, so a request costs no context.WithCancel (an allocation, and
// for each context.AfterFunc or child context a map in it). It ends when
// the stream fails or its handler returns, as WithCancel's would; its
// Done, Err and AfterFunc (context.AfterFunc and the children contexts
// use it) are a ctxend.Core's: a done channel made only when someone asks
// for it, functions kept in a slice. Values, and the deadline, are the
// parent's, but for one value the handler may attach (SetStreamValue).
type streamCtx struct {
	parent context.Context
	// key and val are the attached value: set once by the handler's
	// goroutine before it shares the context, read-only after.
	key, val any

	ctxend.Core
}

func (x *streamCtx) Deadline() (time.Time, bool) { return x.parent.Deadline() }

func (x *streamCtx) Value(key any) any {
	if x.key != nil && x.key == key {
		return x.val
	}
	return x.parent.Value(key)
}

// SetStreamValue attaches val under key to ctx, in place, when ctx is the
// request context of a stream this package serves (its Value(key) returns
// val from then on, as context.WithValue's child would), and reports
// whether it did: false for any other context, or a stream's that has a
// value attached already. A handler calls it once, on its own goroutine,
// before it shares the context with another. Together with CancelStream
// it gives a handler what context.WithCancel and context.WithValue would
// give, without their allocations.
func SetStreamValue(ctx context.Context, key, val any) bool {
	x, ok := ctx.(*streamCtx)
	if !ok || x.key != nil || key == nil {
		return false
	}
	x.key, x.val = key, val
	return true
}

// CancelStream ends ctx when it is the request context of a stream this
// package serves, as the end of its stream would (Done closes, Err is
// context.Canceled, what AfterFunc registered runs; the stream itself
// goes on), and reports whether it was one.
func CancelStream(ctx context.Context) bool {
	x, ok := ctx.(*streamCtx)
	if ok {
		x.cancel()
	}
	return ok
}

// cancel ends x (once): Done closes, Err says context.Canceled, and what
// AfterFunc registered runs.
func (x *streamCtx) cancel() { x.End(context.Canceled, nil) }

func (x *streamCtx) String() string { return "http2 server stream context" }

var _ context.Context = (*streamCtx)(nil)
