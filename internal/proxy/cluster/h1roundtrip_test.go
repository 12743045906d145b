package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/proxy/tlsconf"
)

// Sequential requests share one upstream connection, whatever framing
// their responses have; each is counted in upstream_rq_total.
func TestRoundTripH1KeepAlive(t *testing.T) {
	be := newRawBackend(t, func(_ int, c net.Conn, br *bufio.Reader) {
		serveAll(c, br, func(r *http.Request) string {
			if r.URL.Path == "/chunked" {
				return "HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\nX-T: 1\r\n\r\n"
			}
			return okResponse("hello " + r.URL.Path)
		})
	})
	c := rtCluster(t, nil)
	for i, path := range []string{"/a", "/chunked", "/b", "/chunked", "/c"} {
		resp, body, err := do(t, c, be.addr, "GET", path, nil)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		want := "hello " + path
		if path == "/chunked" {
			want = "abcde"
			if resp.ContentLength != -1 || resp.Header.Get("Content-Length") != "" || resp.Header.Get("Transfer-Encoding") != "" {
				t.Errorf("chunked response: length %d, header %v", resp.ContentLength, resp.Header)
			}
		}
		if resp.StatusCode != 200 || resp.Status != "200 OK" || body != want {
			t.Errorf("request %d: %s %q, want 200 OK %q", i, resp.Status, body, want)
		}
		waitUntil(t, "the connection back in the pool", func() bool { return idleConns(c, be.addr) == 1 })
	}
	if n := be.accepted.Load(); n != 1 {
		t.Errorf("the upstream accepted %d connections, want 1", n)
	}
	if n := c.Stats.RqTotal.Load(); n != 5 {
		t.Errorf("upstream_rq_total = %d, want 5", n)
	}
}

// A response that ends its connection (Connection: close, HTTP/1.0
// without keep-alive, a body delimited by the close) leaves it closed:
// the next request has a new one.
func TestRoundTripH1ConnectionNotReused(t *testing.T) {
	for _, tc := range []struct {
		name, resp string
		closes     bool // the upstream closes after the response
	}{
		{"Connection: close", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", false},
		{"HTTP/1.0", "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", false},
		{"close-delimited", "HTTP/1.1 200 OK\r\n\r\nok", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			be := newRawBackend(t, func(_ int, c net.Conn, br *bufio.Reader) {
				for {
					if _, err := http.ReadRequest(br); err != nil {
						return
					}
					if _, err := io.WriteString(c, tc.resp); err != nil || tc.closes {
						return
					}
				}
			})
			c := rtCluster(t, nil)
			for i := range 2 {
				resp, body, err := do(t, c, be.addr, "GET", "/", nil)
				if err != nil || body != "ok" || !resp.Close {
					t.Fatalf("request %d: %v %q (close %v)", i, err, body, resp != nil && resp.Close)
				}
				// The proxy closed it (the upstream did not, but for
				// close-delimited).
				waitUntil(t, "the connection closed", func() bool { return be.open.Load() == 0 })
			}
			if n := be.accepted.Load(); n != 2 {
				t.Errorf("the upstream accepted %d connections, want 2", n)
			}
		})
	}
}

