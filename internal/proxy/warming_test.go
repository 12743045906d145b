package proxy

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/straitmesh/strait/internal/proxy/admin"
	"github.com/straitmesh/strait/internal/proxy/xdstest"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// listenerStates returns, by listener name, the LDS versions of its
// active and warming states in the proxy's config dump ("" when absent).
func listenerStates(t *testing.T, p *Proxy) map[string][2]string {
	t.Helper()
	d, err := p.ConfigDump(admin.DumpRequest{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][2]string{}
	for _, a := range d.GetConfigs() {
		var ld adminv3.ListenersConfigDump
		if a.UnmarshalTo(&ld) != nil {
			continue
		}
		for _, dl := range ld.GetDynamicListeners() {
			var st [2]string
			if s := dl.GetActiveState(); s != nil {
				st[0] = "active@" + s.GetVersionInfo()
			}
			if s := dl.GetWarmingState(); s != nil {
				st[1] = "warming@" + s.GetVersionInfo()
				var l listenerv3.Listener
				if err := s.GetListener().UnmarshalTo(&l); err != nil || l.GetName() != dl.GetName() {
					t.Errorf("warming_state of %q holds listener %q (%v)", dl.GetName(), l.GetName(), err)
				}
			}
			out[dl.GetName()] = st
		}
	}
	return out
}

// acked waits for the proxy's ACK of a version of a type.
func acked(t *testing.T, srv *xdstest.Server, typeURL, version string) {
	t.Helper()
	srv.WaitRequest(t, 10*time.Second, func(r *discoveryv3.DiscoveryRequest) bool {
		return r.GetTypeUrl() == typeURL && r.GetVersionInfo() == version && r.GetErrorDetail() == nil
	})
}

// subscribed waits until the proxy asks for a route configuration.
func subscribed(t *testing.T, srv *xdstest.Server, route string) {
	t.Helper()
	srv.WaitRequest(t, 10*time.Second, func(r *discoveryv3.DiscoveryRequest) bool {
		return r.GetTypeUrl() == xdsapi.RouteType && strings.Contains(","+strings.Join(r.GetResourceNames(), ",")+",", ","+route+",")
	})
}

// refused reports whether a TCP connect to addr is refused.
func refused(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err == nil {
		c.Close()
		return false
	}
	return strings.Contains(err.Error(), "refused")
}

func gauge(p *Proxy, name string) int64 { return p.Stats.Gauge(name).Load() }

// A listener LDS adds is not bound until the route configuration it names
// arrives: a client is refused, never answered 404 NR; then it serves.
// The config dump shows it warming meanwhile.
func TestNewListenerWarmsUntilItsRoutes(t *testing.T) {
	srv := xdstest.Start(t)
	be := named(t, "a")
	first, added := freeAddr(t), freeAddr(t)
	srv.Set(xdsapi.ClusterType, "1", edsCluster("a"))
	srv.Set(xdsapi.EndpointType, "1", cla("a", be.Listener.Addr().String()))
	srv.Set(xdsapi.RouteType, "1", singleRoute("80", "a"))
	srv.Set(xdsapi.ListenerType, "1", httpListener(t, "first", first, "80"))
	p := startDrainProxy(t, srv)

	srv.Set(xdsapi.ListenerType, "2", httpListener(t, "first", first, "80"), httpListener(t, "added", added, "late"))
	acked(t, srv, xdsapi.ListenerType, "2")
	subscribed(t, srv, "late")
	if !refused(added) {
		t.Fatal("the warming listener accepts connections before its route configuration came")
	}
	if got := listenerStates(t, p); got["added"] != [2]string{"", "warming@2"} || got["first"] != [2]string{"active@1", ""} {
		t.Errorf("config dump listener states = %v, want added warming@2 only, first active@1", got)
	}
	if w, a := gauge(p, "listener_manager.total_listeners_warming"), gauge(p, "listener_manager.total_listeners_active"); w != 1 || a != 1 {
		t.Errorf("total_listeners_warming %d, total_listeners_active %d; want 1 and 1", w, a)
	}
	if code, body, err := get(http.DefaultClient, "http://"+first+"/"); err != nil || code != 200 || body != "a" {
		t.Errorf("the other listener while one warms: %d %q %v", code, body, err)
	}

	srv.Set(xdsapi.RouteType, "2", singleRoute("80", "a"), singleRoute("late", "a"))
	client := &http.Client{Timeout: 5 * time.Second}
	waitFor(t, 10*time.Second, "the added listener to serve", func() bool {
		code, body, err := get(client, "http://"+added+"/")
		if err == nil && code != 200 {
			t.Fatalf("the added listener answered %d %q before serving 200", code, body)
		}
		return err == nil
	})
	if got := listenerStates(t, p); got["added"] != [2]string{"active@2", ""} {
		t.Errorf("config dump of the warmed listener = %v, want active@2 only", got["added"])
	}
	if w, a := gauge(p, "listener_manager.total_listeners_warming"), gauge(p, "listener_manager.total_listeners_active"); w != 0 || a != 2 {
		t.Errorf("after warming: total_listeners_warming %d, total_listeners_active %d; want 0 and 2", w, a)
	}
	if n := p.Stats.Counter("listener_manager.listener_added").Load(); n != 2 {
		t.Errorf("listener_added = %d, want 2", n)
	}
}

// An LDS update that names a new route configuration keeps the old
// version serving from its routes, under constant load, until the new
// routes arrive; then the new version serves. No request fails.
func TestUpdatedListenerServesOldVersionWhileWarming(t *testing.T) {
	srv := xdstest.Start(t)
	a, b := named(t, "a"), named(t, "b")
	addr := freeAddr(t)
	srv.Set(xdsapi.ClusterType, "1", edsCluster("a"), edsCluster("b"))
	srv.Set(xdsapi.EndpointType, "1", cla("a", a.Listener.Addr().String()), cla("b", b.Listener.Addr().String()))
	srv.Set(xdsapi.RouteType, "1", singleRoute("80", "a"))
	srv.Set(xdsapi.ListenerType, "1", httpListener(t, "http", addr, "80"))
	p := startDrainProxy(t, srv)

	l := startLoad(t, "http://"+addr+"/", 4, "a", "b")
	l.marked.Store(true)
	waitFor(t, 10*time.Second, "load through the listener", func() bool { return l.bodies["a"].Load() > 20 })

	srv.Set(xdsapi.ListenerType, "2", httpListener(t, "http", addr, "80b"))
	acked(t, srv, xdsapi.ListenerType, "2")
	subscribed(t, srv, "80b")
	if got := listenerStates(t, p); got["http"] != [2]string{"active@1", "warming@2"} {
		t.Errorf("config dump while warming = %v, want active@1 and warming@2", got["http"])
	}
	// The old version goes on answering from route configuration 80.
	before := l.bodies["a"].Load()
	waitFor(t, 10*time.Second, "the old version to keep serving while the new one warms", func() bool {
		return l.bodies["a"].Load() > before+50
	})
	if n := l.bodies["b"].Load(); n != 0 {
		t.Errorf("%d answers from the new routes before they came", n)
	}

	srv.Set(xdsapi.RouteType, "2", singleRoute("80", "a"), singleRoute("80b", "b"))
	waitFor(t, 10*time.Second, "the new version to serve", func() bool { return l.bodies["b"].Load() > 50 })
	l.check(t)
	if got := listenerStates(t, p); got["http"] != [2]string{"active@2", ""} {
		t.Errorf("config dump once warm = %v, want active@2 only", got["http"])
	}
	if n := p.Stats.Counter("listener_manager.listener_modified").Load(); n != 1 {
		t.Errorf("listener_modified = %d, want 1", n)
	}
}

// The first LDS response's listeners warm too: the proxy is not ready and
// does not accept until their routes come.
func TestInitialListenersWaitForRoutes(t *testing.T) {
	srv := xdstest.Start(t)
	be := named(t, "a")
	addr := freeAddr(t)
	p, err := New(Options{Bootstrap: adsBootstrap(srv.Addr), Logger: testLogger(t), AdminAddress: "127.0.0.1:0",
		XDSBackoff: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	srv.Set(xdsapi.ClusterType, "1", edsCluster("a"))
	srv.Set(xdsapi.EndpointType, "1", cla("a", be.Listener.Addr().String()))
	srv.Set(xdsapi.ListenerType, "1", httpListener(t, "http", addr, "80"))
	acked(t, srv, xdsapi.EndpointType, "1")
	acked(t, srv, xdsapi.ListenerType, "1")
	subscribed(t, srv, "80")
	if p.Ready() {
		t.Error("ready while the listener waits for its routes")
	}
	if s := gauge(p, "server.state"); s != stateInitializing {
		t.Errorf("server.state = %d while the first listeners warm, want 3 (INITIALIZING)", s)
	}
	if code, body, err := get(http.DefaultClient, "http://"+p.AdminAddr().String()+"/ready"); err != nil || code != 503 || body != "INITIALIZING\n" {
		t.Errorf("/ready while the first listeners warm = %d %q %v, want 503 INITIALIZING", code, body, err)
	}
	if !refused(addr) {
		t.Error("the listener accepts before its routes came")
	}
	srv.Set(xdsapi.RouteType, "1", singleRoute("80", "a"))
	waitFor(t, 10*time.Second, "ready", p.Ready)
	if code, body, err := get(http.DefaultClient, "http://"+addr+"/"); err != nil || code != 200 || body != "a" {
		t.Errorf("once ready: %d %q %v", code, body, err)
	}
}

// rdsTimeout sets the initial_fetch_timeout of a listener's RDS config
// source.
func rdsTimeout(t *testing.T, l *listenerv3.Listener, d time.Duration) *listenerv3.Listener {
	f := l.FilterChains[0].Filters[0]
	var h hcmv3.HttpConnectionManager
	if err := f.GetTypedConfig().UnmarshalTo(&h); err != nil {
		t.Fatal(err)
	}
	h.GetRds().GetConfigSource().InitialFetchTimeout = durationpb.New(d)
	f.ConfigType = &listenerv3.Filter_TypedConfig{TypedConfig: toAny(t, &h)}
	return l
}

// A listener whose route configuration does not come within its RDS
// config source's initial_fetch_timeout stops warming and serves without
// it (404 NR), as Envoy does; with initial_fetch_timeout 0 it warms until
// the routes come.
func TestWarmingEndsAtInitialFetchTimeout(t *testing.T) {
	srv := xdstest.Start(t)
	be := named(t, "a")
	first, timed, forever := freeAddr(t), freeAddr(t), freeAddr(t)
	srv.Set(xdsapi.ClusterType, "1", edsCluster("a"))
	srv.Set(xdsapi.EndpointType, "1", cla("a", be.Listener.Addr().String()))
	srv.Set(xdsapi.RouteType, "1", singleRoute("80", "a"))
	srv.Set(xdsapi.ListenerType, "1", httpListener(t, "first", first, "80"))
	p := startDrainProxy(t, srv)

	srv.Set(xdsapi.ListenerType, "2", httpListener(t, "first", first, "80"),
		rdsTimeout(t, httpListener(t, "timed", timed, "never"), 500*time.Millisecond),
		rdsTimeout(t, httpListener(t, "forever", forever, "missing"), 0))
	acked(t, srv, xdsapi.ListenerType, "2")
	client := &http.Client{Timeout: 5 * time.Second}
	var resp *http.Response
	waitFor(t, 10*time.Second, "the timed listener to serve without its routes", func() bool {
		r, err := client.Get("http://" + timed + "/")
		if err != nil {
			return false
		}
		r.Body.Close()
		resp = r
		return true
	})
	if resp.StatusCode != 404 || resp.Header.Get("x-strait-response-flags") != "NR" {
		t.Errorf("after the initial fetch timeout: %d flags %q, want 404 NR", resp.StatusCode, resp.Header.Get("x-strait-response-flags"))
	}
	if !refused(forever) {
		t.Error("a listener whose RDS has initial_fetch_timeout 0 stopped warming")
	}
	if got := listenerStates(t, p); got["forever"] != [2]string{"", "warming@2"} || got["timed"] != [2]string{"active@2", ""} {
		t.Errorf("config dump = %v, want forever warming@2, timed active@2", got)
	}
	srv.Set(xdsapi.RouteType, "2", singleRoute("80", "a"), singleRoute("missing", "a"))
	waitFor(t, 10*time.Second, "the forever listener to serve once its routes came", func() bool {
		code, body, err := get(client, "http://"+forever+"/")
		return err == nil && code == 200 && body == "a"
	})
}

// A rejected RDS response ends the wait for the route configurations it
// carried, as Envoy's RDS subscription counts a failed update as its
// initial fetch done: the listener serves without them (404 NR), even
// with initial_fetch_timeout 0.
func TestWarmingEndsWhenRoutesAreRejected(t *testing.T) {
	srv := xdstest.Start(t)
	be := named(t, "a")
	first, added := freeAddr(t), freeAddr(t)
	srv.Set(xdsapi.ClusterType, "1", edsCluster("a"))
	srv.Set(xdsapi.EndpointType, "1", cla("a", be.Listener.Addr().String()))
	srv.Set(xdsapi.RouteType, "1", singleRoute("80", "a"))
	srv.Set(xdsapi.ListenerType, "1", httpListener(t, "first", first, "80"))
	p := startDrainProxy(t, srv)

	srv.Set(xdsapi.ListenerType, "2", httpListener(t, "first", first, "80"),
		rdsTimeout(t, httpListener(t, "added", added, "bad"), 0))
	acked(t, srv, xdsapi.ListenerType, "2")
	subscribed(t, srv, "bad")
	if !refused(added) {
		t.Fatal("the listener accepts before its routes came")
	}
	bad := singleRoute("bad", "a")
	bad.VirtualHosts[0].Name = "" // fails validation: the response is NACKed
	srv.Set(xdsapi.RouteType, "2", singleRoute("80", "a"), bad)
	srv.WaitRequest(t, 10*time.Second, func(r *discoveryv3.DiscoveryRequest) bool {
		return r.GetTypeUrl() == xdsapi.RouteType && r.GetErrorDetail() != nil
	})
	client := &http.Client{Timeout: 5 * time.Second}
	var code int
	var flags string
	waitFor(t, 10*time.Second, "the listener to serve after its routes were rejected", func() bool {
		r, err := client.Get("http://" + added + "/")
		if err != nil {
			return false
		}
		r.Body.Close()
		code, flags = r.StatusCode, r.Header.Get("x-strait-response-flags")
		return true
	})
	if code != 404 || flags != "NR" {
		t.Errorf("after the rejected RDS response: %d flags %q, want 404 NR", code, flags)
	}
	if got := listenerStates(t, p); got["added"] != [2]string{"active@2", ""} {
		t.Errorf("config dump = %v, want added active@2", got["added"])
	}
}
