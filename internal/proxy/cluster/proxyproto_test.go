package cluster

import (
	"encoding/json"
	"log/slog"
	"os"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/straitmesh/strait/internal/proxy/cluster/proxyheader"
	"github.com/straitmesh/strait/internal/proxy/stats"
)

// TestGeneratedProxyProtocolClusters: the clusters straitd generates for
// a DestinationRule subset's proxyProtocol V2 are accepted with their
// transport socket and write v2 headers.
func TestGeneratedProxyProtocolClusters(t *testing.T) {
	data, err := os.ReadFile("../../xds/gen/testdata/trafficpolicy/golden/client.clusters.json")
	if err != nil {
		t.Fatal(err)
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	m := NewManager(slog.New(slog.DiscardHandler), stats.New())
	n := 0
	for _, r := range raw {
		var c clusterv3.Cluster
		if err := protojson.Unmarshal(r, &c); err != nil {
			t.Fatal(err)
		}
		if c.GetTransportSocket().GetName() != proxyheader.SocketName {
			continue
		}
		n++
		out, err := m.build(&c, nil)
		if err != nil {
			t.Fatalf("cluster %s: %v", c.GetName(), err)
		}
		if out.proxyProto != proxyheader.V2 {
			t.Errorf("cluster %s: version %v, want v2", c.GetName(), out.proxyProto)
		}
	}
	if n == 0 {
		t.Fatal("no generated cluster has the upstream_proxy_protocol socket")
	}
}
