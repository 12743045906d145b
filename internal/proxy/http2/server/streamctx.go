package server

import (
	"context"
	"sync"
	"time"
)

// streamCtx is a stream's request context when the connection's context
// is never done (Done() == nil, as the HCM's is): it is part of the
// stream, so a request costs no context.WithCancel (an allocation, and
// for each context.AfterFunc or child context a map in it). It ends when
// the stream fails or its handler returns, as WithCancel's would; its
// done channel is made only when someone asks for it, and AfterFunc
// (context.AfterFunc and the children contexts use it) keeps its
// functions in a slice. Values, and the deadline, are the parent's, but
// for one value the handler may attach (SetStreamValue).
type streamCtx struct {
	parent context.Context
	// key and val are the attached value: set once by the handler's
	// goroutine before it shares the context, read-only after.
	key, val any

	mu       sync.Mutex // guards the fields below
	done     chan struct{}
	err      error
	first    func() // AfterFunc's first function, until it runs or stops
	firstGen uint32 // counts the functions first had: a stop knows its own
	afters   []*afterFunc
}

// afterFunc is one function AfterFunc registered.
type afterFunc struct{ f func() }

// closedDone is the done channel of a context that ended before anyone
// asked for it.
var closedDone = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

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

func (x *streamCtx) Done() <-chan struct{} {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.done == nil {
		if x.err != nil {
			x.done = closedDone
		} else {
			x.done = make(chan struct{})
		}
	}
	return x.done
}

func (x *streamCtx) Err() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.err
}

// AfterFunc runs f on its own goroutine once x ends (at once if it has);
// stop unregisters it, reporting whether it had not run. context.AfterFunc,
// and context.WithCancel and its kind on x, call it (their afterFuncer).
// The first function (a stream has one or two) takes no slice.
func (x *streamCtx) AfterFunc(f func()) (stop func() bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.err != nil {
		go f()
		return func() bool { return false }
	}
	if x.first == nil {
		x.first = f
		x.firstGen++
		gen := x.firstGen
		return func() bool {
			x.mu.Lock()
			defer x.mu.Unlock()
			if x.first != nil && x.firstGen == gen {
				x.first = nil
				return true
			}
			return false
		}
	}
	a := &afterFunc{f: f}
	x.afters = append(x.afters, a)
	return func() bool {
		x.mu.Lock()
		defer x.mu.Unlock()
		for i, b := range x.afters {
			if b == a {
				last := len(x.afters) - 1
				x.afters[i] = x.afters[last]
				x.afters[last] = nil
				x.afters = x.afters[:last]
				return true
			}
		}
		return false
	}
}

// cancel ends x (once): Done closes, Err says context.Canceled, and what
// AfterFunc registered runs.
func (x *streamCtx) cancel() {
	x.mu.Lock()
	if x.err != nil {
		x.mu.Unlock()
		return
	}
	x.err = context.Canceled
	if x.done == nil {
		x.done = closedDone
	} else {
		close(x.done)
	}
	first, afters := x.first, x.afters
	x.first, x.afters = nil, nil
	x.mu.Unlock()
	if first != nil {
		go first()
	}
	for _, a := range afters {
		go a.f()
	}
}

func (x *streamCtx) String() string { return "http2 server stream context" }

var _ context.Context = (*streamCtx)(nil)
