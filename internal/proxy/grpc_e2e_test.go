package proxy

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	upstreamhttp "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"golang.org/x/net/http2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/grpctest"
	"github.com/straitmesh/strait/internal/proxy/xdstest"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// h2EDSCluster is an EDS cluster that speaks HTTP/2 upstream, as straitd
// generates it for a GRPC or HTTP2 port.
func h2EDSCluster(t testing.TB, name string) *clusterv3.Cluster {
	c := edsCluster(name)
	c.TypedExtensionProtocolOptions = map[string]*anypb.Any{cluster.HTTPProtocolOptionsKey: toAny(t, &upstreamhttp.HttpProtocolOptions{
		UpstreamProtocolOptions: &upstreamhttp.HttpProtocolOptions_ExplicitHttpConfig_{
			ExplicitHttpConfig: &upstreamhttp.HttpProtocolOptions_ExplicitHttpConfig{
				ProtocolConfig: &upstreamhttp.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{
					Http2ProtocolOptions: &corev3.Http2ProtocolOptions{MaxConcurrentStreams: wrapperspb.UInt32(1073741824)},
				}}}})}
	return c
}

func singleRoute(name, clusterName string) *routev3.RouteConfiguration {
	return &routev3.RouteConfiguration{Name: name, VirtualHosts: []*routev3.VirtualHost{{
		Name: "all", Domains: []string{"*"},
		Routes: []*routev3.Route{{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
			Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: clusterName}}}}},
	}}}
}

// startADSProxy starts a proxy configured over ADS by its own xDS server:
// a listener on lnAddr whose routes send everything to cluster c, whose
// one endpoint is upstream.
func startADSProxy(t *testing.T, lnAddr string, c *clusterv3.Cluster, upstream string) {
	t.Helper()
	srv := xdstest.Start(t)
	p, err := New(Options{Bootstrap: adsBootstrap(srv.Addr), Logger: testLogger(t), AdminAddress: "127.0.0.1:0", XDSBackoff: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	srv.Set(xdsapi.ClusterType, "1", c)
	srv.Set(xdsapi.ListenerType, "1", httpListener(t, "http", lnAddr, "routes"))
	srv.Set(xdsapi.EndpointType, "1", cla(c.GetName(), upstream))
	srv.Set(xdsapi.RouteType, "1", singleRoute("routes", c.GetName()))
	waitFor(t, 10*time.Second, "proxy ready", p.Ready)
}

// TestGRPCThroughTwoProxies is the mesh path on loopback: grpc-go client →
// client-side proxy → server-side proxy → grpc-go server, each proxy
// configured by an xDS server with an HTTP/2 cluster (as straitd makes
// for a gRPC port), every kind of call.
func TestGRPCThroughTwoProxies(t *testing.T) {
	srv, appAddr := grpctest.Serve(t)
	serverSide, clientSide := freeAddr(t), freeAddr(t)
	startADSProxy(t, serverSide, h2EDSCluster(t, "inbound|9090||"), appAddr)
	startADSProxy(t, clientSide, h2EDSCluster(t, "outbound|9090||echo"), serverSide)
	c := grpctest.Dial(t, clientSide)
	grpctest.CheckAll(t, c, srv)

	// The server-side proxy's endpoint gone: the client-side one answers
	// UNAVAILABLE in gRPC form.
	t.Run("unavailable", func(t *testing.T) {
		dead := freeAddr(t)
		lone := freeAddr(t)
		startADSProxy(t, lone, h2EDSCluster(t, "outbound|9090||gone"), dead)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := grpctest.Dial(t, lone).Echo(ctx, "x", nil, nil)
		if st, _ := status.FromError(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "upstream connect error") {
			t.Fatalf("Echo to a dead endpoint = %v; want Unavailable with Envoy's connect failure message", err)
		}
	})

	// A plain h2c client (not gRPC) through the same two proxies.
	t.Run("h2c client", func(t *testing.T) {
		tr := &http2.Transport{AllowHTTP: true, DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Get("http://" + clientSide + "/" + grpctest.ServiceName + "/Echo")
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		// grpc-go refuses a GET without application/grpc with 415 (an
		// HTTP answer, which is what proves it was reached).
		if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusUnsupportedMediaType {
			t.Errorf("h2c GET through two proxies = %s %d; want HTTP/2 415 from grpc-go", resp.Proto, resp.StatusCode)
		}
	})
}
