package forward

import (
	"context"
	"sync"
	"time"
)

// deadlineCtx is the route timeout's context (and a per-try timeout's):
// what context.WithTimeout gives, ended by its timer, by its parent's end
// or by release, for fewer allocations. context.WithTimeout over the
// downstream stream's context cost 7, and the HTTP/2 client's
// context.AfterFunc on it (a plain cancelCtx) 5 more; a deadlineCtx is
// part of the Exchange, registers with its parent through the parent's
// own AfterFunc when it has one (the HTTP/2 server's stream context), and
// has an AfterFunc of its own (which the HTTP/2 client, context.AfterFunc
// and the contexts derived from it use), keeping its functions in a
// slice. Its done channel is made only when someone asks for it. Values
// are the parent's.
type deadlineCtx struct {
	parent   context.Context
	deadline time.Time // the earlier of its own and the parent's
	timer    *time.Timer

	mu         sync.Mutex // guards the fields below
	done       chan struct{}
	err        error
	stopParent func() bool // unregisters from the parent (nil: not registered)
	first      func()      // AfterFunc's first function, until it runs or stops
	firstGen   uint32      // counts the functions first had: a stop knows its own
	afters     []*deadlineAfter
}

// deadlineAfter is one function AfterFunc registered.
type deadlineAfter struct{ f func() }

// deadlineClosed is the done channel of a context that ended before anyone
// asked for it.
var deadlineClosed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// deadlineAfterFuncer is a context that runs a function when it ends
// (context's afterFuncer: the HTTP/2 server's stream context, a
// deadlineCtx).
type deadlineAfterFuncer interface {
	AfterFunc(f func()) (stop func() bool)
}

// start makes x, a zero deadlineCtx, end timeout from now, or when parent
// ends; release ends it earlier.
func (x *deadlineCtx) start(parent context.Context, timeout time.Duration) {
	x.parent = parent
	x.deadline = time.Now().Add(timeout)
	if pd, ok := parent.Deadline(); ok && pd.Before(x.deadline) {
		x.deadline = pd
	}
	if err := parent.Err(); err != nil {
		x.end(err)
		return
	}
	fired := x.fired // one function value (an allocation) for the parent and the timer
	if a, ok := parent.(deadlineAfterFuncer); ok {
		stop := a.AfterFunc(fired)
		x.mu.Lock()
		if x.err == nil {
			x.stopParent = stop
			stop = nil
		}
		x.mu.Unlock()
		if stop != nil { // ended meanwhile
			stop()
		}
	} else if parent.Done() != nil {
		stop := context.AfterFunc(parent, fired)
		x.mu.Lock()
		if x.err == nil {
			x.stopParent = stop
			stop = nil
		}
		x.mu.Unlock()
		if stop != nil {
			stop()
		}
	}
	x.mu.Lock()
	if x.err == nil {
		x.timer = time.AfterFunc(timeout, fired)
	}
	x.mu.Unlock()
}

// fired ends x when its parent ended (with the parent's error) or its
// timer fired (DeadlineExceeded): whichever came first.
func (x *deadlineCtx) fired() {
	if err := x.parent.Err(); err != nil {
		x.end(err)
		return
	}
	x.end(context.DeadlineExceeded)
}

// release ends x (context.Canceled unless it ended already) and lets go
// of its timer and its parent: what context.WithTimeout's cancel does.
func (x *deadlineCtx) release() { x.end(context.Canceled) }

// end ends x with err (once): Done closes, Err says err, what AfterFunc
// registered runs, the timer and the parent's registration go.
func (x *deadlineCtx) end(err error) {
	if err == nil {
		err = context.Canceled
	}
	x.mu.Lock()
	if x.err != nil {
		x.mu.Unlock()
		return
	}
	x.err = err
	if x.done == nil {
		x.done = deadlineClosed
	} else {
		close(x.done)
	}
	first, afters, stop, t := x.first, x.afters, x.stopParent, x.timer
	x.first, x.afters, x.stopParent, x.timer = nil, nil, nil, nil
	x.mu.Unlock()
	if t != nil {
		t.Stop()
	}
	if stop != nil {
		stop()
	}
	if first != nil {
		go first()
	}
	for _, a := range afters {
		go a.f()
	}
}

func (x *deadlineCtx) Deadline() (time.Time, bool) { return x.deadline, true }

func (x *deadlineCtx) Done() <-chan struct{} {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.done == nil {
		if x.err != nil {
			x.done = deadlineClosed
		} else {
			x.done = make(chan struct{})
		}
	}
	return x.done
}

func (x *deadlineCtx) Err() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.err
}

func (x *deadlineCtx) Value(key any) any { return x.parent.Value(key) }

// AfterFunc runs f on its own goroutine once x ends (at once if it has);
// stop unregisters it, reporting whether it had not run. context.AfterFunc,
// the contexts derived from x, and the HTTP/2 client call it. The first
// function (a request has one, the HTTP/2 client's) takes no slice.
func (x *deadlineCtx) AfterFunc(f func()) (stop func() bool) {
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
	a := &deadlineAfter{f: f}
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

func (x *deadlineCtx) String() string { return "forward deadline context" }

var _ context.Context = (*deadlineCtx)(nil)
