package tcpproxy

import (
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tcpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func TestBuildRefusesUnsupported(t *testing.T) {
	base := func() *tcpv3.TcpProxy {
		return &tcpv3.TcpProxy{StatPrefix: "s", ClusterSpecifier: &tcpv3.TcpProxy_Cluster{Cluster: "c"}}
	}
	for _, tc := range []struct {
		mod  func(*tcpv3.TcpProxy)
		want string
	}{
		{func(p *tcpv3.TcpProxy) { p.MetadataMatch = &corev3.Metadata{} }, "metadata_match"},
		{func(p *tcpv3.TcpProxy) { p.HashPolicy = []*typev3.HashPolicy{{}} }, "hash_policy"},
		{func(p *tcpv3.TcpProxy) { p.TunnelingConfig = &tcpv3.TcpProxy_TunnelingConfig{Hostname: "h"} }, "tunneling_config"},
		{func(p *tcpv3.TcpProxy) { p.MaxDownstreamConnectionDuration = durationpb.New(1) }, "max_downstream_connection_duration"}, // 1ns: below Envoy's 1ms
		{func(p *tcpv3.TcpProxy) { p.MaxConnectAttempts = wrapperspb.UInt32(0) }, "max_connect_attempts"},
		{func(p *tcpv3.TcpProxy) { p.UpstreamConnectMode = tcpv3.UpstreamConnectMode_ON_DOWNSTREAM_DATA }, "upstream_connect_mode"},
		{func(p *tcpv3.TcpProxy) {
			p.ClusterSpecifier = &tcpv3.TcpProxy_WeightedClusters{WeightedClusters: &tcpv3.TcpProxy_WeightedCluster{
				Clusters: []*tcpv3.TcpProxy_WeightedCluster_ClusterWeight{{Name: "a", Weight: 1, MetadataMatch: &corev3.Metadata{}}}}}
		}, "clusters[0].metadata_match"},
	} {
		p := base()
		tc.mod(p)
		if _, err := Build(p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Build: %v, want an error naming %s", err, tc.want)
		}
	}
	ok := base()
	ok.MaxConnectAttempts = wrapperspb.UInt32(1) // Envoy's default, written out
	if _, err := Build(ok); err != nil {
		t.Errorf("max_connect_attempts 1: %v", err)
	}
}

// TestWeightedPick draws weighted clusters in proportion (a wide band:
// this is chance); weight-0 clusters are never picked.
func TestWeightedPick(t *testing.T) {
	f, err := Build(&tcpv3.TcpProxy{StatPrefix: "s", ClusterSpecifier: &tcpv3.TcpProxy_WeightedClusters{WeightedClusters: &tcpv3.TcpProxy_WeightedCluster{
		Clusters: []*tcpv3.TcpProxy_WeightedCluster_ClusterWeight{{Name: "a", Weight: 30}, {Name: "b", Weight: 70}, {Name: "z", Weight: 0}}}}})
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	const n = 20000
	for range n {
		counts[f.pickCluster()]++
	}
	if counts["z"] != 0 || counts["a"] < n*27/100 || counts["a"] > n*33/100 || counts["a"]+counts["b"] != n {
		t.Errorf("picks %v, want a ≈ 30 %%, b the rest, never z", counts)
	}
}
