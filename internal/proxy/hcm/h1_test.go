package hcm

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"google.golang.org/protobuf/types/known/wrapperspb"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	filev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/straitmesh/strait/internal/freeport"
	"github.com/straitmesh/strait/internal/proxy/accesslog"
	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/http1"
	"github.com/straitmesh/strait/internal/proxy/pathnorm"
	"github.com/straitmesh/strait/internal/proxy/route"
	"github.com/straitmesh/strait/internal/proxy/stats"
)

var codecs = []Codec{CodecStrait}

type testProxy struct {
	addr     string
	clusters *cluster.Manager
	stats    *stats.Store
}

func staticCluster(name string, addrs ...string) *clusterv3.Cluster {
	var lbs []*endpointv3.LbEndpoint
	for _, a := range addrs {
		ap := netip.MustParseAddrPort(a)
		lbs = append(lbs, &endpointv3.LbEndpoint{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
			Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
				Address: ap.Addr().String(), PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(ap.Port())}}}}}}})
	}
	return &clusterv3.Cluster{
		Name:                 name,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		ConnectTimeout:       durationpb.New(time.Second),
		LoadAssignment:       &endpointv3.ClusterLoadAssignment{ClusterName: name, Endpoints: []*endpointv3.LocalityLbEndpoints{{LbEndpoints: lbs}}},
	}
}

// startProxy runs an HCM on loopback: every request goes to cluster "be"
// (backend at beAddr), except /direct (a direct response) and /nowhere (an
// unknown cluster).
func startProxy(t testing.TB, codec Codec, beAddr string) *testProxy {
	return startProxyLog(t, codec, beAddr, slog.New(slog.DiscardHandler))
}

func startProxyLog(t testing.TB, codec Codec, beAddr string, log *slog.Logger) *testProxy {
	t.Helper()
	return startProxyFilter(t, codec, beAddr, log, nil)
}

// startProxyFilter is startProxyLog with the Filter's access log set.
func startProxyFilter(t testing.TB, codec Codec, beAddr string, log *slog.Logger, logs accesslog.Loggers) *testProxy {
	t.Helper()
	return startProxyFilterWith(t, codec, beAddr, log, logs, nil)
}

// startProxyFilterWith is startProxyFilter with mut (when not nil)
// changing the Filter before it serves.
func startProxyFilterWith(t testing.TB, codec Codec, beAddr string, log *slog.Logger, logs accesslog.Loggers, mut func(*Filter)) *testProxy {
	t.Helper()
	st := stats.New()
	cm := cluster.NewManager(log, st)
	if err := cm.AddStatic([]*clusterv3.Cluster{staticCluster("be", beAddr)}); err != nil {
		t.Fatal(err)
	}
	table, err := route.Compile(&routev3.RouteConfiguration{Name: "r", VirtualHosts: []*routev3.VirtualHost{{
		Name: "all", Domains: []string{"*"},
		Routes: []*routev3.Route{
			{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: "/direct"}},
				Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{Status: 200,
					Body: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: "direct"}}}}},
			{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: "/nowhere"}},
				Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "missing"}}}},
			// Istio's default retry policy, for BenchmarkProxy/retry.
			{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/retry/"}},
				Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "be"},
					RetryPolicy: &routev3.RetryPolicy{RetryOn: "connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes",
						NumRetries: wrapperspb.UInt32(2), RetriableStatusCodes: []uint32{503}, HostSelectionRetryMaxAttempts: 5}}}},
			{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
				Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "be"}}}},
		},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(Options{Logger: log, Clusters: cm, Codec: codec})
	f := &Filter{StatPrefix: "test", inline: table, AccessLog: logs}
	f.UseStats(st) // the request path with its counters, as the listener sets it up
	if mut != nil {
		mut(f)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.ServeConn(c, f, netip.AddrPort{}, cluster.OriginalSource{})
		}
	}()
	t.Cleanup(func() { ln.Close(); s.Close() })
	return &testProxy{addr: ln.Addr().String(), clusters: cm, stats: st}
}

