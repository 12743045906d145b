package hcm

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/testreq"
)

// These tests are the regressions of the HTTP/1.1 connection-handling
// defects: raw-socket clients and backends on loopback, with the exact
// bytes, run against strait-proxy and, where nginx behaves correctly,
// against nginx in front of the same backend as a reference.

// TestLateUpstreamBytesNeverReachAnotherClient is defect 1: a backend that
// answers 204 and 300 ms later writes a second response on the same
// connection. The pooled connection must be retired; later clients get
// their own responses, never PWNED!.
func TestLateUpstreamBytesNeverReachAnotherClient(t *testing.T) {
	be := newScriptBackend(t, func(b *beReq) bool {
		if b.path == "/trick" {
			b.write("HTTP/1.1 204 No Content\r\n\r\n")
			time.Sleep(300 * time.Millisecond)
			b.write("HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nPWNED!")
			return true
		}
		b.write("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		return true
	})
	for _, tg := range targets(t, be.addr, proxyConfig{}, "", true) {
		t.Run(tg.name, func(t *testing.T) {
			resp, _, _, err := exchange(t, tg.addr, "GET /trick HTTP/1.1\r\nHost: h\r\n\r\n")
			if err != nil || resp.StatusCode != 204 {
				t.Fatalf("first request: %v %v", resp, err)
			}
			time.Sleep(600 * time.Millisecond) // the late response arrives
			for i := 0; i < 5; i++ {
				resp, body, _, err := exchange(t, tg.addr, "GET /ok HTTP/1.1\r\nHost: h\r\n\r\n")
				if err != nil || resp.StatusCode != 200 || body != "ok" {
					t.Fatalf("client %d got %v %q %v (another client's response)", i, resp, body, err)
				}
			}
		})
	}
}

// TestBadRequestBodyAbortsExchange is defect 2: a chunked body with a bad
// chunk size, or a client closing mid-upload, after the head went
// upstream. The proxy answers 400 (or just closes), closes the upstream
// connection, and nothing is left behind.
func TestBadRequestBodyAbortsExchange(t *testing.T) {
	be := newScriptBackend(t, func(b *beReq) bool {
		if _, err := b.body(); err != nil {
			return false
		}
		b.write("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		return true
	})
	for _, tg := range targets(t, be.addr, proxyConfig{}, "", true) {
		t.Run(tg.name, func(t *testing.T) {
			check := noLeaks(t)
			for _, size := range []string{" 5", "-5", "0x5", "123456789abcdef012"} {
				for i := 0; i < 10; i++ {
					// The head and the first chunk go first so that the
					// head is forwarded before the bad size arrives.
					c, err := net.Dial("tcp", tg.addr)
					if err != nil {
						t.Fatal(err)
					}
					c.SetDeadline(time.Now().Add(10 * time.Second))
					_, _ = io.WriteString(c, "POST /up HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n") // a failed write shows in what the test reads back
					time.Sleep(5 * time.Millisecond)
					_, _ = io.WriteString(c, size+"\r\nhello\r\n0\r\n\r\n") // a failed write shows in what the test reads back
					resp, _, err := readResp(c, bufio.NewReader(c))
					if err != nil || resp.StatusCode != 400 {
						t.Fatalf("chunk size %q: %v %v, want 400", size, resp, err)
					}
					if !closedSoon(c) {
						t.Fatalf("chunk size %q: connection not closed after 400", size)
					}
					c.Close()
				}
			}
			for i := 0; i < 10; i++ {
				c, err := net.Dial("tcp", tg.addr)
				if err != nil {
					t.Fatal(err)
				}
				_, _ = io.WriteString(c, "POST /up HTTP/1.1\r\nHost: h\r\nContent-Length: 100\r\n\r\n0123456789") // a failed write shows in what the test reads back
				time.Sleep(5 * time.Millisecond)
				c.Close()
			}
			if !waitFor(func() bool { return be.inRequest.Load() == 0 }) {
				t.Fatalf("%d upstream requests still open after their clients failed", be.inRequest.Load())
			}
			if tg.name == "strait" {
				check()
			}
		})
	}
}

// TestClientGoneCancelsUpstream is defect 2/3: a client that gives up while
// the backend never answers; the upstream request is cancelled.
func TestClientGoneCancelsUpstream(t *testing.T) {
	be := newScriptBackend(t, func(b *beReq) bool {
		b.c.SetReadDeadline(time.Now().Add(20 * time.Second))
		_, _ = io.Copy(io.Discard, b.c) // until the proxy closes; its error is that close
		return false
	})
	for _, tg := range targets(t, be.addr, proxyConfig{}, "", true) {
		t.Run(tg.name, func(t *testing.T) {
			check := noLeaks(t)
			for i := 0; i < 5; i++ {
				c, err := net.Dial("tcp", tg.addr)
				if err != nil {
					t.Fatal(err)
				}
				_, _ = io.WriteString(c, "GET /hang HTTP/1.1\r\nHost: h\r\n\r\n") // a failed write shows in what the test reads back
				waitFor(func() bool { return be.inRequest.Load() > 0 })
				c.Close()
			}
			if !waitFor(func() bool { return be.inRequest.Load() == 0 }) {
				t.Fatalf("%d upstream requests still open after their clients left", be.inRequest.Load())
			}
			if tg.name == "strait" {
				check()
			}
		})
	}
}

// TestTimeouts is defect 3: Envoy's timeouts with local replies.
func TestTimeouts(t *testing.T) {
	be := newScriptBackend(t, func(b *beReq) bool {
		switch b.path {
		case "/hang":
			b.c.SetReadDeadline(time.Now().Add(20 * time.Second))
			_, _ = io.Copy(io.Discard, b.c) // until the peer closes; its error is that close
			return false
		case "/late":
			time.Sleep(800 * time.Millisecond)
		case "/upload":
			if _, err := b.body(); err != nil {
				return false
			}
		}
		b.write("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		return true
	})
	short := 300 * time.Millisecond
	lim := DefaultLimits()
	lim.RequestHeadersTimeout = short
	lim.IdleTimeout = short
	strait := startStrait(t, be.addr, proxyConfig{limits: &lim})
	idle := DefaultLimits()
	idle.StreamIdleTimeout = short
	straitIdle := startStrait(t, be.addr, proxyConfig{limits: &idle})
	straitRoute := startStrait(t, be.addr, proxyConfig{routeTimeout: short})

	t.Run("request headers timeout", func(t *testing.T) {
		check := noLeaks(t)
		resp, _, c, err := exchange(t, strait, "GET / HTTP/1.1\r\nHost: h\r\n")
		if err != nil || resp.StatusCode != 408 {
			t.Fatalf("got %v %v, want 408", resp, err)
		}
		if !closedSoon(c) {
			t.Fatal("connection not closed")
		}
		c.Close()
		check()
	})
	t.Run("idle timeout", func(t *testing.T) {
		resp, _, c, err := exchange(t, strait, "GET / HTTP/1.1\r\nHost: h\r\n\r\n")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("got %v %v", resp, err)
		}
		if !closedSoon(c) {
			t.Fatal("idle connection not closed")
		}
	})
	t.Run("stream idle timeout", func(t *testing.T) {
		check := noLeaks(t)
		resp, _, c, err := exchange(t, straitIdle, "GET /hang HTTP/1.1\r\nHost: h\r\n\r\n")
		if err != nil || resp.StatusCode != 408 || resp.Header.Get("X-Strait-Response-Flags") != "SI" {
			t.Fatalf("got %v %v, want 408 SI", resp, err)
		}
		c.Close()
		if !waitFor(func() bool { return be.inRequest.Load() == 0 }) {
			t.Fatal("upstream request not cancelled")
		}
		check()
	})
	t.Run("route timeout", func(t *testing.T) {
		resp, body, c, err := exchange(t, straitRoute, "GET /hang HTTP/1.1\r\nHost: h\r\n\r\n")
		if err != nil || resp.StatusCode != 504 || resp.Header.Get("X-Strait-Response-Flags") != "UT" || body != "upstream request timeout" {
			t.Fatalf("got %v %q %v, want 504 UT", resp, body, err)
		}
		c.Close()
		if !waitFor(func() bool { return be.inRequest.Load() == 0 }) {
			t.Fatal("upstream request not cancelled")
		}
	})
	t.Run("request timeout", func(t *testing.T) {
		// request_timeout bounds receiving the whole request, body
		// included (408), not the wait for the response.
		lim := DefaultLimits()
		lim.RequestTimeout = short
		p := startStrait(t, be.addr, proxyConfig{limits: &lim})
		check := noLeaks(t)
		resp, body, c, err := exchange(t, p, "POST /upload HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\nabc")
		if err != nil || resp.StatusCode != 408 || body != "request timeout" {
			t.Fatalf("a body still arriving after request_timeout: %v %q %v, want 408 \"request timeout\"", resp, body, err)
		}
		if !closedSoon(c) {
			t.Fatal("connection not closed after 408")
		}
		c.Close()
		if !waitFor(func() bool { return be.inRequest.Load() == 0 }) {
			t.Fatal("upstream request not aborted")
		}
		check()
		resp, body, _, err = exchange(t, p, "GET /late HTTP/1.1\r\nHost: h\r\n\r\n")
		if err != nil || resp.StatusCode != 200 || body != "ok" {
			t.Fatalf("a complete request answered after request_timeout: %v %q %v, want 200", resp, body, err)
		}
	})
	t.Run("route idle timeout", func(t *testing.T) {
		// The route's idle_timeout replaces the HCM's stream_idle_timeout,
		// shorter (408 SI) or longer (the slow answer arrives).
		p := startStrait(t, be.addr, proxyConfig{routeIdle: short})
		resp, _, c, err := exchange(t, p, "GET /hang HTTP/1.1\r\nHost: h\r\n\r\n")
		if err != nil || resp.StatusCode != 408 || resp.Header.Get("X-Strait-Response-Flags") != "SI" {
			t.Fatalf("route idle_timeout %v: %v %v, want 408 SI", short, resp, err)
		}
		c.Close()
		if !waitFor(func() bool { return be.inRequest.Load() == 0 }) {
			t.Fatal("upstream request not cancelled")
		}
		idle := DefaultLimits()
		idle.StreamIdleTimeout = short
		p = startStrait(t, be.addr, proxyConfig{limits: &idle, routeIdle: 3 * time.Second})
		resp, body, _, err := exchange(t, p, "GET /late HTTP/1.1\r\nHost: h\r\n\r\n")
		if err != nil || resp.StatusCode != 200 || body != "ok" {
			t.Fatalf("route idle_timeout 3s over stream_idle_timeout %v: %v %q %v, want the answer after 800 ms", short, resp, body, err)
		}
	})
	t.Run("max connection duration and requests", func(t *testing.T) {
		lim := DefaultLimits()
		lim.MaxConnectionDuration = short
		lim.MaxRequestsPerConnection = 2
		p := startStrait(t, be.addr, proxyConfig{limits: &lim})
		c, err := net.Dial("tcp", p)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(c)
		for i, want := range []bool{false, true} {
			_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: h\r\n\r\n") // a failed write shows in what the test reads back
			resp, _, err := readResp(c, br)
			if err != nil || resp.Close != want {
				t.Fatalf("request %d: %v %v, want close=%v (max_requests_per_connection 2)", i+1, resp, err, want)
			}
		}
		c2, _, c, err2 := exchange(t, p, "GET / HTTP/1.1\r\nHost: h\r\n\r\n")
		if err2 != nil || c2.Close {
			t.Fatalf("got %v %v", c2, err2)
		}
		if !closedSoon(c) {
			t.Fatal("connection open past max_connection_duration")
		}
	})
	t.Run("nginx reference", func(t *testing.T) {
		if !nginxInstalled() {
			testreq.Missing(t, "nginx not installed")
		}
		ng := nginxProxy(t, be.addr, "client_header_timeout 300ms; keepalive_timeout 300ms; proxy_read_timeout 300ms;")
		_, _, c, _ := exchange(t, ng, "GET / HTTP/1.1\r\nHost: h\r\n")
		if !closedSoon(c) {
			t.Error("nginx: half-sent head held")
		}
		resp, _, _, err := exchange(t, ng, "GET /hang HTTP/1.1\r\nHost: h\r\n\r\n")
		if err != nil || resp.StatusCode != 504 {
			t.Errorf("nginx: %v %v, want 504", resp, err)
		}
	})
}

// TestHeadLimits: max_headers_count and max_request_headers_kb.
func TestHeadLimits(t *testing.T) {
	be := newScriptBackend(t, func(b *beReq) bool {
		b.write("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		return true
	})
	lim := DefaultLimits()
	lim.MaxHeadersCount = 10
	lim.MaxRequestHeadBytes = 8 << 10
	p := startStrait(t, be.addr, proxyConfig{limits: &lim})
	resp, _, _, err := exchange(t, p, "GET / HTTP/1.1\r\nHost: h\r\n"+strings.Repeat("X-A: 1\r\n", 10)+"\r\n")
	if err != nil || resp.StatusCode != 431 {
		t.Fatalf("11 headers: %v %v, want 431", resp, err)
	}
	resp, _, _, err = exchange(t, p, "GET / HTTP/1.1\r\nHost: h\r\nX-A: "+strings.Repeat("a", 9<<10)+"\r\n\r\n")
	if err != nil || resp.StatusCode != 431 {
		t.Fatalf("9 KiB head: %v %v, want 431", resp, err)
	}
	resp, _, _, err = exchange(t, p, "GET / HTTP/1.1\r\nHost: h\r\n"+strings.Repeat("X-A: 1\r\n", 9)+"\r\n")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("10 headers: %v %v, want 200", resp, err)
	}
}

// TestNoReplayOfProcessedPost is defect 4: a POST that reached the backend
// on a reused connection, which then closed without answering, is not sent
// again.
func TestNoReplayOfProcessedPost(t *testing.T) {
	be := newScriptBackend(t, func(b *beReq) bool {
		_, _ = b.body() // consumed; its content is not under test
		if b.path == "/post-once" {
			return false // read it, then close without answering
		}
		b.write("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		return true
	})
	for _, tg := range targets(t, be.addr, proxyConfig{}, "", true) {
		t.Run(tg.name, func(t *testing.T) {
			before := be.count("/post-once")
			c, err := net.Dial("tcp", tg.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			br := bufio.NewReader(c)
			_, _ = io.WriteString(c, "GET /warm HTTP/1.1\r\nHost: h\r\n\r\n") // a failed write shows in what the test reads back
			if resp, _, err := readResp(c, br); err != nil || resp.StatusCode != 200 {
				t.Fatalf("warm-up: %v %v", resp, err)
			}
			_, _ = io.WriteString(c, "POST /post-once HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc") // a failed write shows in what the test reads back
			resp, _, err := readResp(c, br)
			if err != nil || resp.StatusCode < 502 || resp.StatusCode > 503 {
				t.Fatalf("got %v %v, want 502/503", resp, err)
			}
			if tg.name == "strait" && resp.Header.Get("X-Strait-Response-Flags") != "UC" {
				t.Errorf("flags %q, want UC", resp.Header.Get("X-Strait-Response-Flags"))
			}
			if n := be.count("/post-once") - before; n != 1 {
				t.Fatalf("the backend received the POST %d times, want 1", n)
			}
		})
	}
}

// TestReusedConnectionFailsBeforeResponse is defect 4, the race the idle
// check cannot see: the upstream takes a request on a reused connection
// and closes it. An idempotent request that got no response byte is sent
// again on a new connection (net/http's rule; the upstream may have closed
// the connection while the request was on its way); one that got part of
// a response is not, and neither is a POST (TestNoReplayOfProcessedPost).
func TestReusedConnectionFailsBeforeResponse(t *testing.T) {
	var mu sync.Mutex
	perConn := map[net.Conn]int{} // requests seen on each upstream connection
	be := newScriptBackend(t, func(b *beReq) bool {
		mu.Lock()
		perConn[b.c]++
		n := perConn[b.c]
		mu.Unlock()
		if n >= 2 {
			switch b.path {
			case "/get-close":
				return false // read it, then close without a byte
			case "/partial":
				b.write("HTTP/1.1 200 OK\r\n")
				return false
			case "/partial-reset":
				// A reset rather than a FIN: a network error, which alone
				// would be retryable; the byte that came decides.
				b.write("HTTP/1.1 200 OK\r\n")
				time.Sleep(200 * time.Millisecond)  // read by the proxy before the reset
				_ = b.c.(*net.TCPConn).SetLinger(0) // fails only on a closed connection, which then resets anyway
				return false
			}
		}
		b.write("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		return true
	})
	p := startStrait(t, be.addr, proxyConfig{})
	send := func(path string) (*http.Response, string, error) {
		c, err := net.Dial("tcp", p)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(c)
		_, _ = io.WriteString(c, "GET /warm HTTP/1.1\r\nHost: h\r\n\r\n") // a failed write shows in what the test reads back
		if resp, _, err := readResp(c, br); err != nil || resp.StatusCode != 200 {
			t.Fatalf("warm-up: %v %v", resp, err)
		}
		// The pooled connection now carries its second request.
		_, _ = io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: h\r\n\r\n") // a failed write shows in what the test reads back
		return readResp(c, br)
	}
	resp, body, err := send("/get-close")
	if err != nil || resp.StatusCode != 200 || body != "ok" {
		t.Fatalf("GET closed on before any response byte: %v %q %v, want 200 from a new connection", resp, body, err)
	}
	if n := be.count("/get-close"); n != 2 {
		t.Fatalf("the backend received the GET %d times, want 2 (sent again once)", n)
	}
	for _, path := range []string{"/partial", "/partial-reset"} {
		resp, _, err = send(path)
		if err != nil || resp.StatusCode < 502 || resp.StatusCode > 503 {
			t.Fatalf("GET %s: %v %v, want 502/503", path, resp, err)
		}
		if n := be.count(path); n != 1 {
			t.Fatalf("the backend received GET %s %d times after a partial response, want 1", path, n)
		}
	}
}

// TestStreamingPostOnClosedPooledConn is defect 4: the backend closes after
// each response without saying so; a POST whose body is still streaming
// must go out on a fresh connection, not fail.
func TestStreamingPostOnClosedPooledConn(t *testing.T) {
	be := newScriptBackend(t, func(b *beReq) bool {
		body, err := b.body()
		if err != nil {
			return false
		}
		b.write(fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body))
		return false // close without Connection: close
	})
	for _, tg := range targets(t, be.addr, proxyConfig{}, "", true) {
		t.Run(tg.name, func(t *testing.T) {
			for i := 0; i < 20; i++ {
				c, err := net.Dial("tcp", tg.addr)
				if err != nil {
					t.Fatal(err)
				}
				c.SetDeadline(time.Now().Add(10 * time.Second))
				_, _ = io.WriteString(c, "POST /s HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\nhello ") // a failed write shows in what the test reads back
				time.Sleep(10 * time.Millisecond)
				_, _ = io.WriteString(c, "world") // a failed write shows in what the test reads back
				resp, body, err := readResp(c, bufio.NewReader(c))
				c.Close()
				if err != nil || resp.StatusCode != 200 || body != "hello world" {
					t.Fatalf("request %d: %v %q %v", i, resp, body, err)
				}
				time.Sleep(10 * time.Millisecond) // the backend's FIN arrives
			}
		})
	}
}

// TestSmallDefects is defect 6.
func TestSmallDefects(t *testing.T) {
	be := newScriptBackend(t, func(b *beReq) bool {
		switch b.path {
		case "/dup-length":
			b.write("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!")
			return false
		case "/bad-header":
			b.write("HTTP/1.1 200 OK\r\nBad Header\r\nContent-Length: 2\r\n\r\nok")
			return false
		}
		body, err := b.body()
		if err != nil {
			return false
		}
		var seen strings.Builder
		for _, h := range b.req.Headers {
			fmt.Fprintf(&seen, "%s=%s;", h.Name, h.Value)
		}
		b.write(fmt.Sprintf("HTTP/1.1 200 OK\r\nX-Seen-Host: %s\r\nContent-Length: %d\r\n\r\n%s", b.header("Host"), len(seen.String())+len(body), seen.String()+string(body)))
		return true
	})
	for _, tg := range targets(t, be.addr, proxyConfig{}, "", true) {
		t.Run(tg.name, func(t *testing.T) {
			t.Run("Connection names Host", func(t *testing.T) {
				resp, _, _, err := exchange(t, tg.addr, "GET / HTTP/1.1\r\nHost: h\r\nConnection: Host\r\n\r\n")
				if err != nil || resp.StatusCode != 200 || resp.Header.Get("X-Seen-Host") != "h" {
					t.Fatalf("got %v %v, want the Host forwarded", resp, err)
				}
			})
			t.Run("userinfo", func(t *testing.T) {
				resp, body, _, err := exchange(t, tg.addr, "GET http://user:secret@example.com/x HTTP/1.1\r\nHost: example.com\r\n\r\n")
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(body, "secret") || strings.Contains(resp.Header.Get("X-Seen-Host"), "secret") {
					t.Fatalf("userinfo forwarded: %q %q", resp.Header.Get("X-Seen-Host"), body)
				}
			})
			t.Run("expect 100-continue", func(t *testing.T) {
				c, err := net.Dial("tcp", tg.addr)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				_, _ = io.WriteString(c, "PUT /up HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n") // a failed write shows in what the test reads back
				br := bufio.NewReader(c)
				c.SetReadDeadline(time.Now().Add(time.Second)) // curl waits 1 s
				line, err := br.ReadString('\n')
				if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100") {
					t.Fatalf("got %q %v, want 100 Continue", line, err)
				}
				_, _ = br.ReadString('\n') // the rest of the 100 Continue head; the response is checked below
				c.SetDeadline(time.Now().Add(10 * time.Second))
				_, _ = io.WriteString(c, "hello") // a failed write shows in what the test reads back
				resp, body, err := readResp(c, br)
				if err != nil || resp.StatusCode != 200 || !strings.HasSuffix(body, "hello") || strings.Contains(strings.ToLower(body), "expect=") {
					t.Fatalf("got %v %q %v", resp, body, err)
				}
			})
			t.Run("upstream protocol error", func(t *testing.T) {
				paths := []string{"/bad-header"}
				if tg.name == "strait" {
					// nginx takes the last of two different lengths.
					paths = append(paths, "/dup-length")
				}
				for _, p := range paths {
					resp, _, _, err := exchange(t, tg.addr, "GET "+p+" HTTP/1.1\r\nHost: h\r\n\r\n")
					if err != nil || resp.StatusCode != 502 {
						t.Fatalf("%s: got %v %v, want 502", p, resp, err)
					}
					if tg.name == "strait" && resp.Header.Get("X-Strait-Response-Flags") != "UPE" {
						t.Errorf("%s: flags %q, want UPE", p, resp.Header.Get("X-Strait-Response-Flags"))
					}
				}
			})
			t.Run("head too large is seen", func(t *testing.T) {
				c, err := net.Dial("tcp", tg.addr)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				sent := make(chan struct{})
				go func() {
					// Keep sending past the limit, as a client uploading
					// a big head does: the reply must not be lost to a reset.
					defer close(sent)
					_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: h\r\nX-Big: ") // a failed write shows in what the test reads back
					chunk := strings.Repeat("a", 4096)
					for i := 0; i < 64; i++ {
						if _, err := io.WriteString(c, chunk); err != nil {
							return
						}
					}
				}()
				// Read only once the upload ended (all sent, or failed on
				// a reset): a proxy that closes with the client's bytes
				// unread resets the connection, and the reset takes the
				// unread reply with it.
				<-sent
				br := bufio.NewReader(c)
				resp, _, err := readResp(c, br)
				if err != nil || resp.StatusCode != 431 && resp.StatusCode != 400 {
					t.Fatalf("got %v %v, want 431 (nginx: 400)", resp, err)
				}
				// And the connection ends in order (FIN), not with a
				// reset: the proxy shut down its side and read what the
				// client still sent (Envoy's delayed close).
				if _, err := io.Copy(io.Discard, br); err != nil {
					t.Fatalf("after the %d: %v, want a clean end of stream", resp.StatusCode, err)
				}
			})
		})
	}
	t.Run("strait/HTTP/0.9 refused", func(t *testing.T) {
		// nginx serves HTTP/0.9; Envoy and we refuse it.
		p := startStrait(t, be.addr, proxyConfig{})
		resp, _, c, err := exchange(t, p, "GET /\r\n")
		if err != nil || resp.StatusCode != 400 {
			t.Fatalf("got %v %v, want 400", resp, err)
		}
		if !closedSoon(c) {
			t.Fatal("connection held")
		}
	})
}
