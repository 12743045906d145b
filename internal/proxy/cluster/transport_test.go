package cluster

import (
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/straitmesh/strait/internal/proxy/stats"
	"github.com/straitmesh/strait/internal/proxy/tlsconf"
)

// TestGeneratedMTLSClusters builds the clusters straitd generates under
// auto mTLS (its mtls golden file): the clusters to sidecars get a TLS
// socket, the one to a workload without a sidecar stays plaintext.
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
		"outbound|8080||server.secure.svc.cluster.local": true,
		"outbound|9000||server.secure.svc.cluster.local": true,
		"outbound|80||legacy.secure.svc.cluster.local":   false,
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

func TestTransportSocketMatchesRefused(t *testing.T) {
	m := NewManager(slog.New(slog.DiscardHandler), stats.New())
	_, err := m.ApplyCDS("1", []*clusterv3.Cluster{{
		Name: "c", ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		TransportSocketMatches: []*clusterv3.Cluster_TransportSocketMatch{{Name: "tlsMode-istio", TransportSocket: &corev3.TransportSocket{Name: tlsconf.SocketRawBuffer}}},
	}})
	if err == nil || !strings.Contains(err.Error(), "transport_socket_matches") {
		t.Fatalf("error %v, want a refusal naming transport_socket_matches", err)
	}
}
