package tcpproxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	proxyprotocolv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/proxy_protocol/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/stats"
)

// TestUpstreamProxyProtocolV1: tcp_proxy to a cluster with the upstream
// PROXY protocol socket sends, before the downstream's first byte, a v1
// header with the downstream's peer and destination (here echoed back by
// the upstream).
func TestUpstreamProxyProtocolV1(t *testing.T) {
	be := netip.MustParseAddrPort(echoServer(t))
	pp, err := anypb.New(&proxyprotocolv3.ProxyProtocolUpstreamTransport{
		Config:          &corev3.ProxyProtocolConfig{Version: corev3.ProxyProtocolConfig_V1},
		TransportSocket: &corev3.TransportSocket{Name: "envoy.transport_sockets.raw_buffer"},
	})
	if err != nil {
		t.Fatal(err)
	}
	cm := cluster.NewManager(slog.New(slog.DiscardHandler), stats.New())
	if err := cm.AddStatic([]*clusterv3.Cluster{{
		Name:                 "be",
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		ConnectTimeout:       durationpb.New(time.Second),
		LoadAssignment: &endpointv3.ClusterLoadAssignment{ClusterName: "be", Endpoints: []*endpointv3.LocalityLbEndpoints{{LbEndpoints: []*endpointv3.LbEndpoint{{
			HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
				Address: be.Addr().String(), PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(be.Port())}}}}}},
		}}}}},
		TransportSocket: &corev3.TransportSocket{Name: "envoy.transport_sockets.upstream_proxy_protocol", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: pp}},
	}}); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	down, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		(&Filter{cluster: "be"}).Serve(context.Background(), down, netip.MustParseAddrPort(ln.Addr().String()), cluster.OriginalSource{}, cm, slog.New(slog.DiscardHandler))
	}()
	defer func() { client.Close(); <-done }()
	client.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(client, "ping"); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(client)
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	src := netip.MustParseAddrPort(client.LocalAddr().String())
	dst := netip.MustParseAddrPort(ln.Addr().String())
	if want := fmt.Sprintf("PROXY TCP4 127.0.0.1 127.0.0.1 %d %d\r\n", src.Port(), dst.Port()); line != want {
		t.Fatalf("upstream got header %q, want %q", line, want)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(r, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("after the header: %q, %v; want the downstream's bytes", buf, err)
	}
}
