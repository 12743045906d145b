package proxy

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/straitmesh/strait/internal/proxy/xdstest"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// load is constant traffic from several keep-alive clients.
type load struct {
	ok, failed atomic.Int64
	mu         sync.Mutex
	errs       []string                 // the first failures
	bodies     map[string]*atomic.Int64 // responses per body, counted from mark
	stop       chan struct{}
	wg         sync.WaitGroup
	marked     atomic.Bool
}

func startLoad(t *testing.T, url string, clients int, bodies ...string) *load {
	l := &load{stop: make(chan struct{}), bodies: map[string]*atomic.Int64{}}
	for _, b := range bodies {
		l.bodies[b] = new(atomic.Int64)
	}
	for range clients {
		// net/http's client, as an application would use it: keep-alive,
		// and its own rule of sending an idempotent request again when a
		// reused connection closes before any response byte.
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			defer c.CloseIdleConnections()
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				resp, err := c.Get(url)
				var body []byte
				if err == nil {
					body, err = io.ReadAll(resp.Body)
					resp.Body.Close()
					if err == nil && resp.StatusCode != 200 {
						err = fmt.Errorf("status %d %s (flags %q)", resp.StatusCode, body, resp.Header.Get("x-strait-response-flags"))
					}
				}
				if err != nil {
					l.failed.Add(1)
					l.mu.Lock()
					if len(l.errs) < 10 {
						l.errs = append(l.errs, err.Error())
					}
					l.mu.Unlock()
					continue
				}
				l.ok.Add(1)
				if n := l.bodies[string(body)]; n != nil && l.marked.Load() {
					n.Add(1)
				}
			}
		}()
	}
	t.Cleanup(l.end)
	return l
}

func (l *load) end() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
}

func (l *load) check(t *testing.T) {
	t.Helper()
	l.end()
	t.Logf("requests: %d ok, %d failed", l.ok.Load(), l.failed.Load())
	if l.failed.Load() != 0 {
		t.Errorf("%d of %d requests failed; first: %q", l.failed.Load(), l.ok.Load()+l.failed.Load(), l.errs)
	}
}

func named(t *testing.T, name string) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, name) }))
	t.Cleanup(s.Close)
	return s
}

// routesWithExtra is weightedRoute with, when extra, a route for /extra
// first.
func routesWithExtra(name string, wa, wb uint32, extra bool) *routev3.RouteConfiguration {
	rc := weightedRoute(name, wa, wb)
	if extra {
		vh := rc.VirtualHosts[0]
		vh.Routes = append([]*routev3.Route{{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/extra"}},
			Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "b"}}}}},
			vh.Routes...)
	}
	return rc
}

// TestConfigPushesUnderLoad: constant keep-alive load through a client-side
// and a server-side proxy, both configured over ADS, while 100 pushes
// alternate the route's weights between two clusters, add and remove a
// route, replace clusters and replace both proxies' listeners. No request
// may fail.
func TestConfigPushesUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("load test")
	}
	be := named(t, "backend")
	xdsS, xdsC := xdstest.Start(t), xdstest.Start(t)
	sAddr, cAddr := freeAddr(t), freeAddr(t)

	// Server side: listener -> cluster local -> backend.
	xdsS.Set(xdsapi.ClusterType, "1", edsCluster("local"))
	xdsS.Set(xdsapi.EndpointType, "1", cla("local", be.Listener.Addr().String()))
	xdsS.Set(xdsapi.RouteType, "1", singleRoute("in", "local"))
	xdsS.Set(xdsapi.ListenerType, "1", inbound(httpListener(t, "in", sAddr, "in")))
	// Client side: listener -> clusters a and b, both the server side.
	xdsC.Set(xdsapi.ClusterType, "1", edsCluster("a"), edsCluster("b"))
	xdsC.Set(xdsapi.EndpointType, "1", cla("a", sAddr), cla("b", sAddr))
	xdsC.Set(xdsapi.RouteType, "1", routesWithExtra("80", 50, 50, false))
	xdsC.Set(xdsapi.ListenerType, "1", httpListener(t, "out", cAddr, "80"))
	ps, pc := startDrainProxy(t, xdsS), startDrainProxy(t, xdsC)

	l := startLoad(t, "http://"+cAddr+"/", 8)
	time.Sleep(200 * time.Millisecond)
	const pushes = 100
	for i := 1; i <= pushes; i++ {
		v := strconv.Itoa(i + 1)
		wa := uint32(100 * (i % 2))
		xdsC.Set(xdsapi.RouteType, v, routesWithExtra("80", wa, 100-wa, i%3 == 0))
		if i%4 == 0 { // a changed cluster: a new cluster object, warming until its endpoints come
			b := edsCluster("b")
			b.ConnectTimeout = durationpb.New(time.Duration(5+i%2) * time.Second)
			xdsC.Set(xdsapi.ClusterType, v, edsCluster("a"), b)
			xdsC.Set(xdsapi.EndpointType, v, cla("a", sAddr), cla("b", sAddr))
		}
		if i%10 == 0 { // a replaced client-side listener
			ln := httpListener(t, "out", cAddr, "80")
			ln.StatPrefix = "out-" + v
			xdsC.Set(xdsapi.ListenerType, v, ln)
		}
		if i%10 == 5 { // a replaced server-side listener
			ln := inbound(httpListener(t, "in", sAddr, "in"))
			ln.StatPrefix = "in-" + v
			xdsS.Set(xdsapi.ListenerType, v, ln)
		}
		time.Sleep(20 * time.Millisecond)
	}
	waitFor(t, 10*time.Second, "the last pushes applied", func() bool {
		vc, _, _ := pc.Listeners.Snapshot()
		vs, _, _ := ps.Listeners.Snapshot()
		return vc == strconv.Itoa(pushes+1) && vs == strconv.Itoa(pushes-4)
	})
	time.Sleep(200 * time.Millisecond)
	l.check(t)
	if l.ok.Load() < pushes {
		t.Errorf("only %d requests went through during %d pushes", l.ok.Load(), pushes)
	}
}