// staleBackend answers the first request of its first connection, then
// reads the second request (and its body) and closes without answering:
// a pooled connection the upstream closed as the request went out. Other
// connections answer every request. seen records each request as
// "conn:method path body".
func staleBackend(t *testing.T) (*rawBackend, func() []string) {
	var mu sync.Mutex
	var seen []string
	be := newRawBackend(t, func(n int, c net.Conn, br *bufio.Reader) {
		for i := 0; ; i++ {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			b, _ := io.ReadAll(req.Body)
			mu.Lock()
			seen = append(seen, fmt.Sprintf("%d:%s %s %s", n, req.Method, req.URL.Path, b))
			mu.Unlock()
			if n == 1 && i == 1 {
				return
			}
			if _, err := io.WriteString(c, okResponse(fmt.Sprint("conn ", n))); err != nil {
				return
			}
		}
	})
	return be, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

// A pooled connection that turns out closed before any response byte is
// replaced once for a request that can be sent again (a GET), counted
// once; a POST whose body was sent is not sent again.
func TestRoundTripH1StalePooledConnection(t *testing.T) {
	t.Run("GET retried", func(t *testing.T) {
		be, seen := staleBackend(t)
		c := rtCluster(t, nil)
		if _, body, err := do(t, c, be.addr, "GET", "/a", nil); err != nil || body != "conn 1" {
			t.Fatalf("first request: %v %q", err, body)
		}
		waitUntil(t, "the connection back in the pool", func() bool { return idleConns(c, be.addr) == 1 })
		_, body, err := do(t, c, be.addr, "GET", "/b", nil)
		if err != nil || body != "conn 2" {
			t.Fatalf("second request: %v %q, want the answer of a new connection", err, body)
		}
		want := []string{"1:GET /a ", "1:GET /b ", "2:GET /b "}
		if got := seen(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("the upstream saw %q, want %q", got, want)
		}
		if n := c.Stats.RqTotal.Load(); n != 2 {
			t.Errorf("upstream_rq_total = %d, want 2 (the replaced connection's request counted once)", n)
		}
	})
	for _, method := range []string{"POST", "PATCH"} {
		t.Run(method+" not replayed", func(t *testing.T) {
			be, seen := staleBackend(t)
			c := rtCluster(t, nil)
			if _, _, err := do(t, c, be.addr, "GET", "/a", nil); err != nil {
				t.Fatal(err)
			}
			waitUntil(t, "the connection back in the pool", func() bool { return idleConns(c, be.addr) == 1 })
			var body io.Reader // a bodiless PATCH is not idempotent either
			if method == "POST" {
				body = strings.NewReader("payload")
			}
			if _, got, err := do(t, c, be.addr, method, "/b", body); err == nil {
				t.Fatalf("%s on a connection closed under it: got %q, want an error", method, got)
			}
			want := []string{"1:GET /a ", "1:" + method + " /b "}
			if body != nil {
				want[1] += "payload"
			}
			if got := seen(); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("the upstream saw %q, want %q (sent once)", got, want)
			}
			if n := be.accepted.Load(); n != 1 {
				t.Errorf("the upstream accepted %d connections, want 1", n)
			}
		})
	}
}

// A request body of unknown length goes chunked, streamed while the
// response is read: an upstream that answers before the body ends gets
// its response relayed at once, and the rest of the body afterwards. Both
// messages complete, the connection is reused.
func TestRoundTripH1ChunkedBodyEarlyResponse(t *testing.T) {
	bodies := make(chan string, 2)
	heads := make(chan http.Header, 2)
	be := newRawBackend(t, func(_ int, c net.Conn, br *bufio.Reader) {
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			heads <- req.Header
			if _, err := io.WriteString(c, okResponse("early")); err != nil {
				return
			}
			b, err := io.ReadAll(req.Body)
			if err != nil {
				return
			}
			bodies <- fmt.Sprintf("%v %s", req.TransferEncoding, b)
		}
	})
	c := rtCluster(t, nil)
	pr, pw := io.Pipe()
	go func() { _, _ = pw.Write([]byte("hello ")) }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://svc/upload", pr)
	req.ContentLength = -1
	resp, err := c.RoundTrip(req, tcpEndpoint(be.addr))
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(b) != "early" {
		t.Fatalf("response before the body ended: %v %q", err, b)
	}
	if h := recv(t, heads); h.Get("Content-Length") != "" || h.Get("User-Agent") != "" {
		t.Errorf("request head %v: want no Content-Length and no User-Agent added", h)
	}
	select {
	case got := <-bodies:
		t.Fatalf("the upstream had the whole body (%q) before it ended", got)
	default:
	}
	if _, err := pw.Write([]byte("world")); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	if got := recv(t, bodies); got != "[chunked] hello world" {
		t.Errorf("the upstream got %q, want the chunked body \"hello world\"", got)
	}
	waitUntil(t, "the connection back in the pool", func() bool { return idleConns(c, be.addr) == 1 })
	// A body of known length goes with its Content-Length. The request's
	// context stays live until the upstream has the body: its end would
	// abort a body still being sent after the response (do cancels it as
	// it returns, which under load came before the body left).
	put, _ := http.NewRequestWithContext(t.Context(), "PUT", "http://svc/x", strings.NewReader("12345"))
	resp, err = c.RoundTrip(put, tcpEndpoint(be.addr))
	if err != nil {
		t.Fatalf("PUT: %v", err)
	}
	b, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(b) != "early" {
		t.Fatalf("PUT: %v %q", err, b)
	}
	if h := recv(t, heads); h.Get("Content-Length") != "5" {
		t.Errorf("PUT head: Content-Length %q, want 5", h.Get("Content-Length"))
	}
	if got := recv(t, bodies); got != "[] 12345" {
		t.Errorf("the upstream got %q", got)
	}
	if n := be.accepted.Load(); n != 1 {
		t.Errorf("the upstream accepted %d connections, want 1", n)
	}
}

