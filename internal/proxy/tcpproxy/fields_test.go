package tcpproxy

import (
	"strings"
	"testing"

	tcpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/proxy/fieldtest"
)

// TestTcpProxyFieldsClassified: every TcpProxy field is honoured or
// refused, so that a new Envoy API's field is noticed here.
func TestTcpProxyFieldsClassified(t *testing.T) {
	fieldtest.Classified(t, (&tcpv3.TcpProxy{}).ProtoReflect().Descriptor(), tcpProxyHonoured, tcpProxyRefused)
	fieldtest.Known(t, (&tcpv3.TcpProxy_WeightedCluster{}).ProtoReflect().Descriptor(), weightedClusterFields)
	fieldtest.Known(t, (&tcpv3.TcpProxy_WeightedCluster_ClusterWeight{}).ProtoReflect().Descriptor(), clusterWeightFields)
}

// TestTcpProxyRefusedFields: each refused field, set, is an error naming
// it; the honoured ones build.
func TestTcpProxyRefusedFields(t *testing.T) {
	base := func() *tcpv3.TcpProxy {
		return &tcpv3.TcpProxy{StatPrefix: "s", ClusterSpecifier: &tcpv3.TcpProxy_Cluster{Cluster: "c"}}
	}
	if _, err := Build(base()); err != nil {
		t.Fatal(err)
	}
	fields := (&tcpv3.TcpProxy{}).ProtoReflect().Descriptor().Fields()
	for n := range tcpProxyRefused {
		t.Run(string(n), func(t *testing.T) {
			tp := base()
			fieldtest.SetSomething(tp.ProtoReflect(), fields.ByName(n))
			_, err := Build(tp)
			if err == nil || !strings.Contains(err.Error(), "tcp_proxy."+string(n)) {
				t.Fatalf("got %v, want an error naming tcp_proxy.%s", err, n)
			}
		})
	}
	wc := base()
	wc.ClusterSpecifier = &tcpv3.TcpProxy_WeightedClusters{WeightedClusters: &tcpv3.TcpProxy_WeightedCluster{
		Clusters: []*tcpv3.TcpProxy_WeightedCluster_ClusterWeight{{Name: "a", Weight: 1}, {Name: "b", Weight: 3}}}}
	wc.MaxConnectAttempts = wrapperspb.UInt32(2)
	f, err := Build(wc)
	if err != nil {
		t.Fatal(err)
	}
	if f.total != 4 || len(f.weighted) != 2 || f.MaxConnectAttempts != 2 {
		t.Errorf("weighted %v (total %d), attempts %d; want a:1 b:3, 2", f.weighted, f.total, f.MaxConnectAttempts)
	}
}

// TestTcpProxyUnknownFieldsRefused: a newer API's field, kept as unknown
// bytes, is refused.
func TestTcpProxyUnknownFieldsRefused(t *testing.T) {
	tp := &tcpv3.TcpProxy{StatPrefix: "s", ClusterSpecifier: &tcpv3.TcpProxy_Cluster{Cluster: "c"}}
	tp.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 9999, protowire.VarintType), 1))
	if _, err := Build(tp); err == nil || !strings.Contains(err.Error(), "does not know") {
		t.Errorf("got %v, want the unknown field refused", err)
	}
}
