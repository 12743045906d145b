package proxy

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/freeport"
	"github.com/straitmesh/strait/internal/proxy/bootstrap"
	"github.com/straitmesh/strait/internal/proxy/xdstest"
	"github.com/straitmesh/strait/internal/xdsapi"
)

func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("PROXY_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

func socketAddr(hostport string) *corev3.Address {
	host, port, _ := net.SplitHostPort(hostport)
	var p uint32
	_, _ = fmt.Sscan(port, &p)
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address: host, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: p}}}}
}

func ads() *corev3.ConfigSource {
	return &corev3.ConfigSource{
		ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
		ResourceApiVersion:    corev3.ApiVersion_V3,
	}
}

func toAny(t testing.TB, m proto.Message) *anypb.Any {
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func adsBootstrap(adsAddr string) *bootstrapv3.Bootstrap {
	return &bootstrapv3.Bootstrap{
		Node: &corev3.Node{Id: "sidecar~127.0.0.1~pod.ns~ns.svc.cluster.local", Cluster: "pod.ns"},
		DynamicResources: &bootstrapv3.Bootstrap_DynamicResources{
			AdsConfig: &corev3.ApiConfigSource{
				ApiType:             corev3.ApiConfigSource_GRPC,
				TransportApiVersion: corev3.ApiVersion_V3,
				GrpcServices: []*corev3.GrpcService{{TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{
					EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: "xds-grpc"}}}},
			},
			CdsConfig: ads(),
			LdsConfig: ads(),
		},
		StaticResources: &bootstrapv3.Bootstrap_StaticResources{
			Clusters: []*clusterv3.Cluster{{
				Name:                 "xds-grpc",
				ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
				ConnectTimeout:       durationpb.New(time.Second),
				LoadAssignment:       cla("xds-grpc", adsAddr),
			}},
		},
	}
}

func cla(name string, addrs ...string) *endpointv3.ClusterLoadAssignment {
	var lbs []*endpointv3.LbEndpoint
	for _, a := range addrs {
		lbs = append(lbs, &endpointv3.LbEndpoint{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{
			Endpoint: &endpointv3.Endpoint{Address: socketAddr(a)}}})
	}
	return &endpointv3.ClusterLoadAssignment{ClusterName: name,
		Endpoints: []*endpointv3.LocalityLbEndpoints{{LbEndpoints: lbs}}}
}

func edsCluster(name string) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name:                 name,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig:     &clusterv3.Cluster_EdsClusterConfig{ServiceName: name, EdsConfig: ads()},
		ConnectTimeout:       durationpb.New(10 * time.Second),
		LbPolicy:             clusterv3.Cluster_ROUND_ROBIN,
	}
}

func httpListener(t testing.TB, name, addr, rds string) *listenerv3.Listener {
	h := &hcmv3.HttpConnectionManager{
		StatPrefix:     name,
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{RouteConfigName: rds, ConfigSource: ads()}},
		HttpFilters: []*hcmv3.HttpFilter{{Name: "envoy.filters.http.router",
			ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: toAny(t, &routerv3.Router{})}}},
	}
	return &listenerv3.Listener{
		Name:    name,
		Address: socketAddr(addr),
		FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{{
			Name:       "envoy.filters.network.http_connection_manager",
			ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: toAny(t, h)},
		}}}},
	}
}

func weightedRoute(name string, wa, wb uint32) *routev3.RouteConfiguration {
	return &routev3.RouteConfiguration{Name: name, VirtualHosts: []*routev3.VirtualHost{{
		Name: "all", Domains: []string{"*"},
		Routes: []*routev3.Route{
			{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: "/only-a"}},
				Action: &routev3.Route_Route{Route: &routev3.RouteAction{
					ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "a"}}}},
			{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
				Action: &routev3.Route_Route{Route: &routev3.RouteAction{
					ClusterSpecifier: &routev3.RouteAction_WeightedClusters{WeightedClusters: &routev3.WeightedCluster{
						Clusters: []*routev3.WeightedCluster_ClusterWeight{
							{Name: "a", Weight: wrapperspb.UInt32(wa)},
							{Name: "b", Weight: wrapperspb.UInt32(wb)},
						}}}}}},
		},
	}}}
}