// A response head past the limits is ErrResponseHeadTooLarge, a
// malformed one (or a 101 nobody asked for, or endless 1xx)
// ErrMalformedResponse: protocol errors (502 UPE).
func TestRoundTripH1BadResponseHead(t *testing.T) {
	var many strings.Builder
	for i := range MaxResponseHeaders + 1 {
		fmt.Fprintf(&many, "X-H%d: v\r\n", i)
	}
	for _, tc := range []struct {
		name, resp string
		want       error
	}{
		{"head too large", "HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("b", 61<<10) + "\r\nContent-Length: 0\r\n\r\n", ErrResponseHeadTooLarge},
		{"too many fields", "HTTP/1.1 200 OK\r\n" + many.String() + "\r\n", ErrResponseHeadTooLarge},
		{"malformed status", "HTTP/1.1 2x0 OK\r\nContent-Length: 0\r\n\r\n", ErrMalformedResponse},
		{"obs-fold", "HTTP/1.1 200 OK\r\nX-A: a\r\n b\r\nContent-Length: 0\r\n\r\n", ErrMalformedResponse},
		{"101 unasked", "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: upgrade\r\n\r\n", ErrMalformedResponse},
		{"endless 1xx", strings.Repeat("HTTP/1.1 102 Processing\r\n\r\n", 6) + "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", ErrMalformedResponse},
	} {
		t.Run(tc.name, func(t *testing.T) {
			be := newRawBackend(t, func(_ int, c net.Conn, br *bufio.Reader) {
				serveAll(c, br, func(*http.Request) string { return tc.resp })
			})
			c := rtCluster(t, nil)
			_, _, err := do(t, c, be.addr, "GET", "/", nil)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if errors.Is(tc.want, ErrResponseHeadTooLarge) && !IsResponseHeadTooLarge(err) {
				t.Errorf("IsResponseHeadTooLarge(%v) = false", err)
			}
			waitUntil(t, "the connection closed", func() bool { return be.open.Load() == 0 })
		})
	}
}

// Informational responses are skipped; a HEAD, 204 or 304 response has
// no body whatever it says, and leaves the connection reusable.
func TestRoundTripH1Bodiless(t *testing.T) {
	be := newRawBackend(t, func(_ int, c net.Conn, br *bufio.Reader) {
		serveAll(c, br, func(r *http.Request) string {
			switch {
			case r.Method == "HEAD":
				return "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n"
			case r.URL.Path == "/continue":
				return "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\n" + okResponse("final")
			case r.URL.Path == "/204":
				return "HTTP/1.1 204 No Content\r\n\r\n"
			case r.URL.Path == "/304":
				return "HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n"
			}
			return okResponse("got")
		})
	})
	c := rtCluster(t, nil)
	for _, tc := range []struct {
		method, path string
		status       int
		length       int64
		body         string
	}{
		{"HEAD", "/", 200, 1000, ""},
		{"GET", "/", 200, 3, "got"},
		{"POST", "/continue", 200, 5, "final"},
		{"GET", "/204", 204, 0, ""},
		{"GET", "/304", 304, 0, ""},
		{"GET", "/", 200, 3, "got"},
	} {
		resp, body, err := do(t, c, be.addr, tc.method, tc.path, nil)
		if err != nil {
			t.Fatalf("%s %s: %v", tc.method, tc.path, err)
		}
		if resp.StatusCode != tc.status || resp.ContentLength != tc.length || body != tc.body || resp.Header.Get("Link") != "" {
			t.Errorf("%s %s: %d (length %d) %q %v, want %d (length %d) %q", tc.method, tc.path, resp.StatusCode, resp.ContentLength, body, resp.Header, tc.status, tc.length, tc.body)
		}
		waitUntil(t, "the connection back in the pool", func() bool { return idleConns(c, be.addr) == 1 })
	}
	if n := be.accepted.Load(); n != 1 {
		t.Errorf("the upstream accepted %d connections, want 1", n)
	}
}

// The request's cancellation closes the upstream connection, while the
// response head is awaited and while its body is read; so does closing
// the body before its end. No connection stays open, and each gives its
// max_connections slot back.
func TestRoundTripH1Cancel(t *testing.T) {
	be := newRawBackend(t, func(_ int, c net.Conn, br *bufio.Reader) {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		if req.URL.Path == "/body" {
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 1048576\r\n\r\n"+strings.Repeat("x", 1000))
		}
		// Then nothing more, until the proxy closes the connection.
		_, _ = io.Copy(io.Discard, br)
	})
	c := rtCluster(t, nil)
	closed := func(what string) {
		t.Helper()
		waitUntil(t, what, func() bool { return be.open.Load() == 0 && c.breaker.conns.Load() == 0 })
	}

	t.Run("waiting for the head", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://svc/head", nil)
		done := make(chan error, 1)
		go func() {
			_, err := c.RoundTrip(req, tcpEndpoint(be.addr))
			done <- err
		}()
		waitUntil(t, "the request at the upstream", func() bool { return be.open.Load() == 1 })
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("got %v, want context.Canceled", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the cancelled request did not return")
		}
		closed("the connection closed")
	})
	t.Run("reading the body", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://svc/body", nil)
		resp, err := c.RoundTrip(req, tcpEndpoint(be.addr))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(resp.Body, make([]byte, 1000)); err != nil {
			t.Fatal(err)
		}
		cancel()
		if _, err := io.ReadAll(resp.Body); !errors.Is(err, context.Canceled) {
			t.Errorf("reading on after the cancellation: %v, want context.Canceled", err)
		}
		resp.Body.Close()
		closed("the connection closed")
	})
	t.Run("body closed early", func(t *testing.T) {
		resp, err := c.RoundTrip(httptest.NewRequest("GET", "http://svc/body", nil), tcpEndpoint(be.addr))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := resp.Body.Read(make([]byte, 10)); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		closed("the connection closed")
	})
	if n := idleConns(c, be.addr); n != 0 {
		t.Errorf("%d connections pooled", n)
	}
}

