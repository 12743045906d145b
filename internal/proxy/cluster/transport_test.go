package cluster

import (
	"encoding/json"
	"fmt"
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

// TestGeneratedMTLSClusters builds the clusters and load assignments
// straitd generates under auto mTLS (its mtls golden files): the
// endpoints of the clusters to sidecars (auto mTLS, by
// transport_socket_matches) and the cluster whose DestinationRule says
// ISTIO_MUTUAL get a TLS socket; the subset whose rule says DISABLE stays
// plaintext.
func TestGeneratedMTLSClusters(t *testing.T) {
	var cs []*clusterv3.Cluster
	for _, d := range goldenDocs(t, "../../xds/gen/testdata/mtls/golden/client.clusters.json") {
		var c clusterv3.Cluster
		if err := protojson.Unmarshal(d, &c); err != nil {
			t.Fatal(err)
		}
		cs = append(cs, &c)
	}
	var clas []*endpointv3.ClusterLoadAssignment
	for _, d := range goldenDocs(t, "../../xds/gen/testdata/mtls/golden/client.endpoints.json") {
		var cla endpointv3.ClusterLoadAssignment
		if err := protojson.Unmarshal(d, &cla); err != nil {
			t.Fatal(err)
		}
		clas = append(clas, &cla)
	}
	m := NewManager(slog.New(slog.DiscardHandler), stats.New())
	prov := tlsconf.NewProvider(tlsconf.ProviderOptions{})
	defer prov.Close()
	m.SetSecrets(prov)
	if _, err := m.ApplyCDS("1", cs); err != nil {
		t.Fatalf("strait-proxy refuses what straitd generates: %v", err)
	}
	if err := m.ApplyEDS("1", clas); err != nil {
		t.Fatalf("strait-proxy refuses the endpoints straitd generates: %v", err)
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
		if len(c.Endpoints()) == 0 {
			t.Fatalf("cluster %s has no endpoints", name)
		}
		for _, e := range c.Endpoints() {
			if got := c.socketFor(e) != nil; got != want {
				t.Errorf("cluster %s endpoint %s: TLS %v, want %v", name, e.Address, got, want)
			}
		}
	}
	if c := m.Get("outbound|8080||server.secure.svc.cluster.local"); c.tls != nil || len(c.socketMatches) != 2 {
		t.Errorf("auto mTLS cluster: transport_socket %v, %d matches; want the two matches only", c.tls != nil, len(c.socketMatches))
	}
}

func goldenDocs(t *testing.T, path string) []json.RawMessage {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var docs []json.RawMessage
	if err := json.Unmarshal(raw, &docs); err != nil {
		t.Fatal(err)
	}
	return docs
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

// TestTransportSocketMatchSemantics: the socket an endpoint gets follows
// Envoy's TransportSocketMatcherImpl::resolve: the first match (in order)
// that the endpoint's envoy.transport_socket_match metadata satisfies, an
// empty match satisfied by any endpoint; then the same over its
// locality's metadata; then the cluster's transport_socket. Values match
// by type and value, as ValueUtil::equal.
func TestTransportSocketMatchSemantics(t *testing.T) {
	tlsSocket := func(sni string) *corev3.TransportSocket {
		a, err := anypb.New(&tlsv3.UpstreamTlsContext{Sni: sni})
		if err != nil {
			t.Fatal(err)
		}
		return &corev3.TransportSocket{Name: tlsconf.SocketTLS, ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: a}}
	}
	meta := func(kv map[string]any) *corev3.Metadata {
		if kv == nil {
			return nil
		}
		st, err := structpb.NewStruct(kv)
		if err != nil {
			t.Fatal(err)
		}
		return &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{"envoy.transport_socket_match": st}}
	}
	type match struct {
		name string
		want map[string]any
	}
	for _, tc := range []struct {
		name             string
		matches          []match
		defaultSocket    bool
		endpoint, locale map[string]any
		want             string // a match's name, "default", or "plain"
	}{
		{"first of two that fit", []match{{"a", map[string]any{"k": "v"}}, {"b", map[string]any{"k": "v"}}}, false, map[string]any{"k": "v"}, nil, "a"},
		{"subset of the metadata", []match{{"a", map[string]any{"k": "v"}}}, false, map[string]any{"k": "v", "other": "x"}, nil, "a"},
		{"every key must fit", []match{{"a", map[string]any{"k": "v", "j": "w"}}}, true, map[string]any{"k": "v"}, nil, "default"},
		{"other value", []match{{"a", map[string]any{"k": "v"}}}, true, map[string]any{"k": "w"}, nil, "default"},
		{"no match, no default socket: plaintext", []match{{"a", map[string]any{"k": "v"}}}, false, nil, nil, "plain"},
		{"empty match takes an endpoint without metadata", []match{{"a", map[string]any{"k": "v"}}, {"any", map[string]any{}}}, true, nil, map[string]any{"k": "v"}, "any"},
		{"locality when the endpoint fits none", []match{{"a", map[string]any{"k": "v"}}}, false, map[string]any{"k": "w"}, map[string]any{"k": "v"}, "a"},
		{"endpoint before locality", []match{{"a", map[string]any{"k": "v"}}, {"b", map[string]any{"j": "w"}}}, false, map[string]any{"j": "w"}, map[string]any{"k": "v"}, "b"},
		{"a string is not the number it spells", []match{{"a", map[string]any{"k": "1"}}}, true, map[string]any{"k": 1}, nil, "default"},
		{"numbers match numbers", []match{{"a", map[string]any{"k": 1}}}, true, map[string]any{"k": 1}, nil, "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &clusterv3.Cluster{
				Name: "c", ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
				LoadAssignment: &endpointv3.ClusterLoadAssignment{ClusterName: "c", Endpoints: []*endpointv3.LocalityLbEndpoints{{
					Metadata: meta(tc.locale),
					LbEndpoints: []*endpointv3.LbEndpoint{{Metadata: meta(tc.endpoint), HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
						Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
							Address: "10.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 80}}}}}}}},
				}}},
			}
			if tc.defaultSocket {
				c.TransportSocket = tlsSocket("default")
			}
			for _, mt := range tc.matches {
				st, err := structpb.NewStruct(mt.want)
				if err != nil {
					t.Fatal(err)
				}
				c.TransportSocketMatches = append(c.TransportSocketMatches, &clusterv3.Cluster_TransportSocketMatch{Name: mt.name, Match: st, TransportSocket: tlsSocket(mt.name)})
			}
			m := NewManager(slog.New(slog.DiscardHandler), stats.New())
			if _, err := m.ApplyCDS("1", []*clusterv3.Cluster{c}); err != nil {
				t.Fatal(err)
			}
			cl := m.Get("c")
			eps := cl.Endpoints()
			if len(eps) != 1 {
				t.Fatalf("%d endpoints, want 1", len(eps))
			}
			names := map[*tlsconf.Client]string{nil: "plain"}
			if cl.tls != nil {
				names[cl.tls] = "default"
			}
			for i, sm := range cl.socketMatches {
				names[sm.tls] = tc.matches[i].name
			}
			for _, e := range []Endpoint{eps[0], {Network: "tcp", Address: eps[0].Address}} {
				if got := names[cl.socketFor(e)]; got != tc.want {
					t.Errorf("endpoint %+v: socket %q, want %q", e, got, tc.want)
				}
			}
		})
	}
}

