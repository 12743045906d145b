package supervisor

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const timeout = 10 * time.Second

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// fakeStarter records starts and signals; each process exits when the
// test calls exit, or on SIGTERM if exitOnTerm.
type fakeStarter struct {
	mu         sync.Mutex
	events     []string
	procs      []*fakeProcess
	failAfter  int // Start fails once len(procs) reaches this (0 = never)
	attempts   int
	exitOnTerm bool
	started    chan *fakeProcess
}

type fakeProcess struct {
	s    *fakeStarter
	done chan error
	once sync.Once
}

func newFakeStarter(exitOnTerm bool) *fakeStarter {
	return &fakeStarter{exitOnTerm: exitOnTerm, started: make(chan *fakeProcess, 10)}
}

func (f *fakeStarter) event(e string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, e)
}

func (f *fakeStarter) Events() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.events...)
}

func (f *fakeStarter) Start(c Command) (Process, error) {
	f.mu.Lock()
	f.attempts++
	if f.failAfter > 0 && len(f.procs) >= f.failAfter {
		f.mu.Unlock()
		return nil, errors.New("no such file")
	}
	p := &fakeProcess{s: f, done: make(chan error, 1)}
	f.procs = append(f.procs, p)
	f.events = append(f.events, "start "+c.Path)
	f.mu.Unlock()
	f.started <- p
	return p, nil
}

func (p *fakeProcess) exit(err error) { p.once.Do(func() { p.done <- err }) }
func (p *fakeProcess) Wait() error    { return <-p.done }
func (p *fakeProcess) Signal(s os.Signal) error {
	p.s.event("signal " + s.String())
	if s == syscall.SIGTERM && p.s.exitOnTerm {
		p.exit(nil)
	}
	return nil
}
func (p *fakeProcess) Kill() error { p.s.event("kill"); p.exit(errors.New("killed")); return nil }

func (f *fakeStarter) nextStart(t *testing.T) *fakeProcess {
	t.Helper()
	select {
	case p := <-f.started:
		return p
	case <-time.After(timeout):
		t.Fatal("proxy not started in time")
		return nil
	}
}

func runAsync(ctx context.Context, s *Supervisor) <-chan error {
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	return done
}

func waitRun(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(timeout):
		t.Fatal("Run did not return in time")
		return nil
	}
}

func TestRestartThenDrainAndStop(t *testing.T) {
	f := newFakeStarter(true)
	var drained time.Time
	var drainMu sync.Mutex
	s := New(Options{
		Command:            Command{Path: "/bin/strait-proxy", Args: []string{"-c", "b.json"}},
		Starter:            f,
		OnDrain:            func() { f.event("drain"); drainMu.Lock(); drained = time.Now(); drainMu.Unlock() },
		DrainDuration:      50 * time.Millisecond,
		RestartBackoffBase: time.Millisecond,
		Logger:             quiet(),
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := runAsync(ctx, s)

	f.nextStart(t).exit(errors.New("exit status 1")) // crash
	f.nextStart(t)                                   // restarted
	if s.Restarts() != 1 {
		t.Errorf("Restarts() = %d, want 1", s.Restarts())
	}
	cancel()
	if err := waitRun(t, done); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	want := []string{"start /bin/strait-proxy", "start /bin/strait-proxy", "drain", "signal terminated"}
	if got := f.Events(); !reflect.DeepEqual(got, want) {
		t.Fatalf("events = %q, want %q", got, want)
	}
	drainMu.Lock()
	defer drainMu.Unlock()
	if since := time.Since(drained); since < 50*time.Millisecond {
		t.Errorf("SIGTERM came %v after drain began, want >= the drain duration", since)
	}
}

func TestKillAfterTerminateTimeout(t *testing.T) {
	f := newFakeStarter(false) // ignores SIGTERM
	s := New(Options{Command: Command{Path: "p"}, Starter: f, TerminateTimeout: 20 * time.Millisecond, Logger: quiet()})
	ctx, cancel := context.WithCancel(context.Background())
	done := runAsync(ctx, s)
	f.nextStart(t)
	cancel()
	if err := waitRun(t, done); err != nil {
		t.Fatal(err)
	}
	want := []string{"start p", "signal terminated", "kill"}
	if got := f.Events(); !reflect.DeepEqual(got, want) {
		t.Fatalf("events = %q, want %q", got, want)
	}
}

func TestFirstStartFailureIsAnError(t *testing.T) {
	s := New(Options{Command: Command{Path: "/missing/strait-proxy"}, Starter: failingStarter{}, Logger: quiet()})
	err := s.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "/missing/strait-proxy") {
		t.Fatalf("Run = %v, want an error naming the binary", err)
	}
}

type failingStarter struct{}

func (failingStarter) Start(Command) (Process, error) { return nil, os.ErrNotExist }

func TestRestartStartFailureRetries(t *testing.T) {
	f := newFakeStarter(true)
	f.failAfter = 1
	s := New(Options{Command: Command{Path: "p"}, Starter: f, RestartBackoffBase: time.Millisecond, RestartBackoffMax: 5 * time.Millisecond, Logger: quiet()})
	ctx, cancel := context.WithCancel(context.Background())
	done := runAsync(ctx, s)
	f.nextStart(t).exit(nil)
	// Later starts fail; the supervisor keeps retrying until shutdown.
	deadline := time.Now().Add(timeout)
	for {
		f.mu.Lock()
		n := f.attempts
		f.mu.Unlock()
		if n >= 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d start attempts", n)
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := waitRun(t, done); err != nil {
		t.Fatal(err)
	}
}

func TestProxyArgs(t *testing.T) {
	got := ProxyArgs("/etc/istio/proxy/envoy-rev.json", 2, 45*time.Second)
	want := []string{"-c", "/etc/istio/proxy/envoy-rev.json", "--concurrency", "2", "--drain-time-s", "45"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ProxyArgs = %q, want %q", got, want)
	}
	if got := ProxyArgs("b.json", 0, 0); len(got) != 4 {
		t.Errorf("ProxyArgs without drain time = %q", got)
	}
}