// An upstream that sends two responses to one request: the second never
// reaches the next request, whose connection is a new one.
func TestRoundTripH1UnsolicitedResponse(t *testing.T) {
	be := newRawBackend(t, func(n int, c net.Conn, br *bufio.Reader) {
		first := true
		serveAll(c, br, func(*http.Request) string {
			if n == 1 && first {
				first = false
				return okResponse("first") + okResponse("extra")
			}
			return okResponse(fmt.Sprint("conn ", n))
		})
	})
	c := rtCluster(t, nil)
	if _, body, err := do(t, c, be.addr, "GET", "/", nil); err != nil || body != "first" {
		t.Fatalf("first request: %v %q", err, body)
	}
	_, body, err := do(t, c, be.addr, "GET", "/", nil)
	if err != nil || body != "conn 2" {
		t.Fatalf("second request: %v %q, want \"conn 2\" (a new connection)", err, body)
	}
}

// max_requests_per_connection closes a connection after that many
// requests.
func TestRoundTripH1MaxRequestsPerConnection(t *testing.T) {
	be := newRawBackend(t, func(n int, c net.Conn, br *bufio.Reader) {
		serveAll(c, br, func(*http.Request) string { return okResponse(fmt.Sprint(n)) })
	})
	c := rtCluster(t, func(cfg *clusterv3.Cluster) {
		*cfg = *withHTTPOptions(&corev3.HttpProtocolOptions{MaxRequestsPerConnection: wrapperspb.UInt32(2)})
	})
	var got []string
	for range 5 {
		_, body, err := do(t, c, be.addr, "GET", "/", nil)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, body)
	}
	if fmt.Sprint(got) != "[1 1 2 2 3]" {
		t.Errorf("connections of the requests: %v, want [1 1 2 2 3]", got)
	}
}