// echoBackend answers with what it saw: method, path, selected headers and
// a digest of the body; /stream answers chunked, /big with 1 MiB.
func echoBackend(t testing.TB) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/early" {
			// Answer without reading the body.
			w.Header().Set("Connection", "close")
			w.WriteHeader(http.StatusRequestEntityTooLarge)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(500)
			return
		}
		sum := sha256.Sum256(body)
		w.Header().Set("X-Seen-Method", r.Method)
		w.Header().Set("X-Seen-Uri", r.RequestURI)
		w.Header().Set("X-Seen-Host", r.Host)
		w.Header().Set("X-Seen-Len", strconv.Itoa(len(body)))
		w.Header().Set("X-Seen-Sum", hex.EncodeToString(sum[:8]))
		w.Header().Set("X-Seen-Request-Id", r.Header.Get("X-Request-Id"))
		w.Header().Set("X-Seen-Proto", r.Header.Get("X-Forwarded-Proto"))
		w.Header().Set("X-Seen-Foo", r.Header.Get("X-Foo"))
		w.Header().Set("X-Seen-Te", strings.Join(r.TransferEncoding, ","))
		switch r.URL.Path {
		case "/stream":
			w.Header().Set("Trailer", "X-Trailer")
			for i := 0; i < 3; i++ {
				fmt.Fprintf(w, "part%d;", i)
				w.(http.Flusher).Flush()
			}
			w.Header().Set("X-Trailer", "done")
		case "/big":
			w.Header().Set("Content-Length", strconv.Itoa(1<<20))
			w.Write([]byte(strings.Repeat("b", 1<<20)))
		case "/status":
			code, _ := strconv.Atoi(r.URL.Query().Get("code"))
			w.WriteHeader(code)
		default:
			w.Write([]byte("ok"))
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func forEachCodec(t *testing.T, f func(t *testing.T, codec Codec)) {
	for _, c := range codecs {
		t.Run(string(c), func(t *testing.T) { f(t, c) })
	}
}

func TestProxyRequests(t *testing.T) {
	forEachCodec(t, func(t *testing.T, codec Codec) {
		be := echoBackend(t)
		p := startProxy(t, codec, be.Listener.Addr().String())
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
		defer client.CloseIdleConnections()
		big := strings.Repeat("x", 3<<20)
		sum := sha256.Sum256([]byte(big))
		bigSum := hex.EncodeToString(sum[:8])

		tests := []struct {
			name    string
			req     func() *http.Request
			status  int
			body    string
			headers map[string]string
		}{
			{name: "get", req: func() *http.Request {
				r, _ := http.NewRequest("GET", "http://"+p.addr+"/a?b=c", nil)
				r.Host = "svc.example"
				r.Header.Set("Connection", "X-Foo")
				r.Header.Set("X-Foo", "hop")
				return r
			}, status: 200, body: "ok", headers: map[string]string{
				"X-Seen-Uri": "/a?b=c", "X-Seen-Host": "svc.example", "X-Seen-Proto": "http", "X-Seen-Foo": ""}},
			{name: "request id kept", req: func() *http.Request {
				r, _ := http.NewRequest("GET", "http://"+p.addr+"/", nil)
				r.Header.Set("X-Request-Id", "abc")
				r.Header.Set("X-Forwarded-Proto", "https")
				return r
			}, status: 200, body: "ok", headers: map[string]string{"X-Seen-Request-Id": "abc", "X-Seen-Proto": "https"}},
			{name: "post large body", req: func() *http.Request {
				r, _ := http.NewRequest("POST", "http://"+p.addr+"/up", strings.NewReader(big))
				return r
			}, status: 200, body: "ok", headers: map[string]string{"X-Seen-Len": strconv.Itoa(len(big)), "X-Seen-Sum": bigSum}},
			{name: "post chunked body", req: func() *http.Request {
				r, _ := http.NewRequest("POST", "http://"+p.addr+"/up", io.MultiReader(strings.NewReader(big)))
				return r
			}, status: 200, body: "ok", headers: map[string]string{"X-Seen-Len": strconv.Itoa(len(big)), "X-Seen-Sum": bigSum, "X-Seen-Te": "chunked"}},
			{name: "chunked response, its trailer dropped", req: func() *http.Request {
				r, _ := http.NewRequest("GET", "http://"+p.addr+"/stream", nil)
				return r
			}, status: 200, body: "part0;part1;part2;"},
			{name: "big response", req: func() *http.Request {
				r, _ := http.NewRequest("GET", "http://"+p.addr+"/big", nil)
				return r
			}, status: 200, body: strings.Repeat("b", 1<<20)},
			{name: "head", req: func() *http.Request {
				r, _ := http.NewRequest("HEAD", "http://"+p.addr+"/big", nil)
				return r
			}, status: 200, headers: map[string]string{"Content-Length": strconv.Itoa(1 << 20)}},
			{name: "upstream status", req: func() *http.Request {
				r, _ := http.NewRequest("GET", "http://"+p.addr+"/status?code=418", nil)
				return r
			}, status: 418},
			{name: "no content", req: func() *http.Request {
				r, _ := http.NewRequest("GET", "http://"+p.addr+"/status?code=204", nil)
				return r
			}, status: 204},
			// The upload stays under what the proxy drains after an error
			// reply (maxLingerBytes): past it the proxy closes on unread
			// bytes, the client's write fails with a reset, and net/http's
			// client returns that error or the 413, whichever of its
			// goroutines reports first (under load: the error).
			{name: "early answer to a large upload", req: func() *http.Request {
				r, _ := http.NewRequest("POST", "http://"+p.addr+"/early", strings.NewReader(strings.Repeat("x", maxLingerBytes/2)))
				return r
			}, status: 413},
			{name: "direct", req: func() *http.Request {
				r, _ := http.NewRequest("GET", "http://"+p.addr+"/direct", nil)
				return r
			}, status: 200, body: "direct"},
			{name: "no cluster", req: func() *http.Request {
				r, _ := http.NewRequest("GET", "http://"+p.addr+"/nowhere", strings.NewReader("body"))
				return r
			}, status: 503, headers: map[string]string{"X-Strait-Response-Flags": "NC"}},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				for i := 0; i < 2; i++ { // the second time on a pooled connection
					resp, err := client.Do(tc.req())
					if err != nil {
						t.Fatal(err)
					}
					body, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					if err != nil {
						t.Fatal(err)
					}
					if resp.StatusCode != tc.status || string(body) != tc.body {
						t.Fatalf("got %d %.40q, want %d %.40q", resp.StatusCode, body, tc.status, tc.body)
					}
					for k, v := range tc.headers {
						if got := resp.Header.Get(k); got != v {
							t.Errorf("%s = %q, want %q", k, got, v)
						}
					}
					if tc.name == "get" && len(resp.Header.Get("X-Seen-Request-Id")) != 36 {
						t.Errorf("x-request-id %q is not a UUID", resp.Header.Get("X-Seen-Request-Id"))
					}
					// HTTP/1.1 trailers don't cross (forward/trailers.go), as with
					// Envoy's enable_trailers unset.
					if tc.name == "chunked response, its trailer dropped" && len(resp.Trailer) != 0 {
						t.Errorf("trailer %v, want none", resp.Trailer)
					}
				}
			})
		}
		cs := p.stats.Cluster("be")
		if cs.RqTotal.Load() == 0 {
			t.Errorf("envoy_cluster_upstream_rq_total not counted")
		}
	})
}

