package lifecycle

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestFirstFailureStopsAll(t *testing.T) {
	g, ctx := New(context.Background())
	stopped := make(chan struct{})
	g.Go("waiter", func(ctx context.Context) error {
		<-ctx.Done()
		close(stopped)
		return ctx.Err()
	})
	g.Go("broken", func(context.Context) error { return errors.New("boom") })
	err := g.Wait()
	if err == nil || err.Error() != "broken: boom" {
		t.Fatalf("Wait = %v, want %q", err, "broken: boom")
	}
	select {
	case <-stopped:
	default:
		t.Fatal("the other part was not stopped")
	}
	if ctx.Err() == nil {
		t.Fatal("the group's context is not done after Wait")
	}
}

func TestStopAndParentCancelAreNotFailures(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	g, _ := New(parent)
	g.Go("a", func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() })
	g.Go("b", func(ctx context.Context) error { <-ctx.Done(); return nil })
	cancel()
	if err := g.Wait(); err != nil {
		t.Fatalf("Wait after the parent was cancelled = %v, want nil", err)
	}

	g, _ = New(context.Background())
	g.Go("a", func(ctx context.Context) error { <-ctx.Done(); return context.Canceled })
	g.Stop()
	if err := g.Wait(); err != nil {
		t.Fatalf("Wait after Stop = %v, want nil", err)
	}
}

func TestOnlyTheFirstFailureIsReported(t *testing.T) {
	g, _ := New(context.Background())
	first := make(chan struct{})
	g.Go("one", func(context.Context) error { defer close(first); return errors.New("first") })
	g.Go("two", func(ctx context.Context) error {
		<-first
		<-ctx.Done()
		return errors.New("second")
	})
	err := g.Wait()
	if err == nil || !strings.HasPrefix(err.Error(), "one: first") {
		t.Fatalf("Wait = %v, want the first failure", err)
	}
	g.Fail("late", errors.New("after wait"))
	if err2 := g.Wait(); !errors.Is(err2, err) || err2.Error() != err.Error() {
		t.Fatalf("a failure after Wait replaced the result: %v", err2)
	}
}

func TestFailWithoutParts(t *testing.T) {
	g, ctx := New(context.Background())
	g.Fail("setup", errors.New("bad flag"))
	select {
	case <-ctx.Done():
	case <-time.After(time.Second):
		t.Fatal("Fail did not cancel the context")
	}
	if err := g.Wait(); err == nil || err.Error() != "setup: bad flag" {
		t.Fatalf("Wait = %v", err)
	}
}