// The request head: the request's Host, no User-Agent of the proxy's, the
// framing the proxy writes; fields that would break the head are refused
// before any connection is made.
func TestRoundTripH1RequestHead(t *testing.T) {
	heads := make(chan string, 4)
	be := newRawBackend(t, func(_ int, c net.Conn, br *bufio.Reader) {
		for {
			var head strings.Builder
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					return
				}
				head.WriteString(line)
				if line == "\r\n" {
					break
				}
			}
			heads <- head.String()
			if _, err := io.WriteString(c, okResponse("ok")); err != nil {
				return
			}
		}
	})
	c := rtCluster(t, nil)
	ctx := context.Background()
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://svc/p%20q?a=b", nil)
	req.Host = "example.com"
	req.Header = http.Header{"X-A": {"1", "2"}, "Content-Length": {"99"}, "Connection": {"x"}, "User-Agent": nil}
	if _, err := c.RoundTrip(req, tcpEndpoint(be.addr)); err != nil {
		t.Fatal(err)
	}
	head := recv(t, heads)
	for _, want := range []string{"POST /p%20q?a=b HTTP/1.1\r\nHost: example.com\r\n", "X-A: 1\r\nX-A: 2\r\n", "Content-Length: 0\r\n"} {
		if !strings.Contains(head, want) {
			t.Errorf("head %q lacks %q", head, want)
		}
	}
	for _, not := range []string{"99", "Connection", "User-Agent"} {
		if strings.Contains(head, not) {
			t.Errorf("head %q has %q", head, not)
		}
	}
	for _, bad := range []func(*http.Request){
		func(r *http.Request) { r.Header.Set("X-Inject", "a\r\nX-Evil: 1") },
		func(r *http.Request) { r.Header["Bad Name"] = []string{"v"} },
		func(r *http.Request) { r.Host = "a b" },
		func(r *http.Request) { r.Method = "GET /x" },
		func(r *http.Request) { r.URL.RawQuery = "a b" },
	} {
		r, _ := http.NewRequestWithContext(ctx, "GET", "http://svc/", nil)
		bad(r)
		if _, err := c.RoundTrip(r, tcpEndpoint(be.addr)); err == nil {
			t.Errorf("request %s %v %v %q sent", r.Method, r.URL, r.Header, r.Host)
		}
	}
	if n := be.accepted.Load(); n != 1 {
		t.Errorf("the upstream accepted %d connections, want 1", n)
	}
}

// A cluster whose transport socket is TLS sends its requests over TLS,
// on one pooled connection.
func TestRoundTripH1TLS(t *testing.T) {
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "tls %v", r.TLS != nil)
	}))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	defer srv.Close()
	tlsAny, err := anypb.New(&tlsv3.UpstreamTlsContext{Sni: "be.demo"})
	if err != nil {
		t.Fatal(err)
	}
	c := rtCluster(t, func(cfg *clusterv3.Cluster) {
		cfg.TransportSocket = &corev3.TransportSocket{Name: tlsconf.SocketTLS, ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: tlsAny}}
	})
	addr := strings.TrimPrefix(srv.URL, "https://")
	for range 3 {
		_, body, err := do(t, c, addr, "GET", "/", nil)
		if err != nil || body != "tls true" {
			t.Fatalf("%v %q", err, body)
		}
		waitUntil(t, "the connection back in the pool", func() bool { return idleConns(c, addr) == 1 })
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d TLS connections, want 1", n)
	}
}

