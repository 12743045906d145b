// Package ctxend holds the ending half of the proxy's own contexts: what
// context.WithCancel's cancelCtx keeps (a done channel, an error, the
// functions to run at the end), embeddable in a struct that owns the
// rest of a context.Context (Deadline, Value, String) so that a request
// pays no context.WithCancel or context.WithTimeout (an allocation, and a
// map in it for each context.AfterFunc or child context).
//
// Two contexts embed it: the HTTP/2 server's stream context
// (http2/server/streamctx.go) and the route and per-try timeout contexts
// of forward.RoundTrip (forward/deadline.go).
package ctxend

import (
	"context"
	"sync"
)

// Core is a context's Done, Err and AfterFunc, and End, which ends it.
// Its done channel is made only when someone asks for it (a context that
// ends before that shares one closed channel), and AfterFunc keeps its
// functions in a slice, the first one (a request's context usually has
// one, two at most) in a slot of its own. The zero Core is a context that
// has not ended. A Core must not be copied after first use.
//
// AfterFunc makes Core an afterFuncer for the context package:
// context.AfterFunc, context.WithCancel and their kind on a context that
// embeds a Core register through it instead of starting a goroutine.
type Core struct {
	mu       sync.Mutex // guards the fields below, and what the owner says it guards with Lock
	done     chan struct{}
	err      error
	first    func() // AfterFunc's first function, until it runs or stops
	firstGen uint32 // counts the functions first had: a stop knows its own
	afters   []*after
}

// after is one function AfterFunc registered past the first.
type after struct{ f func() }

// closed is the done channel of a context that ended before anyone asked
// for it.
var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Lock locks the mutex that guards c; an owner may guard fields of its
// own with it too (saying which), to change them atomically with respect
// to End (see ErrLocked).
func (c *Core) Lock() { c.mu.Lock() }

// Unlock unlocks what Lock locked.
func (c *Core) Unlock() { c.mu.Unlock() }

// ErrLocked is Err for a caller that holds the lock: nil until c ends.
// An owner that sets a field End's hook takes back checks it first: once
// it is not nil, the hook has run already.
func (c *Core) ErrLocked() error { return c.err }

// Done is context.Context's: a channel that is closed when c ends.
func (c *Core) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		if c.err != nil {
			c.done = closed
		} else {
			c.done = make(chan struct{})
		}
	}
	return c.done
}

// Err is context.Context's: nil until c ends, then the error it ended
// with.
func (c *Core) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// AfterFunc runs f on its own goroutine once c ends (at once if it has);
// stop unregisters it, reporting whether it had not run, as
// context.AfterFunc's stop does. Only the first function registered at a
// time takes no slice.
func (c *Core) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		go f()
		return func() bool { return false }
	}
	if c.first == nil {
		c.first = f
		c.firstGen++
		gen := c.firstGen
		return func() bool {
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.first != nil && c.firstGen == gen {
				c.first = nil
				return true
			}
			return false
		}
	}
	a := &after{f: f}
	c.afters = append(c.afters, a)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, b := range c.afters {
			if b == a {
				last := len(c.afters) - 1
				c.afters[i] = c.afters[last]
				c.afters[last] = nil
				c.afters = c.afters[:last]
				return true
			}
		}
		return false
	}
}

// End ends c with err (context.Canceled when nil), once: Done closes and
// Err says err; hook, when not nil, runs under the lock, where the owner
// takes what it guards with it (a timer to stop, a registration to
// undo) to let go of after End returns; then what AfterFunc registered
// starts, each function on its own goroutine. End reports whether this
// call ended c: false when it had ended already, and hook did not run.
func (c *Core) End(err error, hook func()) bool {
	if err == nil {
		err = context.Canceled
	}
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return false
	}
	c.err = err
	if c.done == nil {
		c.done = closed
	} else {
		close(c.done)
	}
	if hook != nil {
		hook()
	}
	first, afters := c.first, c.afters
	c.first, c.afters = nil, nil
	c.mu.Unlock()
	if first != nil {
		go first()
	}
	for _, a := range afters {
		go a.f()
	}
	return true
}
