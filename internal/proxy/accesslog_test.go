package proxy

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/straitmesh/strait/internal/proxy/bootstrap"
)

// TestAccessLog serves through a static bootstrap whose HCM and tcp_proxy
// log to one file (with Istio-style text formats), and finds a line per
// request with its code, flags, cluster and host: a 200 over HTTP/1.1
// and over HTTP/2, NR (no route), UF (nothing listens upstream), a
// chunked upload's body bytes, and a TCP connection with its bytes.
func TestAccessLog(t *testing.T) {
	up := backend(t, "hello")
	live := strings.TrimPrefix(up.URL, "http://")
	dead := freeAddr(t)
	httpAddr, tcpAddr := freeAddr(t), freeAddr(t)
	logPath := filepath.Join(t.TempDir(), "access.log")
	split := func(a string) (string, string) { h, p, _ := net.SplitHostPort(a); return h, p }
	lh, lp := split(live)
	dh, dp := split(dead)
	hh, hp := split(httpAddr)
	th, tp := split(tcpAddr)
	logCfg := func(format string) string {
		return fmt.Sprintf(`[{name: envoy.access_loggers.file, typed_config: {"@type": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog, path: %q, log_format: {text_format_source: {inline_string: %q}}}}]`, logPath, format)
	}
	cfg := fmt.Sprintf(`
admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}
static_resources:
  clusters:
  - {name: live, type: STATIC, connect_timeout: 1s, load_assignment: {cluster_name: live, endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: %s, port_value: %s}}}}]}]}}
  - {name: dead, type: STATIC, connect_timeout: 1s, load_assignment: {cluster_name: dead, endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: %s, port_value: %s}}}}]}]}}
  listeners:
  - name: http
    address: {socket_address: {address: %s, port_value: %s}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: http
          access_log: %s
          route_config:
            virtual_hosts:
            - {name: ok, domains: [ok], routes: [{name: to-live, match: {prefix: /}, route: {cluster: live}}]}
            - {name: down, domains: [down], routes: [{match: {prefix: /}, route: {cluster: dead}}]}
          http_filters: [{name: envoy.filters.http.router, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}]
  - name: tcp
    address: {socket_address: {address: %s, port_value: %s}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.tcp_proxy
        typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy, stat_prefix: tcp, cluster: live, access_log: %s}
`, lh, lp, dh, dp, hh, hp,
		logCfg(`http "%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%" %RESPONSE_CODE% %RESPONSE_FLAGS% %RESPONSE_CODE_DETAILS% %BYTES_RECEIVED% %BYTES_SENT% %UPSTREAM_CLUSTER% "%UPSTREAM_HOST%" %ROUTE_NAME% "%REQ(:AUTHORITY)%" "%REQ(USER-AGENT)%" "%RESP(CONTENT-TYPE)%"`+"\n"),
		th, tp, logCfg(`tcp %RESPONSE_FLAGS% %BYTES_RECEIVED% %BYTES_SENT% %UPSTREAM_CLUSTER% %UPSTREAM_HOST% %DOWNSTREAM_LOCAL_ADDRESS%`+"\n"))
	b, err := bootstrap.Parse([]byte(cfg))
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(Options{Bootstrap: b, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			p.Close()
		}
	})

	do := func(c *http.Client, method, host string, body io.Reader) int {
		t.Helper()
		req, _ := http.NewRequest(method, "http://"+httpAddr+"/p?q=1", body)
		req.Host = host
		req.Header.Set("User-Agent", "test-agent")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, host, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	h1 := &http.Client{Timeout: 5 * time.Second}
	if code := do(h1, "GET", "ok", nil); code != 200 {
		t.Fatalf("ok: %d", code)
	}
	if code := do(h1, "GET", "nowhere", nil); code != 404 {
		t.Fatalf("no route: %d", code)
	}
	if code := do(h1, "GET", "down", nil); code != 503 {
		t.Fatalf("dead upstream: %d", code)
	}
	// A chunked upload (no Content-Length).
	if code := do(h1, "POST", "ok", io.MultiReader(strings.NewReader("12345"), strings.NewReader("678"))); code != 200 {
		t.Fatalf("upload: %d", code)
	}
	h2 := &http.Client{Timeout: 5 * time.Second, Transport: &http2.Transport{AllowHTTP: true,
		DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}}}
	if code := do(h2, "GET", "ok", nil); code != 200 {
		t.Fatalf("h2: %d", code)
	}
	conn, err := net.Dial("tcp", tcpAddr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	tcpReply, _ := io.ReadAll(conn)
	conn.Close()

	// The TCP connection is logged when the proxy sees it close, and the
	// file is flushed every second.
	waitFor(t, 10*time.Second, "the tcp connection's line", func() bool {
		data, _ := os.ReadFile(logPath)
		return strings.Contains(string(data), "tcp ")
	})
	closed = true
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	want := []string{
		`http "GET /p?q=1 HTTP/1.1" 200 - via_upstream 0 5 live "` + live + `" to-live "ok" "test-agent" "text/plain; charset=utf-8"`,
		`http "GET /p?q=1 HTTP/1.1" 404 NR route_not_found 0 0 - "-" - "nowhere" "test-agent" "-"`,
		`http "GET /p?q=1 HTTP/1.1" 503 UF upstream_reset_before_response_started{connection_failure} 0 91 dead "` + dead + `" - "down" "test-agent" "-"`,
		`http "POST /p?q=1 HTTP/1.1" 200 - via_upstream 8 5 live "` + live + `" to-live "ok" "test-agent" "text/plain; charset=utf-8"`,
		`http "GET /p?q=1 HTTP/2" 200 - via_upstream 0 5 live "` + live + `" to-live "ok" "test-agent" "text/plain; charset=utf-8"`,
		fmt.Sprintf("tcp - 46 %d live %s %s", len(tcpReply), live, tcpAddr),
	}
	if len(lines) != len(want) {
		t.Fatalf("log has %d lines, want %d:\n%s", len(lines), len(want), data)
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("line %d:\n got %s\nwant %s", i, lines[i], want[i])
		}
	}
}
