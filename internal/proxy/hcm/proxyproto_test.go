package hcm

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	proxyprotocolv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/proxy_protocol/v3"
	rawbufferv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/raw_buffer/v3"
	"golang.org/x/net/http2"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/straitmesh/strait/internal/nginxtest"
	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/stats"
)

// proxyProtocolSocket is the transport socket Istio emits for a
// DestinationRule's proxyProtocol: upstream_proxy_protocol around
// raw_buffer.
func proxyProtocolSocket(t *testing.T, v corev3.ProxyProtocolConfig_Version) *corev3.TransportSocket {
	raw, err := anypb.New(&rawbufferv3.RawBuffer{})
	if err != nil {
		t.Fatal(err)
	}
	pp, err := anypb.New(&proxyprotocolv3.ProxyProtocolUpstreamTransport{
		Config:          &corev3.ProxyProtocolConfig{Version: v},
		TransportSocket: &corev3.TransportSocket{Name: "envoy.transport_sockets.raw_buffer", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: raw}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &corev3.TransportSocket{Name: "envoy.transport_sockets.upstream_proxy_protocol", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: pp}}
}

// startProxyWithDst runs an HCM on loopback whose routes all go to cluster
// "be"; each connection's destination is the listener's address, as a
// listener without original_dst passes it.
func startProxyWithDst(t *testing.T, codec Codec, be *clusterv3.Cluster) string {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	cm := cluster.NewManager(log, stats.New())
	if err := cm.AddStatic([]*clusterv3.Cluster{be}); err != nil {
		t.Fatal(err)
	}
	router, _ := anypb.New(&routerv3.Router{})
	f, err := Build(&hcmv3.HttpConnectionManager{
		StatPrefix: "test",
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
			Name: "r", VirtualHosts: []*routev3.VirtualHost{{Name: "all", Domains: []string{"*"}, Routes: []*routev3.Route{{
				Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
				Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: be.Name}}},
			}}}}}},
		HttpFilters: []*hcmv3.HttpFilter{{Name: routerFilter, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: router}}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(Options{Logger: log, Clusters: cm, Codec: codec})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dst := netip.MustParseAddrPort(ln.Addr().String())
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.ServeConn(c, f, dst, cluster.OriginalSource{})
		}
	}()
	t.Cleanup(func() { ln.Close(); s.Close() })
	return ln.Addr().String()
}

// TestUpstreamProxyProtocol: a cluster with Envoy's upstream PROXY
// protocol socket (v1 and v2) announces each downstream connection's
// source and destination to nginx, which parses the header
// (listen ... proxy_protocol) and answers what it read. Two downstream
// connections, each with its own port, never share an upstream
// connection. On every codec.
func TestUpstreamProxyProtocol(t *testing.T) {
	ng := nginxtest.Start(t, `
server {
	listen LISTEN proxy_protocol;
	keepalive_timeout 60s;
	location / {
		return 200 "$proxy_protocol_addr $proxy_protocol_port $proxy_protocol_server_addr $proxy_protocol_server_port";
	}
}`)
	for _, codec := range codecs {
		for _, v := range []corev3.ProxyProtocolConfig_Version{corev3.ProxyProtocolConfig_V1, corev3.ProxyProtocolConfig_V2} {
			t.Run(fmt.Sprintf("%s/%s", codec, v), func(t *testing.T) {
				be := staticCluster("be", ng)
				be.TransportSocket = proxyProtocolSocket(t, v)
				addr := startProxyWithDst(t, codec, be)
				_, listenPort, _ := net.SplitHostPort(addr)
				for i := range 2 {
					// A fresh client connection each time: a new
					// downstream source port.
					tr := &http.Transport{DisableKeepAlives: true}
					var local string
					tr.DialContext = func(ctx context.Context, network, a string) (net.Conn, error) {
						c, err := (&net.Dialer{}).DialContext(ctx, network, a)
						if err == nil {
							local = c.LocalAddr().String()
						}
						return c, err
					}
					resp, err := (&http.Client{Timeout: 10 * time.Second, Transport: tr}).Get("http://" + addr + "/")
					if err != nil {
						t.Fatal(err)
					}
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					_, localPort, _ := net.SplitHostPort(local)
					want := fmt.Sprintf("127.0.0.1 %s 127.0.0.1 %s", localPort, listenPort)
					if resp.StatusCode != 200 || strings.TrimSpace(string(body)) != want {
						t.Errorf("request %d: %d %q, want nginx to have read %q", i, resp.StatusCode, body, want)
					}
				}
			})
		}
	}
}

// TestUpstreamProxyProtocolH2: the same over a downstream HTTP/2
// connection (h2c): the stream's connection announces its client's
// address, which the HTTP/2 side keeps as an address of its own (conn's
// remote), and a second connection its own.
func TestUpstreamProxyProtocolH2(t *testing.T) {
	ng := nginxtest.Start(t, `
server {
	listen LISTEN proxy_protocol;
	keepalive_timeout 60s;
	location / {
		return 200 "$proxy_protocol_addr $proxy_protocol_port $proxy_protocol_server_addr $proxy_protocol_server_port";
	}
}`)
	be := staticCluster("be", ng)
	be.TransportSocket = proxyProtocolSocket(t, corev3.ProxyProtocolConfig_V2)
	addr := startProxyWithDst(t, CodecStrait, be)
	_, listenPort, _ := net.SplitHostPort(addr)
	for i := range 2 {
		var local string
		tr := &http2.Transport{AllowHTTP: true, DialTLSContext: func(ctx context.Context, network, a string, _ *tls.Config) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, a)
			if err == nil {
				local = c.LocalAddr().String()
			}
			return c, err
		}}
		resp, err := (&http.Client{Timeout: 10 * time.Second, Transport: tr}).Get("http://" + addr + "/")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		tr.CloseIdleConnections()
		_, localPort, _ := net.SplitHostPort(local)
		want := fmt.Sprintf("127.0.0.1 %s 127.0.0.1 %s", localPort, listenPort)
		if resp.StatusCode != 200 || resp.ProtoMajor != 2 || strings.TrimSpace(string(body)) != want {
			t.Errorf("request %d: HTTP/%d %d %q, want HTTP/2 and nginx to have read %q", i, resp.ProtoMajor, resp.StatusCode, body, want)
		}
	}
}
