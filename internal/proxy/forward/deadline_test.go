package forward

import (
	"context"
	"errors"
	"testing"
	"time"
)

// afterParent is a parent context with an AfterFunc of its own, as the
// HTTP/2 server's stream context has.
type afterParent struct {
	context.Context
	afters int // AfterFunc calls
	stops  int // calls of the stops it returned
}

func (p *afterParent) AfterFunc(f func()) func() bool {
	p.afters++
	stop := context.AfterFunc(p.Context, f)
	return func() bool { p.stops++; return stop() }
}

type ctxKey struct{}

// waitDone waits for ch to close, failing after a second.
func waitDone(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(time.Second):
		t.Fatalf("%s did not end", what)
	}
}

// TestDeadlineCtxExpires: the route timeout's context ends at its
// deadline as context.WithTimeout's would: Done closes, Err is
// DeadlineExceeded, its AfterFunc functions and the contexts derived from
// it end; values are the parent's.
func TestDeadlineCtxExpires(t *testing.T) {
	parent := context.WithValue(context.Background(), ctxKey{}, "v")
	var x deadlineCtx
	x.start(parent, 20*time.Millisecond)
	defer x.release()
	if dl, ok := x.Deadline(); !ok || time.Until(dl) > 20*time.Millisecond {
		t.Fatalf("Deadline() = %v, %v", dl, ok)
	}
	if x.Value(ctxKey{}) != "v" {
		t.Fatal("the parent's value is not the context's")
	}
	ran := make(chan struct{})
	x.AfterFunc(func() { close(ran) })
	ran2 := make(chan struct{})
	x.AfterFunc(func() { close(ran2) })
	stopped := x.AfterFunc(func() { t.Error("a stopped function ran") })
	if !stopped() {
		t.Fatal("stop of a registered function reported false")
	}
	child, cancel := context.WithCancel(&x)
	defer cancel()
	waitDone(t, x.Done(), "the context")
	waitDone(t, ran, "the first AfterFunc")
	waitDone(t, ran2, "the second AfterFunc")
	waitDone(t, child.Done(), "the derived context")
	if !errors.Is(x.Err(), context.DeadlineExceeded) || !DeadlinePassed(&x) {
		t.Fatalf("Err() = %v after the deadline", x.Err())
	}
	late := make(chan struct{})
	if x.AfterFunc(func() { close(late) })() {
		t.Error("stop of a function registered after the end reported true")
	}
	waitDone(t, late, "an AfterFunc registered after the end")
}

// TestDeadlineCtxParentEnds: the parent's end (the downstream stream's)
// ends the context with the parent's error, through the parent's own
// AfterFunc when it has one, and through context.AfterFunc otherwise; the
// release lets go of the parent's registration.
func TestDeadlineCtxParentEnds(t *testing.T) {
	for _, own := range []bool{true, false} {
		pctx, pcancel := context.WithCancel(context.Background())
		ap := &afterParent{Context: pctx}
		parent := context.Context(pctx)
		if own {
			parent = ap
		}
		var x deadlineCtx
		x.start(parent, time.Hour)
		if own && ap.afters != 1 {
			t.Errorf("the parent's AfterFunc was called %d times, want 1", ap.afters)
		}
		ran := make(chan struct{})
		x.AfterFunc(func() { close(ran) })
		pcancel()
		waitDone(t, x.Done(), "the context")
		waitDone(t, ran, "the AfterFunc")
		if !errors.Is(x.Err(), context.Canceled) || DeadlinePassed(&x) {
			t.Errorf("own=%v: Err() = %v after the parent's cancel", own, x.Err())
		}
		x.release()
	}
	// A parent that ended already ends the context at once.
	pctx, pcancel := context.WithCancel(context.Background())
	pcancel()
	var x deadlineCtx
	x.start(pctx, time.Hour)
	waitDone(t, x.Done(), "the context of an ended parent")
	if x.timer != nil {
		t.Error("the context of an ended parent has a timer")
	}
}

// TestDeadlineCtxRelease: release ends the context as WithTimeout's
// cancel does (Canceled, not a timeout), stops its timer and unregisters
// it from its parent; a per-try context under the route's ends with it and
// takes the earlier deadline.
func TestDeadlineCtxRelease(t *testing.T) {
	pctx, pcancel := context.WithCancel(context.Background())
	defer pcancel()
	var route deadlineCtx
	route.start(pctx, time.Hour)
	try := &deadlineCtx{}
	try.start(&route, 2*time.Hour)
	rd, _ := route.Deadline()
	if td, _ := try.Deadline(); !td.Equal(rd) {
		t.Errorf("per-try deadline %v, want the route's earlier %v", td, rd)
	}
	route.release()
	waitDone(t, route.Done(), "the released context")
	waitDone(t, try.Done(), "the per-try context under it")
	if !errors.Is(route.Err(), context.Canceled) || DeadlinePassed(try) {
		t.Errorf("Err() = %v after release", route.Err())
	}
	if route.timer != nil || route.stopParent != nil {
		t.Error("the released context keeps its timer or its parent's registration")
	}
	route.release() // twice: nothing more
	if !errors.Is(route.Err(), context.Canceled) {
		t.Errorf("Err() = %v after a second release", route.Err())
	}
	// Released under a parent with its own AfterFunc, it unregisters
	// there, once.
	ap := &afterParent{Context: pctx}
	var own deadlineCtx
	own.start(ap, time.Hour)
	own.release()
	own.release()
	if ap.afters != 1 || ap.stops != 1 {
		t.Errorf("the parent's AfterFunc called %d times, its stop %d; want 1, 1", ap.afters, ap.stops)
	}
}
