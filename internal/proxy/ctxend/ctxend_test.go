package ctxend

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// ctx is a context made of a Core, as its owners make one.
type ctx struct{ Core }

func (*ctx) Deadline() (time.Time, bool) { return time.Time{}, false }
func (*ctx) Value(any) any               { return nil }

var _ context.Context = (*ctx)(nil)

// isClosed reports whether ch is closed, without waiting.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestDone: Done asked for before the end is open, the same channel each
// time, and closes at the end; asked for only after the end, it is closed.
func TestDone(t *testing.T) {
	var c Core
	done := c.Done()
	if done == nil || isClosed(done) {
		t.Fatal("Done before the end is nil or closed")
	}
	if c.Done() != done {
		t.Error("a second Done is another channel")
	}
	if c.Err() != nil {
		t.Errorf("Err before the end = %v", c.Err())
	}
	c.End(context.DeadlineExceeded, nil)
	if !isClosed(done) || c.Done() != done {
		t.Error("the channel Done gave is not closed by the end, or Done changed it")
	}
	var late Core
	late.End(nil, nil)
	if d := late.Done(); d == nil || !isClosed(d) {
		t.Error("Done asked for only after the end is not closed")
	}
}

// TestEndOnce: End ends with its error (Canceled for nil), once: a second
// End reports false, runs no hook and leaves the first error; the hook
// runs under the lock, after the error is set.
func TestEndOnce(t *testing.T) {
	var c Core
	hooked := 0
	if !c.End(context.DeadlineExceeded, func() {
		hooked++
		if !errors.Is(c.ErrLocked(), context.DeadlineExceeded) {
			t.Errorf("ErrLocked in the hook = %v", c.ErrLocked())
		}
		if !c.mu.TryLock() {
			return
		}
		c.mu.Unlock()
		t.Error("the hook ran without the lock held")
	}) {
		t.Fatal("the first End reported false")
	}
	if c.End(context.Canceled, func() { hooked++ }) {
		t.Error("a second End reported true")
	}
	if hooked != 1 {
		t.Errorf("hooks ran %d times, want 1", hooked)
	}
	if !errors.Is(c.Err(), context.DeadlineExceeded) {
		t.Errorf("Err = %v after a second End, want the first's", c.Err())
	}

	var n Core
	n.Lock()
	if n.ErrLocked() != nil {
		t.Error("ErrLocked before the end is not nil")
	}
	n.Unlock()
	if !n.End(nil, nil) || !errors.Is(n.Err(), context.Canceled) {
		t.Errorf("End(nil) ended with %v, want context.Canceled", n.Err())
	}
	n.Lock()
	if !errors.Is(n.ErrLocked(), context.Canceled) {
		t.Errorf("ErrLocked after the end = %v", n.ErrLocked())
	}
	n.Unlock()
}

// TestAfterFunc: what AfterFunc registered runs once at the end, each on
// its own goroutine, but what stop unregistered; stop reports whether it
// unregistered, once. A stop of a function that left the first slot does
// not stop the function that took the slot after it (the generation
// counter). After the end AfterFunc runs its function at once and its
// stop reports false.
func TestAfterFunc(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			c   Core
			mu  sync.Mutex
			ran []string
		)
		reg := func(name string) func() bool {
			return c.AfterFunc(func() { mu.Lock(); ran = append(ran, name); mu.Unlock() })
		}
		stopA := reg("a") // the first slot
		if c.first == nil || len(c.afters) != 0 {
			t.Error("the first function went to the slice, not to the first slot")
		}
		reg("b") // the slice, from here
		stopC := reg("c")
		reg("d")
		stopE := reg("e")
		if !stopC() || stopC() {
			t.Error("stop of c: want true, then false")
		}
		if !stopE() || stopE() {
			t.Error("stop of e, the last: want true, then false")
		}
		if !stopA() || stopA() {
			t.Error("stop of the first: want true, then false")
		}
		stopF := reg("f") // the first slot again
		if stopA() {
			t.Error("a stale stop stopped the function that took the first slot after")
		}
		synctest.Wait()
		if len(ran) != 0 {
			t.Fatalf("%v ran before the end", ran)
		}
		c.End(nil, nil)
		synctest.Wait()
		slices.Sort(ran)
		if want := []string{"b", "d", "f"}; !slices.Equal(ran, want) {
			t.Errorf("ran %v, want %v", ran, want)
		}
		if stopF() {
			t.Error("stop of a function that ran reported true")
		}
		stopG := reg("g")
		synctest.Wait()
		if !slices.Contains(ran, "g") {
			t.Error("a function registered after the end did not run")
		}
		if stopG() {
			t.Error("stop of a function registered after the end reported true")
		}
	})
}

// TestContext: a context made of a Core is what context.WithCancel's
// children and context.AfterFunc see as their parent: they end with it,
// registered through its AfterFunc, and their stop and cancel unregister.
func TestContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		x := &ctx{}
		child, cancelChild := context.WithCancel(x)
		defer cancelChild()
		gone, cancelGone := context.WithCancel(x)
		cancelGone()
		after := false
		context.AfterFunc(x, func() { after = true })
		stopped := context.AfterFunc(x, func() { t.Error("a stopped context.AfterFunc ran") })
		if !stopped() {
			t.Error("context.AfterFunc's stop reported false")
		}
		x.Lock()
		left := len(x.afters)
		if x.first != nil {
			left++
		}
		x.Unlock()
		if left != 2 {
			t.Errorf("%d functions registered after a child's cancel and a stop, want 2 (the child's, the AfterFunc's)", left)
		}
		x.End(nil, nil)
		synctest.Wait()
		if !isClosed(child.Done()) || !errors.Is(child.Err(), context.Canceled) || !after {
			t.Errorf("the child (Err %v) or the AfterFunc (ran %v) did not end with the context", child.Err(), after)
		}
		if gone.Err() == nil {
			t.Error("a cancelled child is not ended")
		}
	})
}

// TestConcurrent: registrations, stops and reads racing the end (for
// -race): each function not stopped runs once.
func TestConcurrent(t *testing.T) {
	for range 50 {
		var (
			c    Core
			runs sync.WaitGroup
			regs sync.WaitGroup
			mu   sync.Mutex
			want int
			got  int
		)
		for i := range 8 {
			regs.Add(1)
			go func() {
				defer regs.Done()
				_ = c.Done()
				runs.Add(1)
				stop := c.AfterFunc(func() { mu.Lock(); got++; mu.Unlock(); runs.Done() })
				if i%2 == 0 && stop() {
					runs.Done()
					return
				}
				mu.Lock()
				want++
				mu.Unlock()
				_ = c.Err()
			}()
		}
		c.End(nil, nil)
		regs.Wait()
		runs.Wait()
		if got != want {
			t.Fatalf("%d functions ran, want %d", got, want)
		}
	}
}
