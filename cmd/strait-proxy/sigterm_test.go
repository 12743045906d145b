package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/freeport"
)

// The test binary doubles as strait-proxy (TestMain), so that the SIGTERM
// test sends a real signal to a real process.
func TestMain(m *testing.M) {
	if os.Getenv("STRAIT_PROXY_TEST_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// processGone reports whether pid has exited (it may be a zombie).
func processGone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	f := strings.Fields(string(b))
	return len(f) > 2 && f[2] == "Z"
}

func freePort(t *testing.T) int {
	p, err := freeport.Port("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// SIGTERM: /ready turns 503 DRAINING, the request in progress finishes
// with connection: close, an idle keep-alive connection is closed, and the
// process exits 0 once no connection is left, well before --drain-time-s.
func TestSIGTERMDrainsThenExits(t *testing.T) {
	release, arrived := make(chan struct{}), make(chan struct{}, 1)
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			arrived <- struct{}{}
			<-release
		}
		_, _ = io.WriteString(w, "ok")
	}))
	defer be.Close()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	bePort := be.Listener.Addr().(*net.TCPAddr).Port
	adminPort, lnPort := freePort(t), freePort(t)
	cfg := fmt.Sprintf(`node: {id: test, cluster: test}
admin: {address: {socket_address: {address: 127.0.0.1, port_value: %d}}}
static_resources:
  clusters:
  - name: backend
    type: STATIC
    connect_timeout: 2s
    load_assignment:
      cluster_name: backend
      endpoints:
      - lb_endpoints:
        - endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: %d}}}
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
                route: {cluster: backend}
          http_filters:
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
`, adminPort, bePort, lnPort)
	path := filepath.Join(t.TempDir(), "bootstrap.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-c", path, "--concurrency", "1", "--drain-time-s", "60", "--log-level", "info")
	cmd.Env = append(os.Environ(), "STRAIT_PROXY_TEST_MAIN=1")
	logf, err := os.Create(filepath.Join(t.TempDir(), "proxy.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("strait-proxy log:\n%s", b)
		}
	}()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Kill() // no-op once it exited
	}()
	admin := fmt.Sprintf("http://127.0.0.1:%d", adminPort)
	ready := func() (int, string) {
		resp, err := http.Get(admin + "/ready")
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if code, _ := ready(); code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("strait-proxy never became ready")
		}
	}

	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", lnPort))
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(20 * time.Second))
		return c, bufio.NewReader(c)
	}
	roundTrip := func(c net.Conn, r *bufio.Reader, path string, wait func()) *http.Response {
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: svc\r\n\r\n", path)
		if wait != nil {
			wait()
		}
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp
	}
	idle, idleR := dial()
	defer idle.Close()
	if resp := roundTrip(idle, idleR, "/", nil); resp.StatusCode != 200 || resp.Close {
		t.Fatalf("before SIGTERM: %d close=%t", resp.StatusCode, resp.Close)
	}
	busy, busyR := dial()
	defer busy.Close()
	resp := roundTrip(busy, busyR, "/slow", func() {
		<-arrived
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if code, body := ready(); code == 503 && strings.TrimSpace(body) == "DRAINING" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("/ready never said DRAINING after SIGTERM")
			}
		}
		// The idle keep-alive connection is closed by the drain.
		idle.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := idleR.ReadByte(); err == nil {
			t.Error("idle connection got bytes instead of being closed")
		} else if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
			t.Error("idle connection still open after SIGTERM")
		}
		if processGone(cmd.Process.Pid) {
			t.Error("strait-proxy exited with a request in progress")
		}
		close(release)
	})
	if resp.StatusCode != 200 || !resp.Close {
		t.Errorf("in-flight request after SIGTERM: %d close=%t, want 200 with connection: close", resp.StatusCode, resp.Close)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("strait-proxy exit: %v, want status 0", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("strait-proxy still running with no connection left (drain time 60 s)")
	}
}
