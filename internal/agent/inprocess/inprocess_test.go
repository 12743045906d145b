package inprocess

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/agent/supervisor"
	"github.com/straitmesh/strait/internal/freeport"
	"github.com/straitmesh/strait/internal/proxy"
)

const timeout = 20 * time.Second

// ports are a proxy's admin port and its one listener's.
type ports struct{ admin, listener int }

func freePorts(t *testing.T) ports {
	t.Helper()
	ps, err := freeport.Ports("127.0.0.1", 2)
	if err != nil {
		t.Fatal(err)
	}
	return ports{ps[0], ps[1]}
}

// writeBootstrap writes a static bootstrap: the admin on p.admin and an
// HTTP listener on p.listener answering every request 200 "ok".
func writeBootstrap(t *testing.T, p ports) string {
	t.Helper()
	cfg := fmt.Sprintf(`node: {id: test, cluster: test}
admin: {address: {socket_address: {address: 127.0.0.1, port_value: %d}}}
static_resources:
  listeners:
  - name: http
    address: {socket_address: {address: 127.0.0.1, port_value: %d}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: http
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: {prefix: /}
                direct_response: {status: 200, body: {inline_string: ok}}
          http_filters:
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
`, p.admin, p.listener)
	path := filepath.Join(t.TempDir(), "envoy-rev.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// logTo sends the proxy's log to the test's log when it fails.
func logTo(t *testing.T) io.Writer {
	t.Helper()
	var b syncBuffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("proxy log:\n%s", b.String())
		}
	})
	return &b
}

// syncBuffer is a log the proxy's goroutines write to.
type syncBuffer struct {
	mu  sync.Mutex // guards buf
	buf strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// ready is the admin's GET /ready: status and body.
func ready(admin int) (int, string) {
	c := &http.Client{Timeout: time.Second}
	resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/ready", admin))
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

func waitReady(t *testing.T, admin int) {
	t.Helper()
	for deadline := time.Now().Add(timeout); ; time.Sleep(10 * time.Millisecond) {
		if code, _ := ready(admin); code == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the in-process proxy never answered /ready 200")
		}
	}
}

func waitExit(t *testing.T, proc supervisor.Process) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- proc.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(timeout):
		t.Fatal("the in-process proxy did not stop")
		return nil
	}
}

// get sends one request on a new connection to the listener.
func get(t *testing.T, port int) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	fmt.Fprint(c, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return fmt.Sprintf("%d %s", resp.StatusCode, b)
}