// TestSIGTERMDrainUnderLoad: a client-side proxy balances constant load
// over two server-side proxies. One gets the SIGTERM path (its Run context
// ends, as strait-proxy's signal handler does) and drains: it keeps
// answering, with connection: close, while the control plane removes its
// endpoint (as Kubernetes does for a terminating pod), then exits. No
// request may fail at the client.
func TestSIGTERMDrainUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("load test")
	}
	be1, be2 := named(t, "s1"), named(t, "s2")
	x1, x2, xc := xdstest.Start(t), xdstest.Start(t), xdstest.Start(t)
	s1Addr, s2Addr, cAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	for _, s := range []struct {
		x        *xdstest.Server
		addr, be string
	}{{x1, s1Addr, be1.Listener.Addr().String()}, {x2, s2Addr, be2.Listener.Addr().String()}} {
		s.x.Set(xdsapi.ClusterType, "1", edsCluster("local"))
		s.x.Set(xdsapi.EndpointType, "1", cla("local", s.be))
		s.x.Set(xdsapi.RouteType, "1", singleRoute("in", "local"))
		s.x.Set(xdsapi.ListenerType, "1", inbound(httpListener(t, "in", s.addr, "in")))
	}
	xc.Set(xdsapi.ClusterType, "1", edsCluster("svc"))
	xc.Set(xdsapi.EndpointType, "1", cla("svc", s1Addr, s2Addr))
	xc.Set(xdsapi.RouteType, "1", singleRoute("80", "svc"))
	xc.Set(xdsapi.ListenerType, "1", httpListener(t, "out", cAddr, "80"))

	// s1 runs as strait-proxy's main does: Run until the signal context ends.
	p1, err := New(Options{Bootstrap: adsBootstrap(x1.Addr), Logger: testLogger(t), AdminAddress: "127.0.0.1:0",
		Concurrency: 2, XDSBackoff: 50 * time.Millisecond, DrainTime: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	sigterm, signal := context.WithCancel(context.Background())
	defer signal()
	exited := make(chan error, 1)
	go func() { exited <- p1.Run(sigterm) }()
	waitFor(t, 10*time.Second, "s1 ready", p1.Ready)
	startDrainProxy(t, x2)
	startDrainProxy(t, xc)

	l := startLoad(t, "http://"+cAddr+"/", 8, "s1", "s2")
	waitFor(t, 10*time.Second, "load on both server-side proxies", func() bool { return l.ok.Load() > 200 })
	l.marked.Store(true)
	signal() // SIGTERM
	waitFor(t, 5*time.Second, "s1 draining", p1.Draining)
	// s1 answers while draining, until its endpoint is gone from the client side.
	for deadline := time.Now().Add(5 * time.Second); l.bodies["s1"].Load() <= 20 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if n := l.bodies["s1"].Load(); n <= 20 {
		t.Errorf("s1 served %d requests after the SIGTERM, want it to keep serving while draining", n)
	}
	xc.Set(xdsapi.EndpointType, "2", cla("svc", s2Addr))
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("s1 Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("s1 did not exit after its drain time")
	}
	before := l.bodies["s2"].Load()
	waitFor(t, 10*time.Second, "load after s1 exited", func() bool { return l.bodies["s2"].Load() > before+200 })
	l.check(t)
	t.Logf("while draining s1 served %d requests; s2 %d since the SIGTERM", l.bodies["s1"].Load(), l.bodies["s2"].Load())
}