// freeAddr is a loopback address for a listener an xDS push binds later
// (or for nothing to listen on), outside the kernel's ephemeral range.
func freeAddr(t testing.TB) string {
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

func backend(t testing.TB, name string) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Request-Id") == "" || r.Header.Get("X-Forwarded-Proto") != "http" {
			w.WriteHeader(http.StatusBadRequest)
		}
		fmt.Fprint(w, name)
	}))
	t.Cleanup(s.Close)
	return s
}

func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func get(c *http.Client, url string) (int, string, error) {
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func TestEndToEndADS(t *testing.T) {
	srv := xdstest.Start(t)
	a, b := backend(t, "a"), backend(t, "b")
	lnAddr := freeAddr(t)

	p, err := New(Options{Bootstrap: adsBootstrap(srv.Addr), Logger: testLogger(t), AdminAddress: "127.0.0.1:0",
		Concurrency: 2, XDSBackoff: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	admin := "http://" + p.AdminAddr().String()
	client := &http.Client{Timeout: 5 * time.Second}

	// Before any config: PRE_INITIALIZING.
	if code, body, err := get(client, admin+"/ready"); err != nil || code != 503 || !strings.Contains(body, "PRE_INITIALIZING") {
		t.Fatalf("/ready before config = %d %q %v", code, body, err)
	}

	srv.Set(xdsapi.ClusterType, "1", edsCluster("a"), edsCluster("b"))
	srv.Set(xdsapi.ListenerType, "1", httpListener(t, "http", lnAddr, "80"))
	srv.Set(xdsapi.EndpointType, "1", cla("a", a.Listener.Addr().String()), cla("b", b.Listener.Addr().String()))
	srv.Set(xdsapi.RouteType, "1", weightedRoute("80", 50, 50))

	waitFor(t, 10*time.Second, "/ready LIVE", func() bool {
		code, body, _ := get(client, admin+"/ready")
		return code == 200 && strings.Contains(body, "LIVE")
	})

	// ACKs: every type acknowledged version 1 with its nonce.
	for _, typ := range []string{xdsapi.ClusterType, xdsapi.ListenerType, xdsapi.EndpointType, xdsapi.RouteType} {
		srv.WaitRequest(t, 5*time.Second, func(r *discoveryv3.DiscoveryRequest) bool {
			return r.GetTypeUrl() == typ && r.GetVersionInfo() == "1" && r.GetResponseNonce() != "" && r.GetErrorDetail() == nil
		})
	}
	eds := srv.WaitRequest(t, time.Second, func(r *discoveryv3.DiscoveryRequest) bool { return r.GetTypeUrl() == xdsapi.EndpointType })
	if got := strings.Join(eds.GetResourceNames(), ","); got != "a,b" {
		t.Errorf("EDS subscription = %q, want a,b", got)
	}

	base := "http://" + lnAddr
	counts := func(n int, path string) map[string]int {
		t.Helper()
		m := map[string]int{}
		for range n {
			code, body, err := get(client, base+path)
			if err != nil || code != 200 {
				t.Fatalf("GET %s = %d %q %v", path, code, body, err)
			}
			m[body]++
		}
		return m
	}
	m := counts(200, "/")
	if m["a"] < 50 || m["b"] < 50 {
		t.Errorf("weighted 50/50 split = %v", m)
	}
	if m := counts(20, "/only-a"); m["a"] != 20 {
		t.Errorf("/only-a = %v", m)
	}

	// NACK: an invalid cluster (a LOGICAL_DNS cluster needs one endpoint)
	// rejects the whole response; old config stays.
	bad := edsCluster("c")
	bad.ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_LOGICAL_DNS}
	srv.Set(xdsapi.ClusterType, "2", edsCluster("a"), edsCluster("b"), bad)
	nack := srv.WaitRequest(t, 5*time.Second, func(r *discoveryv3.DiscoveryRequest) bool {
		return r.GetTypeUrl() == xdsapi.ClusterType && r.GetErrorDetail() != nil
	})
	if nack.GetVersionInfo() != "1" || !strings.Contains(nack.GetErrorDetail().GetMessage(), `"c"`) {
		t.Errorf("NACK = version %q detail %q; want version 1 and a detail naming cluster c", nack.GetVersionInfo(), nack.GetErrorDetail().GetMessage())
	}
	// Also a cluster failing ValidateAll (empty name).
	srv.Set(xdsapi.ClusterType, "3", edsCluster("a"), edsCluster("b"), &clusterv3.Cluster{})
	srv.WaitRequest(t, 5*time.Second, func(r *discoveryv3.DiscoveryRequest) bool {
		return r.GetTypeUrl() == xdsapi.ClusterType && r.GetErrorDetail() != nil && r.GetVersionInfo() == "1" &&
			strings.Contains(r.GetErrorDetail().GetMessage(), "invalid")
	})
	if m := counts(50, "/"); m["a"] == 0 || m["b"] == 0 {
		t.Errorf("after NACK, split = %v", m)
	}

	// Route updates and unchanged re-pushes under continuous load drop nothing.
	var ok, failed atomic.Int64
	var firstErr atomic.Value
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				code, body, err := get(client, base+"/")
				if err != nil || code != 200 {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Sprintf("%d %q %v", code, body, err))
					continue
				}
				ok.Add(1)
			}
		}()
	}
	for i := range 10 {
		v := fmt.Sprint(10 + i)
		srv.Set(xdsapi.RouteType, v, weightedRoute("80", uint32(1+i), uint32(10-i)))
		srv.Set(xdsapi.ClusterType, v, edsCluster("a"), edsCluster("b"))
		srv.Set(xdsapi.ListenerType, v, httpListener(t, "http", lnAddr, "80"))
		srv.WaitRequest(t, 5*time.Second, func(r *discoveryv3.DiscoveryRequest) bool {
			return r.GetTypeUrl() == xdsapi.RouteType && r.GetVersionInfo() == v
		})
		time.Sleep(20 * time.Millisecond)
	}
	// Finally send everything to b only.
	srv.Set(xdsapi.RouteType, "99", weightedRoute("80", 0, 1))
	srv.WaitRequest(t, 5*time.Second, func(r *discoveryv3.DiscoveryRequest) bool {
		return r.GetTypeUrl() == xdsapi.RouteType && r.GetVersionInfo() == "99"
	})
	cancel()
	wg.Wait()
	if failed.Load() != 0 || ok.Load() == 0 {
		t.Errorf("during updates: %d ok, %d failed (first: %v)", ok.Load(), failed.Load(), firstErr.Load())
	}
	if m := counts(20, "/"); m["b"] != 20 {
		t.Errorf("after weight 0/1 = %v", m)
	}

	// Upstream connections are pooled (keep-alive), not one per request.
	if a := p.Stats.Cluster("a"); a.CxTotal.Load()*4 > a.RqTotal.Load() {
		t.Errorf("cluster a: %d upstream connections for %d requests", a.CxTotal.Load(), a.RqTotal.Load())
	}
	t.Logf("cluster a: %d upstream connections for %d requests", p.Stats.Cluster("a").CxTotal.Load(), p.Stats.Cluster("a").RqTotal.Load())

	// Stats.
	_, prom, err := get(client, admin+"/stats/prometheus")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`envoy_cluster_upstream_rq_total{cluster_name="a"}`,
		`envoy_cluster_upstream_rq{envoy_response_code="200",cluster_name="b"}`,
		`envoy_cluster_upstream_cx_total{cluster_name="a"}`,
		`envoy_listener_downstream_cx_total{envoy_listener_address="127.0.0.1_`,
		"envoy_cluster_manager_cds_update_rejected 2",
		"envoy_cluster_manager_cds_update_success ",
	} {
		if !strings.Contains(prom, want) {
			t.Errorf("/stats/prometheus lacks %q:\n%s", want, prom)
		}
	}
	// Config dump parses and carries versions.
	_, dump, err := get(client, admin+"/config_dump")
	if err != nil || !regexp.MustCompile(`"versionInfo":\s*"99"`).MatchString(dump) || !strings.Contains(dump, "ClustersConfigDump") {
		t.Errorf("/config_dump: %v\n%.2000s", err, dump)
	}
}