// Start, ready, serve, SIGTERM: the proxy drains (/ready answers 503
// DRAINING while a client's connection is open), stops once the
// connection is gone, and Wait returns nil; its ports are free again.
func TestStartServeDrainStop(t *testing.T) {
	p := freePorts(t)
	var built atomic.Pointer[proxy.Proxy]
	s := Starter{Stderr: logTo(t), OnStart: func(px *proxy.Proxy) { built.Store(px) }}
	proc, err := s.Start(supervisor.Command{Path: "/nonexistent/strait-proxy",
		Args: supervisor.ProxyArgs(writeBootstrap(t, p), 1, time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	waitReady(t, p.admin)
	if got := get(t, p.listener); got != "200 ok" {
		t.Fatalf("request through the in-process proxy: %q, want 200 ok", got)
	}
	if built.Load() == nil {
		t.Fatal("OnStart was not called")
	}

	// A keep-alive connection, idle after its response: the drain closes
	// it, and waits for it to be gone before the proxy stops.
	idle, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", p.listener))
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	fmt.Fprint(idle, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	r := bufio.NewReader(idle)
	_ = idle.SetDeadline(time.Now().Add(timeout))
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.ReadAll(resp.Body)
	resp.Body.Close()

	if err := proc.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(timeout); ; time.Sleep(10 * time.Millisecond) {
		if code, body := ready(p.admin); code == http.StatusServiceUnavailable && body == "DRAINING" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("/ready never answered 503 DRAINING after SIGTERM")
		}
	}
	// The drain closes the idle keep-alive connection.
	if _, err := r.ReadByte(); err == nil {
		t.Error("the idle connection got bytes instead of being closed by the drain")
	} else if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
		t.Error("the idle connection is still open after SIGTERM")
	}
	if err := waitExit(t, proc); err != nil {
		t.Fatalf("Wait after SIGTERM = %v, want nil", err)
	}
	for _, port := range []int{p.admin, p.listener} {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			t.Errorf("port %d still held after the proxy stopped: %v", port, err)
			continue
		}
		l.Close()
	}
}

// Kill ends a drain that would last the whole --drain-time-s: a client
// keeps a request open, and Kill makes the proxy quit at once.
func TestKillEndsDrain(t *testing.T) {
	p := freePorts(t)
	proc, err := Starter{Stderr: logTo(t)}.Start(supervisor.Command{
		Args: supervisor.ProxyArgs(writeBootstrap(t, p), 1, 10*time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	waitReady(t, p.admin)
	// A connection that sent half a request head: the drain waits for it.
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", p.listener))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprint(c, "GET / HTTP/1.1\r\nHost")
	if err := proc.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(timeout); ; time.Sleep(10 * time.Millisecond) {
		if code, _ := ready(p.admin); code == http.StatusServiceUnavailable {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("/ready never answered 503 after SIGTERM")
		}
	}
	if err := proc.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := waitExit(t, proc); err != nil {
		t.Fatalf("Wait after Kill = %v, want nil (Quit's clean stop)", err)
	}
	_ = c.SetReadDeadline(time.Now().Add(timeout))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Error("the half-sent request's connection got bytes; want it closed by the quit")
	} else if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
		t.Error("the connection is still open after Kill")
	}
}

// A proxy that cannot start (its admin port is taken; its bootstrap is
// missing) reports it through Wait, as an exec'd proxy's exit status
// does; a command line it refuses is Start's error.
func TestCrashIsWaitsError(t *testing.T) {
	p := freePorts(t)
	taken, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p.admin))
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	proc, err := Starter{Stderr: logTo(t)}.Start(supervisor.Command{Args: supervisor.ProxyArgs(writeBootstrap(t, p), 1, 0)})
	if err != nil {
		t.Fatal(err)
	}
	if err := waitExit(t, proc); err == nil || !strings.Contains(err.Error(), "admin") {
		t.Errorf("Wait with the admin port taken = %v, want an error naming the admin", err)
	}

	proc, err = Starter{Stderr: logTo(t)}.Start(supervisor.Command{Args: []string{"-c", filepath.Join(t.TempDir(), "missing.json")}})
	if err != nil {
		t.Fatal(err)
	}
	if err := waitExit(t, proc); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("Wait with no bootstrap = %v, want an error naming the file", err)
	}
	if err := proc.Signal(syscall.SIGHUP); err == nil {
		t.Error("Signal(SIGHUP) accepted; only SIGTERM and SIGINT are delivered")
	}

	for _, args := range [][]string{{}, {"-c", "x", "--drain-strategy", "gradual"}, {"-c", "x", "--concurrency", "two"}} {
		if _, err := (Starter{}).Start(supervisor.Command{Args: args}); err == nil {
			t.Errorf("Start(%q) accepted", args)
		}
	}
}

// The supervisor runs the in-process proxy as it runs a process: a
// proxy that fails to start (admin port taken) is counted and restarted
// with backoff, the restart serves once the port is free, and shutdown
// drains and stops it.
func TestSupervisorRestartsInProcessProxy(t *testing.T) {
	p := freePorts(t)
	taken, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p.admin))
	if err != nil {
		t.Fatal(err)
	}
	var drained atomic.Bool
	sup := supervisor.New(supervisor.Options{
		Command:            supervisor.Command{Path: "strait-proxy", Args: supervisor.ProxyArgs(writeBootstrap(t, p), 1, 5*time.Second)},
		Starter:            Starter{Stderr: logTo(t)},
		OnDrain:            func() { drained.Store(true) },
		DrainDuration:      10 * time.Millisecond,
		TerminateTimeout:   timeout,
		RestartBackoffBase: 10 * time.Millisecond,
		RestartBackoffMax:  50 * time.Millisecond,
		Logger:             slog.New(slog.DiscardHandler),
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- sup.Run(ctx) }()
	for deadline := time.Now().Add(timeout); sup.Restarts() < 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("Restarts() = %d with the admin port taken, want >= 2", sup.Restarts())
		}
	}
	taken.Close()
	waitReady(t, p.admin)
	if got := get(t, p.listener); got != "200 ok" {
		t.Fatalf("request after the restart: %q", got)
	}
	restarts := sup.Restarts()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
	case <-time.After(timeout):
		t.Fatal("the supervisor did not stop the in-process proxy")
	}
	if !drained.Load() {
		t.Error("OnDrain was not called")
	}
	if sup.Restarts() != restarts {
		t.Errorf("Restarts() %d → %d: the stop was counted as a crash", restarts, sup.Restarts())
	}
	if code, _ := ready(p.admin); code != 0 {
		t.Errorf("admin still answers (%d) after the supervisor stopped", code)
	}
}
