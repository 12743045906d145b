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
// functions in a slice. Values, and the deadline, are the parent's.
type streamCtx struct {
	parent context.Context

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

func (x *streamCtx) Value(key any) any { return x.parent.Value(key) }

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