func TestNoHealthyUpstreamAndConnectFailure(t *testing.T) {
	srv := xdstest.Start(t)
	lnAddr := freeAddr(t)
	dead := freeAddr(t) // nothing listens here
	p, err := New(Options{Bootstrap: adsBootstrap(srv.Addr), Logger: testLogger(t), AdminAddress: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	srv.Set(xdsapi.ClusterType, "1", edsCluster("a"), edsCluster("b"))
	srv.Set(xdsapi.ListenerType, "1", httpListener(t, "http", lnAddr, "80"))
	srv.Set(xdsapi.EndpointType, "1", cla("a"), cla("b", dead))
	srv.Set(xdsapi.RouteType, "1", weightedRoute("80", 1, 0))
	waitFor(t, 10*time.Second, "ready", p.Ready)
	client := &http.Client{Timeout: 5 * time.Second}
	code, body, err := get(client, "http://"+lnAddr+"/")
	if err != nil || code != 503 || body != "no healthy upstream" {
		t.Errorf("empty cluster: %d %q %v", code, body, err)
	}
	srv.Set(xdsapi.RouteType, "2", weightedRoute("80", 0, 1))
	srv.WaitRequest(t, 5*time.Second, func(r *discoveryv3.DiscoveryRequest) bool {
		return r.GetTypeUrl() == xdsapi.RouteType && r.GetVersionInfo() == "2"
	})
	code, body, err = get(client, "http://"+lnAddr+"/")
	if err != nil || code != 503 || !strings.Contains(body, "upstream connect error") {
		t.Errorf("connect failure: %d %q %v", code, body, err)
	}
}

func TestBootstrapLoadsAndServesStatic(t *testing.T) {
	b, err := bootstrap.Parse([]byte(`
admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}
static_resources:
  clusters: []
`))
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(Options{Bootstrap: b, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if !p.Ready() {
		t.Error("a proxy without ADS must be ready at once")
	}
}

func TestADSOverPipeAndReconnect(t *testing.T) {
	dir := t.TempDir()
	sock := dir + "/XDS"
	srv := xdstest.StartAt(t, "unix", sock)
	b := adsBootstrap("127.0.0.1:1")
	b.StaticResources.Clusters[0].LoadAssignment.Endpoints[0].LbEndpoints[0].GetEndpoint().Address =
		&corev3.Address{Address: &corev3.Address_Pipe{Pipe: &corev3.Pipe{Path: sock}}}
	backendA := backend(t, "a")
	lnAddr := freeAddr(t)
	p, err := New(Options{Bootstrap: b, Logger: testLogger(t), AdminAddress: "127.0.0.1:0", XDSBackoff: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	set := func(s *xdstest.Server) {
		s.Set(xdsapi.ClusterType, "7", edsCluster("a"), edsCluster("b"))
		s.Set(xdsapi.ListenerType, "7", httpListener(t, "http", lnAddr, "80"))
		s.Set(xdsapi.EndpointType, "7", cla("a", backendA.Listener.Addr().String()), cla("b", backendA.Listener.Addr().String()))
		s.Set(xdsapi.RouteType, "7", weightedRoute("80", 1, 1))
	}
	set(srv)
	waitFor(t, 10*time.Second, "ready", p.Ready)
	srv.Stop()
	os.Remove(sock)

	// The proxy keeps serving without a control plane...
	client := &http.Client{Timeout: 5 * time.Second}
	if code, body, err := get(client, "http://"+lnAddr+"/"); code != 200 || body != "a" {
		t.Fatalf("without control plane: %d %q %v", code, body, err)
	}
	// ...and resubscribes with its last accepted versions when it comes back.
	srv2 := xdstest.StartAt(t, "unix", sock)
	set(srv2)
	for _, typ := range []string{xdsapi.ClusterType, xdsapi.ListenerType, xdsapi.EndpointType, xdsapi.RouteType} {
		r := srv2.WaitRequest(t, 10*time.Second, func(r *discoveryv3.DiscoveryRequest) bool { return r.GetTypeUrl() == typ })
		if r.GetVersionInfo() != "7" {
			t.Errorf("%s resubscribed with version %q, want 7", typ, r.GetVersionInfo())
		}
	}
	if n := srv2.Requests()[0].GetNode().GetId(); n == "" {
		t.Error("first request of the new stream carries no node")
	}
}