// TestTransportSocketFollowsEDSMetadata: an EDS update that changes only
// an endpoint's transport socket match metadata (a PeerAuthentication
// DISABLE on its port) changes the socket of the endpoint the load
// balancer picks, not only of the one a pool looks up by address.
func TestTransportSocketFollowsEDSMetadata(t *testing.T) {
	tlsAny, err := anypb.New(&tlsv3.UpstreamTlsContext{Sni: "x"})
	if err != nil {
		t.Fatal(err)
	}
	match, _ := structpb.NewStruct(map[string]any{"tlsMode": "istio"})
	cla := func(tlsMode bool) *endpointv3.ClusterLoadAssignment {
		lbe := &endpointv3.LbEndpoint{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
			Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
				Address: "10.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 80}}}}}}}
		if tlsMode {
			lbe.Metadata = &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{"envoy.transport_socket_match": match}}
		}
		return &endpointv3.ClusterLoadAssignment{ClusterName: "c", Endpoints: []*endpointv3.LocalityLbEndpoints{{LbEndpoints: []*endpointv3.LbEndpoint{lbe}}}}
	}
	m := NewManager(slog.New(slog.DiscardHandler), stats.New())
	if _, err := m.ApplyCDS("1", []*clusterv3.Cluster{{
		Name: "c", ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{EdsConfig: &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}}},
		TransportSocketMatches: []*clusterv3.Cluster_TransportSocketMatch{
			{Name: "tlsMode-istio", Match: match, TransportSocket: &corev3.TransportSocket{Name: tlsconf.SocketTLS, ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: tlsAny}}},
			{Name: "tlsMode-disabled", Match: &structpb.Struct{}, TransportSocket: &corev3.TransportSocket{Name: tlsconf.SocketRawBuffer}},
		},
	}}); err != nil {
		t.Fatal(err)
	}
	for i, tlsMode := range []bool{true, false, true} {
		if err := m.ApplyEDS(fmt.Sprint(i), []*endpointv3.ClusterLoadAssignment{cla(tlsMode)}); err != nil {
			t.Fatal(err)
		}
		c := m.Get("c")
		hosts := c.hosts.Load().hosts
		if len(hosts) != 1 {
			t.Fatalf("%d hosts, want 1", len(hosts))
		}
		if got := c.socketFor(hosts[0].ep.endpoint()) != nil; got != tlsMode {
			t.Errorf("update %d: picked endpoint TLS %v, want %v", i, got, tlsMode)
		}
	}
}
