package hcm

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"runtime"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/route"
	"github.com/straitmesh/strait/internal/proxy/stats"
)

// These tests cover parked idle connections (h1.go, http1.Parker): a keep-alive
// connection idle for longer than parkAfter holds no goroutine, and still
// serves its next request, closes at its idle timeout, on drain, when the
// client leaves and when the Server closes.

// startParking runs the strait codec in front of an echo backend with the
// given limits and drain; it returns the address and the Server.
func startParking(t *testing.T, lim Limits, d *Drain) (string, *Server) {
	t.Helper()
	be := echoBackend(t)
	log := slog.New(slog.DiscardHandler)
	cm := cluster.NewManager(log, stats.New())
	if err := cm.AddStatic([]*clusterv3.Cluster{staticCluster("be", be.Listener.Addr().String())}); err != nil {
		t.Fatal(err)
	}
	table, err := route.Compile(&routev3.RouteConfiguration{Name: "r", VirtualHosts: []*routev3.VirtualHost{{
		Name: "all", Domains: []string{"*"},
		Routes: []*routev3.Route{{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
			Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "be"}}}}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(Options{Logger: log, Clusters: cm})
	f := &Filter{StatPrefix: "test", inline: table, Limits: lim}
	return serveDrain(t, s, f, d), s
}

// serveDrain serves s's connections with f and drain d on a loopback
// listener until the test ends, then closes the listener and s; it
// returns the listener's address.
func serveDrain(t *testing.T, s *Server, f *Filter, d *Drain) string {
	t.Helper()
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
	t.Cleanup(func() {
		ln.Close()
		<-done
		s.Close()
	})
	return ln.Addr().String()
}

// idleClient is a keep-alive client connection.
type idleClient struct {
	c  net.Conn
	br *bufio.Reader
}

func dialIdle(t *testing.T, addr string) *idleClient {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &idleClient{c: c, br: bufio.NewReader(c)}
}

// get sends GET path in parts (split at the given offsets of the raw
// request, with a pause between) and returns the target the backend saw.
func (ic *idleClient) get(path string, splits ...int) (string, error) {
	raw := fmt.Sprintf("GET %s HTTP/1.1\r\nHost: park\r\n\r\n", path)
	ic.c.SetDeadline(time.Now().Add(10 * time.Second))
	prev := 0
	for _, at := range append(splits, len(raw)) {
		if _, err := io.WriteString(ic.c, raw[prev:at]); err != nil {
			return "", err
		}
		prev = at
		if at < len(raw) {
			time.Sleep(3 * parkAfter / 2) // long enough to park again
		}
	}
	resp, body, err := readResp(ic.c, ic.br)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %d: %s", resp.StatusCode, body)
	}
	return resp.Header.Get("X-Seen-Uri"), nil
}

// parkedAll waits until the goroutine count is back at g0 plus slack: the
// idle connections hold none.
func parkedAll(g0, slack int) bool {
	return waitFor(func() bool { return runtime.NumGoroutine() <= g0+slack })
}

// parkedOne waits until s counts one connection, parked. (A goroutine
// count taken after the request could already be the parked one's, on a
// loaded machine.)
func parkedOne(s *Server) bool {
	return waitFor(func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.parked == 1 && len(s.conns) == 0
	})
}

func TestParkedConnectionsHoldNoGoroutineAndServeAgain(t *testing.T) {
	addr, s := startParking(t, DefaultLimits(), nil)
	warm := dialIdle(t, addr) // the upstream connection and its goroutines
	if _, err := warm.get("/warm"); err != nil {
		t.Fatal(err)
	}
	warm.c.Close()
	if !waitFor(func() bool { return s.Active() == 0 }) {
		t.Fatal("the warm-up connection stayed open")
	}
	g0 := runtime.NumGoroutine()
	const n = 50
	clients := make([]*idleClient, n)
	for i := range clients {
		clients[i] = dialIdle(t, addr)
		if _, err := clients[i].get("/first"); err != nil {
			t.Fatalf("client %d first request: %v", i, err)
		}
	}
	// With a goroutine per idle connection, n of them would remain.
	if !parkedAll(g0, n/10) {
		t.Fatalf("goroutines %d with %d idle connections (started at %d): idle connections were not parked", runtime.NumGoroutine(), n, g0)
	}
	if got := s.Active(); got != n {
		t.Fatalf("Active() = %d while %d connections are parked, want %d", got, n, n)
	}
	for i, ic := range clients {
		body, err := ic.get(fmt.Sprintf("/again/%d", i))
		if err != nil {
			t.Fatalf("client %d after parking: %v", i, err)
		}
		if body != fmt.Sprintf("/again/%d", i) {
			t.Fatalf("client %d got %q, want its own path", i, body)
		}
	}
	// A request whose head arrives in parts, the connection parking
	// between them, is still read whole.
	if body, err := clients[0].get("/split/path", 3, 20); err != nil || body != "/split/path" {
		t.Fatalf("split request after parking: %q, %v", body, err)
	}
}

