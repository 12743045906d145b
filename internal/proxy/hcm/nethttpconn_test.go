package hcm

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/route"
	"github.com/straitmesh/strait/internal/proxy/stats"
)

// startNetHTTP runs the net/http codec with lim and d in front of
// slowBackend (/hang, /stall, /drip, /late; anything else answers at once).
func startNetHTTP(t *testing.T, lim Limits, d *Drain) string {
	t.Helper()
	var cancelled atomic.Int32
	be := slowBackend(t, &cancelled)
	log := slog.New(slog.DiscardHandler)
	cm := cluster.NewManager(log, stats.New())
	if err := cm.AddStatic([]*clusterv3.Cluster{staticCluster("be", be)}); err != nil {
		t.Fatal(err)
	}
	table, err := route.Compile(&routev3.RouteConfiguration{Name: "r", VirtualHosts: []*routev3.VirtualHost{{
		Name: "all", Domains: []string{"*"}, Routes: []*routev3.Route{prefixRoute("/", "be")}}}})
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(Options{Logger: log, Clusters: cm, Codec: CodecNetHTTP})
	f := &Filter{StatPrefix: "test", inline: table, Limits: lim}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.ServeConnDrain(c, f, netip.AddrPort{}, cluster.OriginalSource{}, d)
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done; s.Close() })
	return ln.Addr().String()
}

// rawClient is a keep-alive client on a raw connection.
type rawClient struct {
	c  net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawClient {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(15 * time.Second))
	return &rawClient{c: c, br: bufio.NewReader(c)}
}

func (rc *rawClient) do(t *testing.T, raw string) *http.Response {
	t.Helper()
	if _, err := io.WriteString(rc.c, raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(rc.br, nil)
	if err != nil {
		t.Fatalf("response to %q: %v", raw, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func get(path string) string { return "GET " + path + " HTTP/1.1\r\nHost: nh\r\n\r\n" }

func TestNetHTTPCodecLimits(t *testing.T) {
	t.Run("request_headers_timeout", func(t *testing.T) {
		lim := DefaultLimits()
		lim.RequestHeadersTimeout = 300 * time.Millisecond
		addr := startNetHTTP(t, lim, nil)
		// The clock starts before the dial: the server's starts once it
		// has the connection, which can be well before dialRaw returns to
		// a goroutine of a loaded -race run (it closed "after 215 ms").
		start := time.Now()
		rc := dialRaw(t, addr)
		io.WriteString(rc.c, "GET / HTTP/1.1\r\nHost: nh\r\n") // and never the end of the head
		if !closedSoon(rc.c) {
			t.Fatal("a connection whose head never ended was not closed")
		}
		if el := time.Since(start); el < lim.RequestHeadersTimeout {
			t.Fatalf("closed after %v, before request_headers_timeout %v", el, lim.RequestHeadersTimeout)
		}
	})
	t.Run("idle_timeout", func(t *testing.T) {
		lim := DefaultLimits()
		lim.IdleTimeout = 300 * time.Millisecond
		rc := dialRaw(t, startNetHTTP(t, lim, nil))
		if resp := rc.do(t, get("/")); resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		if !closedSoon(rc.c) {
			t.Fatal("an idle keep-alive connection was not closed at idle_timeout")
		}
	})
	t.Run("max_requests_per_connection", func(t *testing.T) {
		lim := DefaultLimits()
		lim.MaxRequestsPerConnection = 2
		rc := dialRaw(t, startNetHTTP(t, lim, nil))
		if resp := rc.do(t, get("/")); resp.Close {
			t.Fatal("the first of two requests closed the connection")
		}
		if resp := rc.do(t, get("/")); !resp.Close {
			t.Fatal("the second request of max_requests_per_connection 2 did not say connection: close")
		}
		if !closedSoon(rc.c) {
			t.Fatal("the connection stayed open after its last request")
		}
	})
	t.Run("max_connection_duration", func(t *testing.T) {
		lim := DefaultLimits()
		lim.MaxConnectionDuration = 300 * time.Millisecond
		addr := startNetHTTP(t, lim, nil)
		rc := dialRaw(t, addr)
		// In progress when the duration passes: answered, with close.
		if resp := rc.do(t, get("/late")); resp.StatusCode != 200 || !resp.Close {
			t.Fatalf("request across max_connection_duration: %d close=%v; want 200 with connection: close", resp.StatusCode, resp.Close)
		}
		// Idle when it passes: closed.
		idle := dialRaw(t, addr)
		if resp := idle.do(t, get("/")); resp.Close {
			t.Fatal("a quick request said connection: close")
		}
		if !closedSoon(idle.c) {
			t.Fatal("an idle connection outlived max_connection_duration")
		}
	})
	t.Run("max_headers_count", func(t *testing.T) {
		lim := DefaultLimits()
		lim.MaxHeadersCount = 5
		rc := dialRaw(t, startNetHTTP(t, lim, nil))
		var b strings.Builder
		b.WriteString("GET / HTTP/1.1\r\nHost: nh\r\n")
		for i := range 5 {
			fmt.Fprintf(&b, "X-H%d: v\r\n", i)
		}
		b.WriteString("\r\n")
		if resp := rc.do(t, b.String()); resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Fatalf("6 header fields with max_headers_count 5: %d, want 431", resp.StatusCode)
		}
	})
	t.Run("stream_idle_timeout", func(t *testing.T) {
		lim := DefaultLimits()
		lim.StreamIdleTimeout = 300 * time.Millisecond
		rc := dialRaw(t, startNetHTTP(t, lim, nil))
		resp := rc.do(t, get("/hang"))
		if resp.StatusCode != http.StatusRequestTimeout || resp.Header.Get("X-Strait-Response-Flags") != "SI" {
			t.Fatalf("a request the upstream never answers: %d flags %q, want 408 SI", resp.StatusCode, resp.Header.Get("X-Strait-Response-Flags"))
		}
	})
	t.Run("drain", func(t *testing.T) {
		d := NewDrain()
		addr := startNetHTTP(t, DefaultLimits(), d)
		idle := dialRaw(t, addr)
		if resp := idle.do(t, get("/")); resp.Close {
			t.Fatal("connection: close before the drain")
		}
		busy := dialRaw(t, addr)
		io.WriteString(busy.c, get("/late"))
		time.Sleep(200 * time.Millisecond) // the request is in progress
		d.Start()
		if !closedSoon(idle.c) {
			t.Fatal("the drain did not close an idle connection")
		}
		resp, err := http.ReadResponse(busy.br, nil)
		if err != nil {
			t.Fatalf("the request in progress at the drain: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || !resp.Close {
			t.Fatalf("the request in progress at the drain: %d close=%v; want 200 with connection: close", resp.StatusCode, resp.Close)
		}
	})
}
