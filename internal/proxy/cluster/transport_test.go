package cluster

import (
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/straitmesh/strait/internal/proxy/stats"
	"github.com/straitmesh/strait/internal/proxy/tlsconf"
)

// TestGeneratedMTLSClusters builds the clusters straitd generates under
// auto mTLS (its mtls golden file): the clusters to sidecars get a TLS
// socket, as does the one whose DestinationRule says ISTIO_MUTUAL; the
// subset whose rule says DISABLE stays plaintext.
func TestGeneratedMTLSClusters(t *testing.T) {
	raw, err := os.ReadFile("../../xds/gen/testdata/mtls/golden/client.clusters.json")
	if err != nil {
		t.Fatal(err)
	}
	var docs []json.RawMessage
	if err := json.Unmarshal(raw, &docs); err != nil {
		t.Fatal(err)
	}
	var cs []*clusterv3.Cluster
	for _, d := range docs {
		var c clusterv3.Cluster
		if err := protojson.Unmarshal(d, &c); err != nil {
			t.Fatal(err)
		}
		cs = append(cs, &c)
	}
	m := NewManager(slog.New(slog.DiscardHandler), stats.New())
	prov := tlsconf.NewProvider(tlsconf.ProviderOptions{})
	defer prov.Close()
	m.SetSecrets(prov)
	if _, err := m.ApplyCDS("1", cs); err != nil {
		t.Fatalf("strait-proxy refuses what straitd generates: %v", err)
	}
	for name, want := range map[string]bool{
		"outbound|8080||server.secure.svc.cluster.local":      true,
		"outbound|9000||server.secure.svc.cluster.local":      true,
		"outbound|80||legacy.secure.svc.cluster.local":        true,
		"outbound|8080|plain|server.secure.svc.cluster.local": false,
	} {
		c := m.Get(name)
		if c == nil {
			c = m.warming[name]
		}
		if c == nil {
			t.Fatalf("cluster %s not built", name)
		}
		if (c.tls != nil) != want {
			t.Errorf("cluster %s: TLS %v, want %v", name, c.tls != nil, want)
		}
	}
}

// TestTransportSocketMatches: as Istio's auto mTLS asks, endpoints whose
// envoy.transport_socket_match metadata says tlsMode=istio get the TLS
// socket, others the default (plaintext), also when a pool dials by
// address alone.
func TestTransportSocketMatches(t *testing.T) {
	tlsAny, err := anypb.New(&tlsv3.UpstreamTlsContext{Sni: "x"})
	if err != nil {
		t.Fatal(err)
	}
	ep := func(ip string, tlsMode string) *endpointv3.LbEndpoint {
		lbe := &endpointv3.LbEndpoint{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
			Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
				Address: ip, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 80}}}}}}}
		if tlsMode != "" {
			md, _ := structpb.NewStruct(map[string]any{"tlsMode": tlsMode})
			lbe.Metadata = &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{"envoy.transport_socket_match": md}}
		}
		return lbe
	}
	match, _ := structpb.NewStruct(map[string]any{"tlsMode": "istio"})
	m := NewManager(slog.New(slog.DiscardHandler), stats.New())
	_, err = m.ApplyCDS("1", []*clusterv3.Cluster{{
		Name: "c", ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		LoadAssignment: &endpointv3.ClusterLoadAssignment{ClusterName: "c", Endpoints: []*endpointv3.LocalityLbEndpoints{{
			LbEndpoints: []*endpointv3.LbEndpoint{ep("10.0.0.1", "istio"), ep("10.0.0.2", ""), ep("10.0.0.3", "disabled")}}}},
		TransportSocketMatches: []*clusterv3.Cluster_TransportSocketMatch{
			{Name: "tlsMode-istio", Match: match, TransportSocket: &corev3.TransportSocket{Name: tlsconf.SocketTLS, ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: tlsAny}}},
			{Name: "tlsMode-disabled", Match: &structpb.Struct{}, TransportSocket: &corev3.TransportSocket{Name: tlsconf.SocketRawBuffer}},
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	c := m.Get("c")
	for _, e := range c.Endpoints() {
		want := e.Address == "10.0.0.1:80"
		if got := c.socketFor(e) != nil; got != want {
			t.Errorf("endpoint %s: TLS %v, want %v", e.Address, got, want)
		}
		if got := c.socketFor(Endpoint{Network: "tcp", Address: e.Address}) != nil; got != want {
			t.Errorf("endpoint %s dialled by address: TLS %v, want %v", e.Address, got, want)
		}
	}
}

func TestTransportSocketMatchRefusesUnknownSocket(t *testing.T) {
	m := NewManager(slog.New(slog.DiscardHandler), stats.New())
	_, err := m.ApplyCDS("1", []*clusterv3.Cluster{{
		Name: "c", ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		TransportSocketMatches: []*clusterv3.Cluster_TransportSocketMatch{{Name: "alts", TransportSocket: &corev3.TransportSocket{Name: "envoy.transport_sockets.alts"}}},
	}})
	if err == nil || !strings.Contains(err.Error(), `transport_socket_matches[0] "alts"`) || !strings.Contains(err.Error(), "envoy.transport_sockets.alts") {
		t.Fatalf("error %v, want a refusal naming the match and the socket", err)
	}
}