// endlessBody is a request body that never ends; closed is closed when
// the round trip closes it (it stopped sending).
type endlessBody struct {
	closed chan struct{}
	once   sync.Once
}

func (b *endlessBody) Read(p []byte) (int, error) {
	select {
	case <-b.closed:
		return 0, io.ErrClosedPipe
	default:
	}
	clear(p)
	return len(p), nil
}

func (b *endlessBody) Close() error {
	b.once.Do(func() { close(b.closed) })
	return nil
}

// An upstream that answers before it read the request body and closes
// the connection: sending the body fails, and the response is still
// read whole (as net/http and forward/h1 read it), on a connection that
// is not reused.
func TestRoundTripH1AnswerBeforeBodyThenClose(t *testing.T) {
	be := newRawBackend(t, func(_ int, c net.Conn, br *bufio.Reader) {
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		// The head first, then (once the proxy read it) the body: the
		// proxy reads the body from the connection, not from what it
		// read with the head.
		_, _ = io.WriteString(c, "HTTP/1.1 413 Payload Too Large\r\nConnection: close\r\nContent-Length: 5\r\n\r\n")
		time.Sleep(50 * time.Millisecond)
		_, _ = io.WriteString(c, "large")
		// Closing with the body unread resets the connection.
	})
	c := rtCluster(t, nil)
	body := &endlessBody{closed: make(chan struct{})}
	req, _ := http.NewRequestWithContext(context.Background(), "POST", "http://svc/upload", body)
	req.ContentLength = 1 << 40
	resp, err := c.RoundTrip(req, tcpEndpoint(be.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	select {
	case <-body.closed: // the body part ended: the upstream stopped taking it
	case <-time.After(5 * time.Second):
		t.Fatal("the request body was still being sent")
	}
	got, err := io.ReadAll(resp.Body)
	if resp.StatusCode != 413 || err != nil || string(got) != "large" {
		t.Errorf("got %d %q %v, want 413 \"large\"", resp.StatusCode, got, err)
	}
	waitUntil(t, "the connection closed", func() bool { return c.breaker.conns.Load() == 0 })
}

// A request whose connection could not be made is not counted in
// upstream_rq_total: its dial failed (a connect error forward.RoundTrip
// answers 503 UF), or max_connections and max_pending_requests were full
// (ErrOverflow, 503 UO).
func TestRoundTripH1NoConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := ln.Addr().String()
	ln.Close()
	c := rtCluster(t, nil)
	_, _, err = do(t, c, refused, "GET", "/", nil)
	var ne *net.OpError
	if !errors.As(err, &ne) || ne.Op != "dial" {
		t.Errorf("refused: %v, want a dial error", err)
	}
	if n := c.Stats.RqTotal.Load(); n != 0 {
		t.Errorf("upstream_rq_total = %d after a failed connect, want 0", n)
	}

	// A request holds the one connection, waiting for its response.
	be := newRawBackend(t, func(_ int, c net.Conn, br *bufio.Reader) { _, _ = io.Copy(io.Discard, br) })
	c = rtCluster(t, func(cfg *clusterv3.Cluster) {
		cfg.CircuitBreakers = &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{
			MaxConnections: wrapperspb.UInt32(1), MaxPendingRequests: wrapperspb.UInt32(0)}}}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://svc/", nil)
		_, err := c.RoundTrip(req, tcpEndpoint(be.addr))
		done <- err
	}()
	waitUntil(t, "the first request at the upstream", func() bool { return be.open.Load() == 1 })
	if _, _, err := do(t, c, be.addr, "GET", "/", nil); !errors.Is(err, ErrOverflow) {
		t.Errorf("over max_connections: %v, want ErrOverflow", err)
	}
	if n := c.Stats.RqTotal.Load(); n != 1 {
		t.Errorf("upstream_rq_total = %d, want 1 (the overflowed request not counted)", n)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("the cancelled first request: %v", err)
	}
}
