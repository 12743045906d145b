package cluster

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/proxy/cluster/idlewatch"
	"github.com/straitmesh/strait/internal/proxy/http1"
	"github.com/straitmesh/strait/internal/proxy/stats"
)

func withHTTPOptions(o *corev3.HttpProtocolOptions) *clusterv3.Cluster {
	a, _ := anypb.New(&upstreamhttpv3.HttpProtocolOptions{CommonHttpProtocolOptions: o})
	c := eds("c", "c", time.Second)
	c.TypedExtensionProtocolOptions = map[string]*anypb.Any{HTTPProtocolOptionsKey: a}
	return c
}

func TestH1PoolOptions(t *testing.T) {
	c, err := build(eds("c", "c", time.Second), stats.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.h1.idleTimeout != 3600 || c.h1.maxRequests != 0 {
		t.Errorf("defaults: idle %ds max %d, want Envoy's 1 h and no limit", c.h1.idleTimeout, c.h1.maxRequests)
	}
	c, err = build(withHTTPOptions(&corev3.HttpProtocolOptions{IdleTimeout: durationpb.New(90 * time.Second),
		MaxRequestsPerConnection: wrapperspb.UInt32(3)}), stats.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.h1.idleTimeout != 90 || c.h1.maxRequests != 3 {
		t.Errorf("idle %ds max %d, want 90 s and 3", c.h1.idleTimeout, c.h1.maxRequests)
	}
	_, err = build(withHTTPOptions(&corev3.HttpProtocolOptions{MaxStreamDuration: durationpb.New(time.Second)}), stats.New(), nil)
	if err == nil || !strings.Contains(err.Error(), "max_stream_duration") {
		t.Errorf("max_stream_duration: got %v, want it refused by name", err)
	}
}

// exchange sends a request on uc and reads the upstream's whole answer
// (srv, the server side of uc, answers it) through uc's reader, as the
// HCM does, leaving uc clean for PutConn.
func exchange(t *testing.T, uc *UpstreamConn, srv net.Conn) {
	t.Helper()
	const resp = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
	uc.Exchange()
	if _, err := uc.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 512)
	if _, err := srv.Read(buf); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Write([]byte(resp)); err != nil {
		t.Fatal(err)
	}
	for len(uc.R.Buffered()) < len(resp) {
		if err := uc.R.Fill(); err != nil {
			t.Fatal(err)
		}
	}
	uc.R.Discard(len(resp))
}

// waitState waits for the idle watch to reach want on uc.
func waitState(t *testing.T, uc *UpstreamConn, want idlewatch.State) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for uc.w.State() != want {
		if time.Now().After(deadline) {
			t.Fatalf("idle watch state %d, want %d", uc.w.State(), want)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestIdlePooledConnWatched: anything the upstream sends on an idle pooled
// connection (bytes or a close) retires it; the next request gets a fresh
// connection. With the idle watch (a cluster of a Manager), the watch
// tells it without a Peek; without it, the Peek on reuse does.
func TestIdlePooledConnWatched(t *testing.T) {
	for _, watched := range []bool{false, true} {
		t.Run(map[bool]string{false: "peek", true: "watch"}[watched], func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			accepted := make(chan net.Conn, 4)
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					accepted <- c
				}
			}()
			var c *Cluster
			if watched {
				m := NewManager(slog.New(slog.DiscardHandler), stats.New())
				defer m.Close()
				c, err = m.build(eds("c", "c", time.Second), nil)
			} else {
				c, err = build(eds("c", "c", time.Second), stats.New(), nil)
			}
			if err != nil {
				t.Fatal(err)
			}
			ep := Endpoint{Network: "tcp", Address: ln.Addr().String()}
			for _, late := range []func(net.Conn){
				func(s net.Conn) { _, _ = s.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nPWNED!")) },
				func(s net.Conn) { s.Close() },
			} {
				uc, err := c.DialConn(context.Background(), ep)
				if err != nil {
					t.Fatal(err)
				}
				if watched != (uc.w.Watched()) {
					t.Fatalf("connection watched: %v, want %v", uc.w.Watched(), watched)
				}
				srv := <-accepted
				exchange(t, uc, srv)
				c.PutConn(uc) // clean: nothing buffered
				late(srv)     // after the put
				if watched {
					waitState(t, uc, idlewatch.Dirty)
				} else {
					time.Sleep(50 * time.Millisecond)
				}
				got, err := c.GetConn(context.Background(), ep)
				if err != nil {
					t.Fatal(err)
				}
				if got == uc || got.Reused {
					t.Fatal("a pooled connection that heard from the upstream while idle was reused")
				}
				<-accepted
				got.Close()
				srv.Close()
			}
			// A quiet one is reused; the watch knows it is quiet.
			uc, _ := c.DialConn(context.Background(), ep)
			srv := <-accepted
			defer srv.Close()
			exchange(t, uc, srv)
			c.PutConn(uc)
			if watched && uc.w.State() != idlewatch.Clean {
				t.Errorf("idle watch state %d of a quiet connection, want clean", uc.w.State())
			}
			if got, _ := c.GetConn(context.Background(), ep); got != uc || !got.Reused {
				t.Fatal("a quiet idle connection was not reused")
			}
			uc.Close()
		})
	}
}

// TestIdleWatchCloseReuseRace: the upstream closes every idle connection
// while requests take them from the pool. A connection taken before the
// watch saw its close fails its request (the HCM retries a reused one);
// once the watch saw it, it is never handed out again. Run with -race: the
// watch's goroutine and the pool touch the connections concurrently.
func TestIdleWatchCloseReuseRace(t *testing.T) {
	const n = 40
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	m := NewManager(slog.New(slog.DiscardHandler), stats.New())
	defer m.Close()
	c, err := m.build(eds("c", "c", time.Second), nil)
	if err != nil {
		t.Fatal(err)
	}
	ep := Endpoint{Network: "tcp", Address: ln.Addr().String()}
	var ucs []*UpstreamConn
	var srvs []net.Conn
	for range n {
		uc, err := c.DialConn(context.Background(), ep)
		if err != nil {
			t.Fatal(err)
		}
		srv, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		exchange(t, uc, srv)
		ucs, srvs = append(ucs, uc), append(srvs, srv)
	}
	for _, uc := range ucs {
		c.PutConn(uc)
	}
	go func() {
		for _, s := range srvs {
			s.Close()
		}
	}()
	// Take idle connections while they close: each one taken must fail
	// its request.
	for range n / 2 {
		uc := c.h1.get(ep.Address)
		if uc == nil {
			break
		}
		uc.SetDeadline(time.Now().Add(5 * time.Second))
		_, werr := uc.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
		if werr == nil {
			if err := uc.R.Fill(); err == nil {
				t.Fatalf("a request on an idle connection its upstream closed got %q", uc.R.Buffered())
			}
		}
		uc.Close()
	}
	// The rest: once the watch saw the closes, none is handed out.
	c.h1.mu.Lock()
	rest := append([]*UpstreamConn(nil), c.h1.idle[ep.Address]...)
	c.h1.mu.Unlock()
	for _, uc := range rest {
		waitState(t, uc, idlewatch.Dirty)
	}
	if uc := c.h1.get(ep.Address); uc != nil {
		t.Fatal("an idle connection the watch saw closed was handed out")
	}
}

// TestCloseOneIdleSkipsEmptyLists: get keeps an endpoint's key when it
// takes the last idle connection; closeOneIdle (a request waiting for a
// connection slot) must pass over such a key, to another endpoint's idle
// connection or to nothing, instead of indexing the empty list.
func TestCloseOneIdleSkipsEmptyLists(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	p := &h1Pool{idle: map[string][]*UpstreamConn{"10.0.0.1:80": {}}}
	if p.closeOneIdle() {
		t.Fatal("closeOneIdle closed something in a pool with no idle connection")
	}
	uc := &UpstreamConn{Conn: a, addr: "10.0.0.2:80"}
	p.idle["10.0.0.2:80"] = []*UpstreamConn{uc}
	p.idleSrc = map[srcKey][]*UpstreamConn{{addr: "10.0.0.3:80"}: {}}
	if !p.closeOneIdle() {
		t.Fatal("closeOneIdle passed over the idle connection of 10.0.0.2:80")
	}
	if _, err := a.Write([]byte("x")); err == nil {
		t.Error("the idle connection is still open")
	}
	if p.closeOneIdle() {
		t.Error("closeOneIdle closed something once the pool was empty")
	}
}

// TestIdleWatchRealBackendIdleTimeout: a real HTTP/1.1 server (net/http)
// closes keep-alive connections idle for 100 ms. The watch sees the close
// of the pooled connection; the next request gets a new connection and
// its answer, instead of failing on the closed one.
func TestIdleWatchRealBackendIdleTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		IdleTimeout: 100 * time.Millisecond,
		Handler:     http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("hello")) }),
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	m := NewManager(slog.New(slog.DiscardHandler), stats.New())
	defer m.Close()
	c, err := m.build(eds("c", "c", time.Second), nil)
	if err != nil {
		t.Fatal(err)
	}
	ep := Endpoint{Network: "tcp", Address: ln.Addr().String()}
	get := func() *UpstreamConn {
		t.Helper()
		uc, err := c.GetConn(context.Background(), ep)
		if err != nil {
			t.Fatal(err)
		}
		uc.Exchange()
		if _, err := uc.Write([]byte("GET / HTTP/1.1\r\nHost: be\r\n\r\n")); err != nil {
			t.Fatalf("reused %v: %v", uc.Reused, err)
		}
		head, err := uc.R.ReadHead(8 << 10)
		if err != nil {
			t.Fatalf("reused %v: %v", uc.Reused, err)
		}
		var resp http1.Response
		if err := http1.ParseResponse(head, &resp, false); err != nil {
			t.Fatal(err)
		}
		for int64(len(uc.R.Buffered())) < resp.ContentLength {
			if err := uc.R.Fill(); err != nil {
				t.Fatal(err)
			}
		}
		if body := string(uc.R.Buffered()[:resp.ContentLength]); resp.Status != 200 || body != "hello" {
			t.Fatalf("answer %d %q, want 200 hello", resp.Status, body)
		}
		uc.R.Discard(int(resp.ContentLength))
		c.PutConn(uc)
		return uc
	}
	first := get()
	if again := get(); again != first || !again.Reused {
		t.Fatal("a connection within the server's idle timeout was not reused")
	}
	waitState(t, first, idlewatch.Dirty) // the server's idle timeout closed it
	if next := get(); next == first || next.Reused {
		t.Fatal("the connection the server closed while idle was reused")
	}
}
