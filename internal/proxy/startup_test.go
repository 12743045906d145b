package proxy

import (
	"context"
	"net/http"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tcpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/straitmesh/strait/internal/proxy/xdstest"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// startProxy starts a proxy on b without waiting for it to be ready.
func startProxy(t *testing.T, b *bootstrapv3.Bootstrap) *Proxy {
	t.Helper()
	p, err := New(Options{Bootstrap: b, Logger: testLogger(t), AdminAddress: "127.0.0.1:0", XDSBackoff: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// askedFor reports whether the proxy has sent a request of typeURL.
func askedFor(srv *xdstest.Server, typeURL string) bool {
	for _, r := range srv.Requests() {
		if r.GetTypeUrl() == typeURL {
			return true
		}
	}
	return false
}

// edsFetchTimeout sets a cluster's eds_config initial_fetch_timeout.
func edsFetchTimeout(c *clusterv3.Cluster, d time.Duration) *clusterv3.Cluster {
	c.EdsClusterConfig.EdsConfig.InitialFetchTimeout = durationpb.New(d)
	return c
}

func readyStatus(t *testing.T, p *Proxy) int {
	t.Helper()
	resp, err := http.Get("http://" + p.AdminAddr().String() + "/ready")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// The proxy asks for listeners only once the clusters of the first CDS
// response have their endpoints, as Envoy's server initializes: until
// then no listener accepts and /ready says 503; once EDS comes the
// listener serves the cluster's endpoint at once, never 503 "no healthy
// upstream".
func TestListenersWaitForInitialClusters(t *testing.T) {
	srv := xdstest.Start(t)
	be := named(t, "a")
	addr := freeAddr(t)
	srv.Set(xdsapi.ClusterType, "1", edsCluster("a"))
	srv.Set(xdsapi.RouteType, "1", singleRoute("80", "a"))
	srv.Set(xdsapi.ListenerType, "1", httpListener(t, "http", addr, "80"))
	// A static listener of the bootstrap waits too.
	b := adsBootstrap(srv.Addr)
	static := freeAddr(t)
	b.StaticResources.Clusters = append(b.StaticResources.Clusters, &clusterv3.Cluster{
		Name: "static-be", ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		LoadAssignment: cla("static-be", be.Listener.Addr().String())})
	b.StaticResources.Listeners = []*listenerv3.Listener{{Name: "static", Address: socketAddr(static),
		FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{{Name: "envoy.filters.network.tcp_proxy",
			ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: toAny(t, &tcpv3.TcpProxy{StatPrefix: "static",
				ClusterSpecifier: &tcpv3.TcpProxy_Cluster{Cluster: "static-be"}})}}}}}}}
	p := startProxy(t, b)

	acked(t, srv, xdsapi.ClusterType, "1")
	srv.WaitRequest(t, 10*time.Second, func(r *discoveryv3.DiscoveryRequest) bool {
		return r.GetTypeUrl() == xdsapi.EndpointType && len(r.GetResourceNames()) == 1 && r.GetResourceNames()[0] == "a"
	})
	if askedFor(srv, xdsapi.ListenerType) {
		t.Error("the proxy asked for listeners while the first CDS response's cluster waits for its endpoints")
	}
	if !refused(addr) {
		t.Error("the listener accepts while its cluster waits for its endpoints")
	}
	if !refused(static) {
		t.Error("the static listener accepts before the start-up is done")
	}
	if a, ok := p.Listeners.Addr("static"); !ok || a.String() != static {
		t.Errorf("static listener's address = %v %t, want bound to %s", a, ok, static)
	}
	if code := readyStatus(t, p); code != 503 {
		t.Errorf("/ready = %d while clusters warm, want 503", code)
	}
	if s, w := gauge(p, "server.state"), gauge(p, "listener_manager.workers_started"); s != statePreInitializing || w != 0 {
		t.Errorf("server.state %d, workers_started %d while clusters warm; want 2 (PRE_INITIALIZING) and 0", s, w)
	}

	srv.Set(xdsapi.EndpointType, "1", cla("a", be.Listener.Addr().String()))
	acked(t, srv, xdsapi.ListenerType, "1")
	waitFor(t, 10*time.Second, "ready", p.Ready)
	if code, body, err := get(http.DefaultClient, "http://"+addr+"/"); err != nil || code != 200 || body != "a" {
		t.Errorf("first request once ready: %d %q %v, want 200 a", code, body, err)
	}
	if code := readyStatus(t, p); code != 200 {
		t.Errorf("/ready = %d once ready, want 200", code)
	}
	if s, w := gauge(p, "server.state"), gauge(p, "listener_manager.workers_started"); s != stateLive || w != 1 {
		t.Errorf("server.state %d, workers_started %d once ready; want 0 (LIVE) and 1", s, w)
	}
	if code, body, err := get(http.DefaultClient, "http://"+static+"/"); err != nil || code != 200 || body != "a" {
		t.Errorf("through the static listener once ready: %d %q %v, want 200 a", code, body, err)
	}
}

// An EDS cluster whose endpoints do not come within its eds_config's
// initial_fetch_timeout stops warming with no endpoints (503 until they
// come), and the start-up goes on; one with initial_fetch_timeout 0 holds
// it until its endpoints come.
func TestClusterInitialFetchTimeout(t *testing.T) {
	srv := xdstest.Start(t)
	be := named(t, "a")
	addr := freeAddr(t)
	srv.Set(xdsapi.ClusterType, "1", edsFetchTimeout(edsCluster("a"), 200*time.Millisecond), edsFetchTimeout(edsCluster("f"), 0))
	srv.Set(xdsapi.RouteType, "1", singleRoute("80", "a"))
	srv.Set(xdsapi.ListenerType, "1", httpListener(t, "http", addr, "80"))
	p := startProxy(t, adsBootstrap(srv.Addr))

	waitFor(t, 10*time.Second, "cluster a to stop warming at its initial fetch timeout", func() bool { return p.Clusters.Get("a") != nil })
	if askedFor(srv, xdsapi.ListenerType) {
		t.Error("the proxy asked for listeners while a cluster with initial_fetch_timeout 0 waits for its endpoints")
	}
	if p.Clusters.Get("f") != nil || p.Clusters.Warming() != 1 {
		t.Errorf("cluster f active %t, warming %d; want f still warming", p.Clusters.Get("f") != nil, p.Clusters.Warming())
	}
	if s := gauge(p, "cluster_manager.warming_clusters"); s != 1 {
		t.Errorf("cluster_manager.warming_clusters = %d, want 1", s)
	}

	srv.Set(xdsapi.EndpointType, "1", cla("f", be.Listener.Addr().String()))
	acked(t, srv, xdsapi.ListenerType, "1")
	waitFor(t, 10*time.Second, "ready", p.Ready)
	if code, _, err := get(http.DefaultClient, "http://"+addr+"/"); err != nil || code != 503 {
		t.Errorf("request to the cluster that timed out: %d %v, want 503 (no endpoints)", code, err)
	}
	srv.Set(xdsapi.EndpointType, "2", cla("f", be.Listener.Addr().String()), cla("a", be.Listener.Addr().String()))
	waitFor(t, 10*time.Second, "cluster a to serve once its endpoints came", func() bool {
		code, body, err := get(http.DefaultClient, "http://"+addr+"/")
		return err == nil && code == 200 && body == "a"
	})
}

// With no CDS response within cds_config's initial_fetch_timeout, the
// proxy goes on to ask for listeners; with no LDS response within
// lds_config's, it is ready without them. A rejected first CDS response
// ends the wait at once.
func TestInitialFetchTimeoutsOfCDSAndLDS(t *testing.T) {
	t.Run("timeouts", func(t *testing.T) {
		srv := xdstest.Start(t)
		b := adsBootstrap(srv.Addr)
		b.DynamicResources.CdsConfig.InitialFetchTimeout = durationpb.New(200 * time.Millisecond)
		b.DynamicResources.LdsConfig.InitialFetchTimeout = durationpb.New(200 * time.Millisecond)
		p := startProxy(t, b)
		srv.WaitRequest(t, 10*time.Second, func(r *discoveryv3.DiscoveryRequest) bool {
			return r.GetTypeUrl() == xdsapi.ListenerType
		})
		if !p.Ready() {
			if s := gauge(p, "server.state"); s != stateInitializing && !p.Ready() {
				t.Errorf("server.state = %d while waiting for listeners, want 3 (INITIALIZING)", s)
			}
		}
		waitFor(t, 10*time.Second, "ready without CDS and LDS", p.Ready)
	})
	t.Run("no timeout", func(t *testing.T) {
		srv := xdstest.Start(t)
		b := adsBootstrap(srv.Addr)
		b.DynamicResources.CdsConfig.InitialFetchTimeout = durationpb.New(0)
		b.DynamicResources.LdsConfig.InitialFetchTimeout = durationpb.New(200 * time.Millisecond)
		p := startProxy(t, b)
		srv.WaitRequest(t, 10*time.Second, func(r *discoveryv3.DiscoveryRequest) bool {
			return r.GetTypeUrl() == xdsapi.ClusterType
		})
		// A rejected CDS response ends the wait for the first one.
		bad := edsCluster("bad")
		bad.ConnectTimeout = durationpb.New(-time.Second)
		srv.Set(xdsapi.ClusterType, "1", bad)
		srv.WaitRequest(t, 10*time.Second, func(r *discoveryv3.DiscoveryRequest) bool {
			return r.GetTypeUrl() == xdsapi.ClusterType && r.GetErrorDetail() != nil
		})
		srv.WaitRequest(t, 10*time.Second, func(r *discoveryv3.DiscoveryRequest) bool {
			return r.GetTypeUrl() == xdsapi.ListenerType
		})
		waitFor(t, 10*time.Second, "ready", p.Ready)
	})
	t.Run("invalid", func(t *testing.T) {
		b := adsBootstrap("127.0.0.1:1")
		b.DynamicResources.LdsConfig.InitialFetchTimeout = durationpb.New(-time.Second)
		if _, err := New(Options{Bootstrap: b, Logger: testLogger(t)}); err == nil {
			t.Error("a negative lds_config.initial_fetch_timeout was accepted")
		}
	})
}