// rawExchange writes raw bytes to the proxy and returns everything it
// answers until it closes the connection, or until complete says the
// answer is whole and then nothing more comes for 300 ms (a late extra
// response is still seen), or after 10 s. Waiting on complete rather than
// on a quiet spell alone: a second pipelined response can come later than
// any fixed gap on a loaded machine.
func rawExchange(t *testing.T, addr, raw string, complete func(string) bool) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	var out strings.Builder
	buf := make([]byte, 64<<10)
	for {
		if complete(out.String()) {
			c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		} else {
			c.SetReadDeadline(deadline)
		}
		n, err := c.Read(buf)
		out.Write(buf[:n])
		if err != nil {
			return out.String()
		}
	}
}

func TestProxyRawProtocol(t *testing.T) {
	be := echoBackend(t)
	// accept_http_10 for the HTTP/1.0 cases (TestHTTP10UpgradeRequired
	// covers the default, 426).
	p := startProxyFilterWith(t, CodecStrait, be.Listener.Addr().String(), slog.New(slog.DiscardHandler), nil, func(f *Filter) { f.acceptHTTP10 = true })
	tests := []struct {
		name     string
		raw      string
		contains []string
		count    string // substring that must appear exactly len(contains)... times
		n        int
	}{
		{name: "pipelined", raw: "GET /1 HTTP/1.1\r\nHost: h\r\n\r\nPOST /2 HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabcGET /3 HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
			contains: []string{"X-Seen-Uri: /1", "X-Seen-Uri: /2", "X-Seen-Len: 3", "X-Seen-Uri: /3", "connection: close"}, count: "HTTP/1.1 200", n: 3},
		{name: "header too large", raw: "GET / HTTP/1.1\r\nHost: h\r\nX: " + strings.Repeat("a", 70<<10) + "\r\n\r\n",
			contains: []string{"HTTP/1.1 431 "}},
		{name: "malformed", raw: "GET / HTTP/1.1\r\nHost h\r\n\r\n", contains: []string{"HTTP/1.1 400 "}},
		{name: "smuggling", raw: "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", contains: []string{"HTTP/1.1 400 "}},
		{name: "http/1.0", raw: "GET /x HTTP/1.0\r\n\r\n", contains: []string{"HTTP/1.1 200 ", "connection: close", "\r\n\r\nok"}},
		{name: "http/1.0 chunked upstream", raw: "GET /stream HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", contains: []string{"HTTP/1.1 200 ", "connection: close", "\r\n\r\npart0;part1;part2;"}},
		{name: "chunked request with trailer", raw: "POST /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;ext\r\nde\r\n0\r\nX-T: 1\r\n\r\nGET /after HTTP/1.1\r\nHost: h\r\n\r\n",
			contains: []string{"X-Seen-Len: 5", "X-Seen-Uri: /after"}, count: "HTTP/1.1 200", n: 2},
		{name: "absolute form", raw: "GET http://abs.example/p?q HTTP/1.1\r\nHost: other\r\n\r\n", contains: []string{"X-Seen-Host: abs.example", "X-Seen-Uri: /p?q"}},
		{name: "local reply keeps connection", raw: "POST /direct HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n\r\nbodyGET /direct HTTP/1.1\r\nHost: h\r\n\r\n",
			count: "\r\n\r\ndirect", n: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := rawExchange(t, p.addr, tc.raw, func(out string) bool {
				for _, s := range tc.contains {
					if !strings.Contains(out, s) {
						return false
					}
				}
				return tc.count == "" || strings.Count(out, tc.count) >= tc.n
			})
			for _, s := range tc.contains {
				if !strings.Contains(out, s) {
					t.Errorf("response lacks %q:\n%.2000s", s, out)
				}
			}
			if tc.count != "" && strings.Count(out, tc.count) != tc.n {
				t.Errorf("%d × %q, want %d:\n%.2000s", strings.Count(out, tc.count), tc.count, tc.n, out)
			}
		})
	}
}

