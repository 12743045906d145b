// Package lifecycle runs the long-lived parts of a process together: each part
// is a function of a context on its own goroutine; the first part to fail
// cancels the context of all of them, and Wait returns that failure, named
// after its part. straitd and strait-agent are each one Group of parts.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Group is a set of parts sharing one context. Make one with New.
type Group struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	once sync.Once // guards err: the first failure wins
	err  error
}

// New returns a Group whose parts run under a context derived from ctx,
// and that context.
func New(ctx context.Context) (*Group, context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	return &Group{ctx: ctx, cancel: cancel}, ctx
}

// Go runs fn on its own goroutine with the group's context. A non-nil
// error stops the group with "name: error", unless it is the context's own
// cancellation after the group was stopped. A part must return once the
// context is done.
func (g *Group) Go(name string, fn func(ctx context.Context) error) {
	g.wg.Go(func() {
		err := fn(g.ctx)
		if err == nil || g.ctx.Err() != nil && errors.Is(err, context.Canceled) {
			return
		}
		g.Fail(name, err)
	})
}

// Fail stops the group with err, as a failing part named name would.
func (g *Group) Fail(name string, err error) {
	g.once.Do(func() { g.err = fmt.Errorf("%s: %w", name, err) })
	g.cancel()
}

// Stop cancels the group's context without an error (a normal shutdown).
func (g *Group) Stop() { g.cancel() }

// Wait waits for every part to return and reports the first failure, or
// nil when the group was stopped or its parent context ended.
func (g *Group) Wait() error {
	g.wg.Wait()
	g.cancel()
	g.once.Do(func() {}) // no failure can be recorded after this
	return g.err
}