func TestParkedConnectionCloses(t *testing.T) {
	t.Run("idle timeout", func(t *testing.T) {
		lim := DefaultLimits()
		lim.IdleTimeout = 5 * parkAfter
		addr, s := startParking(t, lim, nil)
		ic := dialIdle(t, addr)
		start := time.Now()
		if _, err := ic.get("/"); err != nil {
			t.Fatal(err)
		}
		if !closedSoon(ic.c) {
			t.Fatal("a parked connection was not closed at its idle timeout")
		}
		if el := time.Since(start); el < lim.IdleTimeout {
			t.Fatalf("closed after %v, before its idle timeout %v", el, lim.IdleTimeout)
		}
		if !waitFor(func() bool { return s.Active() == 0 }) {
			t.Fatalf("Active() = %d after the idle timeout, want 0", s.Active())
		}
	})
	t.Run("max connection duration", func(t *testing.T) {
		lim := DefaultLimits()
		lim.MaxConnectionDuration = 5 * parkAfter
		addr, s := startParking(t, lim, nil)
		ic := dialIdle(t, addr)
		if _, err := ic.get("/"); err != nil {
			t.Fatal(err)
		}
		if !closedSoon(ic.c) {
			t.Fatal("a parked connection was not closed at its max_connection_duration")
		}
		if !waitFor(func() bool { return s.Active() == 0 }) {
			t.Fatalf("Active() = %d, want 0", s.Active())
		}
	})
	t.Run("drain", func(t *testing.T) {
		d := NewDrain()
		addr, s := startParking(t, DefaultLimits(), d)
		ic := dialIdle(t, addr)
		if _, err := ic.get("/"); err != nil {
			t.Fatal(err)
		}
		if !parkedOne(s) {
			t.Fatal("the idle connection was not parked")
		}
		d.Start()
		if !closedSoon(ic.c) {
			t.Fatal("the drain did not close a parked connection")
		}
		if !waitFor(func() bool { return s.Active() == 0 }) {
			t.Fatalf("Active() = %d after the drain, want 0", s.Active())
		}
	})
	t.Run("drain end", func(t *testing.T) {
		// A connection that has not sent its first request outlives a
		// drain's start (it is served); the drain's end closes it, as it
		// closes one with a request in flight.
		d := NewDrain()
		addr, s := startParking(t, DefaultLimits(), d)
		fresh := dialIdle(t, addr)
		if !waitFor(func() bool { return s.Active() == 1 }) {
			t.Fatalf("Active() = %d, want the new connection", s.Active())
		}
		d.Start()
		d.End()
		if !d.Started() || !d.Ended() {
			t.Fatalf("after End: started %v ended %v, want both", d.Started(), d.Ended())
		}
		if !closedSoon(fresh.c) {
			t.Fatal("the drain's end did not close a connection waiting for its first request")
		}
		if !waitFor(func() bool { return s.Active() == 0 }) {
			t.Fatalf("Active() = %d after the drain's end, want 0", s.Active())
		}
	})
	t.Run("client leaves", func(t *testing.T) {
		addr, s := startParking(t, DefaultLimits(), nil)
		ic := dialIdle(t, addr)
		if _, err := ic.get("/"); err != nil {
			t.Fatal(err)
		}
		if !parkedOne(s) {
			t.Fatal("the idle connection was not parked")
		}
		ic.c.Close()
		if !waitFor(func() bool { return s.Active() == 0 }) {
			t.Fatalf("Active() = %d after the client closed its parked connection, want 0", s.Active())
		}
	})
	t.Run("server close", func(t *testing.T) {
		addr, s := startParking(t, DefaultLimits(), nil)
		ic := dialIdle(t, addr)
		if _, err := ic.get("/"); err != nil {
			t.Fatal(err)
		}
		if !parkedOne(s) {
			t.Fatal("the idle connection was not parked")
		}
		s.Close()
		if !closedSoon(ic.c) {
			t.Fatal("Server.Close did not close a parked connection")
		}
		if got := s.Active(); got != 0 {
			t.Fatalf("Active() = %d after Close, want 0", got)
		}
	})
}

// TestConnectionsCountsEveryConnection: Connections' total counts each
// connection the server took, also one that is gone by the time anyone
// looks, which Active alone cannot show (Proxy.Drain relies on it).
func TestConnectionsCountsEveryConnection(t *testing.T) {
	addr, s := startParking(t, DefaultLimits(), nil)
	for i := range 3 {
		ic := dialIdle(t, addr)
		if _, err := ic.get("/"); err != nil {
			t.Fatal(err)
		}
		ic.c.Close()
		if !waitFor(func() bool { return s.Active() == 0 }) {
			t.Fatalf("Active() = %d after connection %d closed, want 0", s.Active(), i+1)
		}
		if active, taken := s.Connections(); active != 0 || taken != uint64(i+1) {
			t.Fatalf("Connections() = %d, %d after %d closed connections, want 0, %d", active, taken, i+1, i+1)
		}
	}
}