// TestExpectContinue: the proxy answers 100-continue itself, also on a
// route with a retry policy, where the body is read whole to be
// replayable.
func TestExpectContinue(t *testing.T) {
	forEachCodec(t, func(t *testing.T, codec Codec) {
		for _, path := range []string{"/up", "/retry/up"} {
			expectContinue(t, codec, path)
		}
	})
}

func expectContinue(t *testing.T, codec Codec, path string) {
	{
		be := echoBackend(t)
		p := startProxy(t, codec, be.Listener.Addr().String())
		c, err := net.Dial("tcp", p.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = io.WriteString(c, "PUT "+path+" HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n") // a failed write shows in what the test reads back
		br := bufio.NewReader(c)
		line, err := br.ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100") {
			t.Fatalf("first line %q, %v; want 100 Continue", line, err)
		}
		for line != "\r\n" {
			if line, err = br.ReadString('\n'); err != nil {
				t.Fatal(err)
			}
		}
		_, _ = io.WriteString(c, "hello") // a failed write shows in what the test reads back
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body) // drained for reuse; the body is not under test
		if resp.StatusCode != 200 || resp.Header.Get("X-Seen-Len") != "5" {
			t.Fatalf("%s: status %d len %q", path, resp.StatusCode, resp.Header.Get("X-Seen-Len"))
		}
	}
}

// TestStaleUpstreamConnection: the upstream closes a keep-alive connection
// after each response without saying so; the next request on the pooled
// connection fails before any response byte and is retried on a new one.
func TestStaleUpstreamConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var wg sync.WaitGroup
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				br := bufio.NewReader(c)
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, req.Body)                                       // the request body is not under test
				_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok") // a failed write shows in what the test reads back
			}()
		}
	}()
	p := startProxy(t, CodecStrait, ln.Addr().String())
	client := &http.Client{}
	for i := 0; i < 5; i++ {
		code, body := mustGet(t, client, "http://"+p.addr+"/")
		if code != 200 || body != "ok" {
			t.Fatalf("request %d: %d %q", i, code, body)
		}
		time.Sleep(20 * time.Millisecond) // let the upstream's FIN arrive
	}
	ln.Close()
	wg.Wait()
}

