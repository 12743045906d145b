package forward

import (
	"context"
	"time"

	"github.com/straitmesh/strait/internal/proxy/ctxend"
)

// deadlineCtx is the route timeout's context (and a per-try timeout's):
// what context.WithTimeout gives, ended by its timer, by its parent's end
// or by release, for fewer allocations. context.WithTimeout over the
// downstream stream's context cost 7, and the HTTP/2 client's
// context.AfterFunc on it (a plain cancelCtx) 5 more; a deadlineCtx is
// part of the Exchange, registers with its parent through the parent's
// own AfterFunc when it has one (the HTTP/2 server's stream context), and
// has an AfterFunc of its own (which the HTTP/2 client, context.AfterFunc
// and the contexts derived from it use): its Done, Err and AfterFunc are
// a ctxend.Core's (a done channel made only when someone asks for it,
// functions kept in a slice). Values are the parent's.
type deadlineCtx struct {
	parent   context.Context
	deadline time.Time // the earlier of its own and the parent's

	// Done, Err, AfterFunc and the end; its lock also guards timer and
	// stopParent, which end's hook takes back.
	ctxend.Core
	timer      *time.Timer
	stopParent func() bool // unregisters from the parent (nil: not registered)
}

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
	var stop func() bool
	if a, ok := parent.(deadlineAfterFuncer); ok {
		stop = a.AfterFunc(fired)
	} else if parent.Done() != nil {
		stop = context.AfterFunc(parent, fired)
	}
	if stop != nil {
		x.Lock()
		if x.ErrLocked() == nil {
			x.stopParent = stop
			stop = nil
		}
		x.Unlock()
		if stop != nil { // ended meanwhile
			stop()
		}
	}
	x.Lock()
	if x.ErrLocked() == nil {
		x.timer = time.AfterFunc(timeout, fired)
	}
	x.Unlock()
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
	var (
		t    *time.Timer
		stop func() bool
	)
	x.End(err, func() {
		t, stop = x.timer, x.stopParent
		x.timer, x.stopParent = nil, nil
	})
	if t != nil {
		t.Stop()
	}
	if stop != nil {
		stop()
	}
}

func (x *deadlineCtx) Deadline() (time.Time, bool) { return x.deadline, true }

func (x *deadlineCtx) Value(key any) any { return x.parent.Value(key) }

func (x *deadlineCtx) String() string { return "forward deadline context" }

var _ context.Context = (*deadlineCtx)(nil)
