package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"golang.org/x/net/http2"

	"github.com/straitmesh/strait/internal/proxy/xdstest"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// slowBackend answers /slow once release is closed, anything else at once.
func slowBackend(t *testing.T) (*httptest.Server, chan struct{}, chan struct{}) {
	release, arrived := make(chan struct{}), make(chan struct{}, 16)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			arrived <- struct{}{}
			<-release
		}
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(s.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	return s, release, arrived
}

// rawConn is a keep-alive HTTP/1.1 client connection.
type rawConn struct {
	net.Conn
	r *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(20 * time.Second))
	return &rawConn{Conn: c, r: bufio.NewReader(c)}
}

func (c *rawConn) send(t *testing.T, path string) {
	t.Helper()
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: svc\r\n\r\n", path); err != nil {
		t.Fatal(err)
	}
}

// response reads one response: status, body and whether it says
// connection: close.
func (c *rawConn) response(t *testing.T) (int, string, bool) {
	t.Helper()
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		t.Fatalf("reading response: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b), resp.Close
}

// closedByPeer reports whether the proxy closed the connection (EOF or reset
// on read), waiting at most a few seconds.
func (c *rawConn) closedByPeer() bool {
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := c.r.ReadByte()
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// stillOpen reports whether the connection carries another request without
// being asked to close.
func (c *rawConn) stillOpen(t *testing.T) bool {
	t.Helper()
	c.send(t, "/")
	code, _, closing := c.response(t)
	return code == 200 && !closing
}

func startDrainProxy(t *testing.T, srv *xdstest.Server) *Proxy {
	t.Helper()
	p, err := New(Options{Bootstrap: adsBootstrap(srv.Addr), Logger: testLogger(t), AdminAddress: "127.0.0.1:0",
		Concurrency: 2, XDSBackoff: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	waitFor(t, 10*time.Second, "ready", p.Ready)
	return p
}

func adminPost(t *testing.T, p *Proxy, path string) {
	t.Helper()
	resp, err := http.Post("http://"+p.AdminAddr().String()+path, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("POST %s = %d", path, resp.StatusCode)
	}
}

func inbound(l *listenerv3.Listener) *listenerv3.Listener {
	l.TrafficDirection = corev3.TrafficDirection_INBOUND
	return l
}

// POST /drain_listeners: an idle keep-alive connection is closed, one with
// a request in progress gets its response with connection: close and is
// closed after it, /ready says DRAINING; without ?graceful the listener
// stops accepting, with it a new connection is served with connection:
// close. ?inboundonly leaves outbound listeners alone.
func TestDrainListeners(t *testing.T) {
	for _, tc := range []struct {
		name, query string
	}{{"all", ""}, {"graceful", "?graceful"}, {"inboundonly", "?inboundonly&graceful"}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := xdstest.Start(t)
			be, release, arrived := slowBackend(t)
			in, out := freeAddr(t), freeAddr(t)
			srv.Set(xdsapi.ClusterType, "1", edsCluster("a"), edsCluster("b"))
			srv.Set(xdsapi.EndpointType, "1", cla("a", be.Listener.Addr().String()), cla("b", be.Listener.Addr().String()))
			srv.Set(xdsapi.RouteType, "1", weightedRoute("80", 50, 50))
			srv.Set(xdsapi.ListenerType, "1", inbound(httpListener(t, "in", in, "80")), httpListener(t, "out", out, "80"))
			p := startDrainProxy(t, srv)

			idleIn, busyIn, idleOut := dialRaw(t, in), dialRaw(t, in), dialRaw(t, out)
			for _, c := range []*rawConn{idleIn, busyIn, idleOut} {
				if !c.stillOpen(t) {
					t.Fatal("keep-alive connection not usable before the drain")
				}
			}
			busyIn.send(t, "/slow")
			<-arrived
			adminPost(t, p, "/drain_listeners"+tc.query)

			if !idleIn.closedByPeer() {
				t.Error("idle inbound connection still open after the drain")
			}
			close(release)
			if code, body, closing := busyIn.response(t); code != 200 || body != "ok" || !closing {
				t.Errorf("in-flight response = %d %q close=%t, want 200 ok with connection: close", code, body, closing)
			}
			if !busyIn.closedByPeer() {
				t.Error("connection with the in-flight request still open after its response")
			}
			if tc.name == "inboundonly" {
				if !idleOut.stillOpen(t) {
					t.Error("?inboundonly drained the outbound listener's connection")
				}
			} else if !idleOut.closedByPeer() {
				t.Error("idle outbound connection still open after the drain")
			}
			if code, body, err := get(http.DefaultClient, "http://"+p.AdminAddr().String()+"/ready"); err != nil || code != 503 || body != "DRAINING\n" {
				t.Errorf("/ready = %d %q %v, want 503 DRAINING", code, body, err)
			}
			c, err := net.DialTimeout("tcp", in, 2*time.Second)
			if tc.query == "" {
				if err == nil {
					c.Close()
					t.Error("the listener still accepts after a drain without ?graceful")
				}
				return
			}
			if err != nil {
				t.Fatalf("graceful drain stopped accepting: %v", err)
			}
			c.Close()
			fresh := dialRaw(t, in)
			fresh.send(t, "/")
			if code, _, closing := fresh.response(t); code != 200 || !closing {
				t.Errorf("new connection while draining = %d close=%t, want 200 with connection: close", code, closing)
			}
		})
	}
}

// An LDS update drains the listener it replaces and the one it removes
// (in-flight requests finish, with connection: close), and leaves the
// connections of a listener whose config did not change alone.
func TestLDSUpdateDrainsOldListener(t *testing.T) {
	srv := xdstest.Start(t)
	be, release, arrived := slowBackend(t)
	changed, same, removed := freeAddr(t), freeAddr(t), freeAddr(t)
	srv.Set(xdsapi.ClusterType, "1", edsCluster("a"), edsCluster("b"))
	srv.Set(xdsapi.EndpointType, "1", cla("a", be.Listener.Addr().String()), cla("b", be.Listener.Addr().String()))
	srv.Set(xdsapi.RouteType, "1", weightedRoute("80", 50, 50))
	srv.Set(xdsapi.ListenerType, "1", httpListener(t, "changed", changed, "80"), httpListener(t, "same", same, "80"),
		httpListener(t, "removed", removed, "80"))
	p := startDrainProxy(t, srv)

	idleChanged, busyChanged, idleSame, busyRemoved := dialRaw(t, changed), dialRaw(t, changed), dialRaw(t, same), dialRaw(t, removed)
	for _, c := range []*rawConn{idleChanged, busyChanged, idleSame, busyRemoved} {
		if !c.stillOpen(t) {
			t.Fatal("keep-alive connection not usable before the update")
		}
	}
	busyChanged.send(t, "/slow")
	busyRemoved.send(t, "/slow")
	<-arrived
	<-arrived

	l := httpListener(t, "changed", changed, "80")
	l.StatPrefix = "v2" // any change makes a new version
	srv.Set(xdsapi.ListenerType, "2", l, httpListener(t, "same", same, "80"))
	waitFor(t, 10*time.Second, "LDS version 2", func() bool {
		v, _, _ := p.Listeners.Snapshot()
		return v == "2"
	})

	if !idleChanged.closedByPeer() {
		t.Error("idle connection of the replaced listener still open")
	}
	close(release)
	for name, c := range map[string]*rawConn{"replaced": busyChanged, "removed": busyRemoved} {
		if code, body, closing := c.response(t); code != 200 || body != "ok" || !closing {
			t.Errorf("%s listener: in-flight response = %d %q close=%t, want 200 ok with connection: close", name, code, body, closing)
		}
		if !c.closedByPeer() {
			t.Errorf("%s listener: connection still open after its response", name)
		}
	}
	if !idleSame.stillOpen(t) {
		t.Error("the unchanged listener's connection was drained")
	}
	// The new version serves on the same address.
	fresh := dialRaw(t, changed)
	if !fresh.stillOpen(t) {
		t.Error("the replacing listener does not serve keep-alive")
	}
	if _, err := net.DialTimeout("tcp", removed, time.Second); err == nil {
		t.Error("the removed listener still accepts")
	}
}

// An HTTP/2 connection of a drained listener gets GOAWAY; one of a listener
// left alone does not.
func TestDrainHTTP2GoAway(t *testing.T) {
	srv := xdstest.Start(t)
	be, _, _ := slowBackend(t)
	in, out := freeAddr(t), freeAddr(t)
	srv.Set(xdsapi.ClusterType, "1", edsCluster("a"), edsCluster("b"))
	srv.Set(xdsapi.EndpointType, "1", cla("a", be.Listener.Addr().String()), cla("b", be.Listener.Addr().String()))
	srv.Set(xdsapi.RouteType, "1", weightedRoute("80", 50, 50))
	srv.Set(xdsapi.ListenerType, "1", inbound(httpListener(t, "in", in, "80")), httpListener(t, "out", out, "80"))
	p := startDrainProxy(t, srv)

	type h2 struct {
		c  *rawConn
		fr *http2.Framer
	}
	open := func(addr string) h2 {
		c := dialRaw(t, addr)
		if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
			t.Fatal(err)
		}
		fr := http2.NewFramer(c, c)
		if err := fr.WriteSettings(); err != nil {
			t.Fatal(err)
		}
		// The server's SETTINGS: the connection is served as HTTP/2.
		if f, err := fr.ReadFrame(); err != nil {
			t.Fatal(err)
		} else if _, ok := f.(*http2.SettingsFrame); !ok {
			t.Fatalf("first frame %T, want SETTINGS", f)
		}
		return h2{c, fr}
	}
	goAway := func(h h2) bool {
		h.c.SetReadDeadline(time.Now().Add(2 * time.Second))
		for {
			f, err := h.fr.ReadFrame()
			if err != nil {
				return false
			}
			if _, ok := f.(*http2.GoAwayFrame); ok {
				return true
			}
		}
	}
	hin, hout := open(in), open(out)
	adminPost(t, p, "/drain_listeners?inboundonly&graceful")
	if !goAway(hin) {
		t.Error("no GOAWAY on the drained inbound listener's HTTP/2 connection")
	}
	if goAway(hout) {
		t.Error("GOAWAY on the outbound listener's connection after ?inboundonly")
	}
}

// POST /quitquitquit makes Run return at once, without a drain.
func TestQuitQuitQuit(t *testing.T) {
	srv := xdstest.Start(t)
	adminAddr := freeAddr(t)
	p, err := New(Options{Bootstrap: adsBootstrap(srv.Addr), Logger: testLogger(t), AdminAddress: adminAddr,
		XDSBackoff: 50 * time.Millisecond, DrainTime: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- p.Run(context.Background()) }()
	var code int
	waitFor(t, 10*time.Second, "POST /quitquitquit answered", func() bool {
		resp, err := http.Post("http://"+adminAddr+"/quitquitquit", "", nil)
		if err != nil {
			return false
		}
		resp.Body.Close()
		code = resp.StatusCode
		return true
	})
	if code != 200 {
		t.Errorf("POST /quitquitquit = %d", code)
	}
	select {
	case err := <-ran:
		if err != nil {
			t.Errorf("Run after /quitquitquit: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after /quitquitquit")
	}
}

// TestSIGTERMDrainOutlivesAGap: once draining, every response closes its
// connection, so a client's next request comes on a new one; a moment with
// no connection open in between must not end the drain (the next
// connection would be refused, as TestSIGTERMDrainUnderLoad saw under
// load). Once no connection has come for drainQuiet, Run returns long
// before the drain time.
func TestSIGTERMDrainOutlivesAGap(t *testing.T) {
	be := named(t, "s1")
	x := xdstest.Start(t)
	addr := freeAddr(t)
	x.Set(xdsapi.ClusterType, "1", edsCluster("local"))
	x.Set(xdsapi.EndpointType, "1", cla("local", be.Listener.Addr().String()))
	x.Set(xdsapi.RouteType, "1", singleRoute("in", "local"))
	x.Set(xdsapi.ListenerType, "1", inbound(httpListener(t, "in", addr, "in")))
	p, err := New(Options{Bootstrap: adsBootstrap(x.Addr), Logger: testLogger(t), AdminAddress: "127.0.0.1:0",
		Concurrency: 2, XDSBackoff: 50 * time.Millisecond, DrainTime: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	sigterm, signal := context.WithCancel(context.Background())
	defer signal()
	exited := make(chan error, 1)
	go func() { exited <- p.Run(sigterm) }()
	waitFor(t, 10*time.Second, "ready", p.Ready)
	signal()
	waitFor(t, 5*time.Second, "draining", p.Draining)
	for i := range 3 {
		c := dialRaw(t, addr)
		c.send(t, "/")
		if code, body, closing := c.response(t); code != 200 || body != "s1" || !closing {
			t.Fatalf("request %d while draining: %d %q close=%t, want 200 from s1 with connection: close", i, code, body, closing)
		}
		if !c.closedByPeer() {
			t.Fatalf("request %d: the connection stayed open after connection: close", i)
		}
		c.Close()
		// Several drain polls see no connection.
		time.Sleep(3 * drainPoll)
		select {
		case err := <-exited:
			t.Fatalf("Run returned (%v) after a gap of %v between connections, %d requests into the drain", err, 3*drainPoll, i+1)
		default:
		}
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run still draining 30 s after the last connection (drain time 1 min), want it to end once quiet")
	}
}

// POST /drain_listeners?graceful stops the listeners it drains from
// accepting once the drain time has passed, as Envoy does; with skip_exit
// they go on accepting.
func TestGracefulDrainStopsAtDrainTime(t *testing.T) {
	start := func(t *testing.T) (*Proxy, string, string) {
		srv := xdstest.Start(t)
		be := named(t, "a")
		in, out := freeAddr(t), freeAddr(t)
		srv.Set(xdsapi.ClusterType, "1", edsCluster("a"))
		srv.Set(xdsapi.EndpointType, "1", cla("a", be.Listener.Addr().String()))
		srv.Set(xdsapi.RouteType, "1", singleRoute("80", "a"))
		srv.Set(xdsapi.ListenerType, "1", inbound(httpListener(t, "in", in, "80")), httpListener(t, "out", out, "80"))
		p, err := New(Options{Bootstrap: adsBootstrap(srv.Addr), Logger: testLogger(t), AdminAddress: "127.0.0.1:0",
			XDSBackoff: 50 * time.Millisecond, DrainTime: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		waitFor(t, 10*time.Second, "ready", p.Ready)
		return p, in, out
	}
	skipping, skipIn, _ := start(t)
	p, in, out := start(t)
	adminPost(t, skipping, "/drain_listeners?inboundonly&graceful&skip_exit")
	adminPost(t, p, "/drain_listeners?inboundonly&graceful")
	if s := gauge(p, "server.state"); s != stateDraining {
		t.Errorf("server.state = %d once draining, want 1 (DRAINING)", s)
	}
	if refused(in) {
		t.Fatal("a graceful drain stopped accepting at once")
	}
	waitFor(t, 10*time.Second, "the drained listener to stop accepting after the drain time", func() bool { return refused(in) })
	if refused(out) {
		t.Error("?inboundonly stopped the outbound listener")
	}
	if refused(skipIn) {
		t.Error("?skip_exit: the listener stopped accepting at the end of the drain")
	}
}