func TestUpstreamDown(t *testing.T) {
	forEachCodec(t, func(t *testing.T, codec Codec) {
		// Nothing listens there, nor will: the port is outside the
		// kernel's ephemeral range.
		addr, err := freeport.Addr()
		if err != nil {
			t.Fatal(err)
		}
		p := startProxy(t, codec, addr)
		resp, err := http.Post("http://"+p.addr+"/", "text/plain", strings.NewReader("abc"))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body) // drained for reuse; the body is not under test
		resp.Body.Close()
		if resp.StatusCode != 503 || resp.Header.Get("X-Strait-Response-Flags") != "UF" {
			t.Fatalf("got %d %q", resp.StatusCode, resp.Header.Get("X-Strait-Response-Flags"))
		}
	})
}

func mustGet(t testing.TB, c *http.Client, url string) (int, string) {
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// rawBackend answers every request with the same 1 KiB response, without
// allocating, so that a benchmark's allocations are the proxy's.
func rawBackend(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	resp := []byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1024\r\n\r\n" + strings.Repeat("x", 1024))
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := http1.NewReader(c)
				defer r.Release()
				var req http1.Request
				for {
					head, err := r.ReadHead(http1.DefaultMaxHeadBytes)
					if err != nil || http1.ParseRequest(head, &req) != nil {
						return
					}
					if _, err := c.Write(resp); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// BenchmarkProxy measures one proxy hop per codec with a keep-alive
// connection and a 1 KiB response; client and backend don't allocate, so
// allocs/op are the proxy's.
//
//	go test -run '^$' -bench Proxy -benchmem ./internal/proxy/hcm/
func BenchmarkProxy(b *testing.B) {
	be := rawBackend(b)
	for _, bc := range []struct {
		codec  Codec
		name   string
		path   string
		logged bool
		// paths is Istio's DECODE_AND_MERGE_SLASHES normalization
		// (package pathnorm): a normal path must cost nothing more.
		paths bool
	}{{CodecStrait, "strait", "/bench", false, false}, {CodecStrait, "strait-retrypolicy", "/retry/bench", false, false},
		{CodecStrait, "strait-accesslog", "/bench", true, false}, {CodecStrait, "strait-pathnorm", "/bench/a.b/c", false, true},
		{CodecStrait, "strait-pathnorm-rewritten", "/bench/./a/../c", false, true}} {
		codec := bc.codec
		b.Run(bc.name, func(b *testing.B) {
			var logs accesslog.Loggers
			if bc.logged {
				logs = benchAccessLog(b)
			}
			var mut func(*Filter)
			if bc.paths {
				mut = func(f *Filter) {
					f.pathNorm, _ = pathnorm.PolicyOf(&hcmv3.HttpConnectionManager{NormalizePath: wrapperspb.Bool(true), MergeSlashes: true, PathWithEscapedSlashesAction: hcmv3.HttpConnectionManager_UNESCAPE_AND_FORWARD})
				}
			}
			p := startProxyFilterWith(b, codec, be, slog.New(slog.DiscardHandler), logs, mut)
			benchRequests(b, p.addr, []byte("GET "+bc.path+" HTTP/1.1\r\nHost: bench\r\nUser-Agent: bench\r\n\r\n"))
		})
	}
}

// benchRequests sends req over one connection to addr b.N times, each
// answered 200 with its body read: the request loop of the HTTP/1.1
// proxy benchmarks.
func benchRequests(b *testing.B, addr string, req []byte) {
	b.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	r := http1.NewReader(c)
	var resp http1.Response
	sink := make([]byte, 4096)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.Write(req); err != nil {
			b.Fatal(err)
		}
		head, err := r.ReadHead(http1.DefaultMaxHeadBytes)
		if err != nil {
			b.Fatal(err)
		}
		if err := http1.ParseResponse(head, &resp, false); err != nil || resp.Status != 200 {
			b.Fatalf("%v %d", err, resp.Status)
		}
		lr := http1.LengthReader{R: r, Left: resp.ContentLength}
		for lr.Left > 0 {
			if _, err := lr.Read(sink); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// benchAccessLog is Istio's file access log, in its default text
// format, to a temporary file.
func benchAccessLog(b *testing.B) accesslog.Loggers {
	b.Helper()
	files := accesslog.NewFiles(accesslog.FilesOptions{})
	b.Cleanup(func() { files.Close() })
	fl := &filev3.FileAccessLog{Path: filepath.Join(b.TempDir(), "access.log"), AccessLogFormat: &filev3.FileAccessLog_LogFormat{LogFormat: &corev3.SubstitutionFormatString{
		Format: &corev3.SubstitutionFormatString_TextFormatSource{TextFormatSource: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: istioLogFormat}}},
	}}}
	a, err := anypb.New(fl)
	if err != nil {
		b.Fatal(err)
	}
	logs, err := accesslog.Build([]*accesslogv3.AccessLog{{Name: accesslog.FileLoggerName, ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: a}}}, files)
	if err != nil {
		b.Fatal(err)
	}
	return logs
}

// istioLogFormat is Istio's default text format (pilot/pkg/model
// EnvoyTextLogFormat).
const istioLogFormat = "[%START_TIME%] \"%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% " +
	"%PROTOCOL%\" %RESPONSE_CODE% %RESPONSE_FLAGS% " +
	"%RESPONSE_CODE_DETAILS% %CONNECTION_TERMINATION_DETAILS% " +
	"\"%UPSTREAM_TRANSPORT_FAILURE_REASON%\" %BYTES_RECEIVED% %BYTES_SENT% " +
	"%DURATION% %RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% \"%REQ(X-FORWARDED-FOR)%\" " +
	"\"%REQ(USER-AGENT)%\" \"%REQ(X-REQUEST-ID)%\" \"%REQ(:AUTHORITY)%\" \"%UPSTREAM_HOST%\" " +
	"%UPSTREAM_CLUSTER_RAW% %UPSTREAM_LOCAL_ADDRESS% %DOWNSTREAM_LOCAL_ADDRESS% " +
	"%DOWNSTREAM_REMOTE_ADDRESS% %REQUESTED_SERVER_NAME% %ROUTE_NAME%\n"

// BenchmarkParseRequest measures the codec's head parsing alone.
func BenchmarkParseRequest(b *testing.B) {
	raw := "GET /api/v1/items?limit=10 HTTP/1.1\r\nHost: svc.ns.svc.cluster.local\r\nUser-Agent: wrk\r\nAccept: */*\r\nX-Request-Id: 3b1f0c5e-7d4b-4a8e-9a41-1f6c2c0d9e11\r\nX-B3-Traceid: 80f198ee56343ba864fe8b2a57d3eff7\r\n\r\n"
	b.ReportAllocs()
	b.SetBytes(int64(len(raw)))
	sr := strings.NewReader(raw)
	r := http1NewReader(sr)
	var req http1Request
	for i := 0; i < b.N; i++ {
		sr.Reset(raw)
		head, err := r.ReadHead(1 << 16)
		if err != nil {
			b.Fatal(err)
		}
		if err := http1ParseRequest(head, &req); err != nil {
			b.Fatal(err)
		}
	}
}

var (
	http1NewReader    = http1.NewReader
	http1ParseRequest = http1.ParseRequest
)

type http1Request = http1.Request

// panicCatcher is a slog.Handler that records error records (the
// connection goroutine logs recovered panics at error level).
type panicCatcher struct {
	mu  sync.Mutex
	msg []string
}

func (p *panicCatcher) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelError }
func (p *panicCatcher) Handle(_ context.Context, r slog.Record) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
	p.msg = append(p.msg, b.String())
	return nil
}
func (p *panicCatcher) WithAttrs([]slog.Attr) slog.Handler { return p }
func (p *panicCatcher) WithGroup(string) slog.Handler      { return p }

// FuzzProxy sends arbitrary bytes to the proxy as a client: whatever they
// are, the connection goroutine must not panic, and the proxy must still
// serve a well-formed request afterwards.
//
//	go test -run '^$' -fuzz FuzzProxy -fuzztime 60s ./internal/proxy/hcm/
func FuzzProxy(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: h\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabcGET /direct HTTP/1.1\r\nHost: h\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
		"GET http://x/ HTTP/1.0\r\nConnection: keep-alive, Host\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	catcher := &panicCatcher{}
	p := startProxyLog(f, CodecStrait, rawBackend(f), slog.New(catcher))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := net.Dial("tcp", p.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(2 * time.Second))
		_, _ = c.Write(data)              // a failed write shows in what the test reads back
		_ = c.(*net.TCPConn).CloseWrite() // a failed shutdown shows in what the test reads back
		_, _ = io.Copy(io.Discard, c)     // until the peer closes; its error is that close
		catcher.mu.Lock()
		msgs := catcher.msg
		catcher.mu.Unlock()
		if len(msgs) > 0 {
			t.Fatalf("proxy logged %q for input %q", msgs, data)
		}
	})
}
