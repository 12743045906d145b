package cluster

import (
	"log/slog"
	"net/netip"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/straitmesh/strait/internal/proxy/stats"
)

func eds(name, service string, timeout time.Duration) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name:                 name,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{ServiceName: service, EdsConfig: &corev3.ConfigSource{
			ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}}},
		ConnectTimeout: durationpb.New(timeout),
	}
}

func assignment(name string, ports ...uint32) *endpointv3.ClusterLoadAssignment {
	var lbs []*endpointv3.LbEndpoint
	for _, p := range ports {
		lbs = append(lbs, &endpointv3.LbEndpoint{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
			Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
				Address: "127.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: p}}}}}}})
	}
	return &endpointv3.ClusterLoadAssignment{ClusterName: name, Endpoints: []*endpointv3.LocalityLbEndpoints{{LbEndpoints: lbs}}}
}

func TestWarmingAndNoOpRepush(t *testing.T) {
	m := NewManager(slog.New(slog.DiscardHandler), stats.New())
	names, err := m.ApplyCDS("1", []*clusterv3.Cluster{eds("a", "a", time.Second)})
	if err != nil || len(names) != 1 || names[0] != "a" {
		t.Fatalf("ApplyCDS = %v, %v", names, err)
	}
	if m.Get("a") != nil || m.Warming() != 1 {
		t.Fatal("EDS cluster without endpoints must be warming, not active")
	}
	if err := m.ApplyEDS("1", []*endpointv3.ClusterLoadAssignment{assignment("a", 1, 2)}); err != nil {
		t.Fatal(err)
	}
	v1 := m.Get("a")
	if v1 == nil || len(v1.Endpoints()) != 2 {
		t.Fatalf("after EDS: %v", v1)
	}
	// Round robin.
	e1, _ := v1.Pick(netip.AddrPort{})
	e2, _ := v1.Pick(netip.AddrPort{})
	if e1 == e2 {
		t.Errorf("round robin picked %v twice", e1)
	}
	// Identical re-push: same object.
	if _, err := m.ApplyCDS("2", []*clusterv3.Cluster{eds("a", "a", time.Second)}); err != nil {
		t.Fatal(err)
	}
	if m.Get("a") != v1 {
		t.Error("identical cluster re-push replaced the cluster")
	}
	// Changed cluster with a new, unknown EDS name warms; v1 keeps serving.
	if _, err := m.ApplyCDS("3", []*clusterv3.Cluster{eds("a", "a2", 2*time.Second)}); err != nil {
		t.Fatal(err)
	}
	if m.Get("a") != v1 || m.Warming() != 1 {
		t.Fatal("previous version must serve while the new one warms")
	}
	if err := m.ApplyEDS("3", []*endpointv3.ClusterLoadAssignment{assignment("a2", 3)}); err != nil {
		t.Fatal(err)
	}
	if v2 := m.Get("a"); v2 == v1 || v2 == nil || len(v2.Endpoints()) != 1 || m.Warming() != 0 {
		t.Fatalf("after warming: %v", v2)
	}
	// Rejected update changes nothing.
	before := m.Get("a")
	bad := &clusterv3.Cluster{Name: "dns", ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_LOGICAL_DNS}} // without its one lb_endpoint
	if _, err := m.ApplyCDS("4", []*clusterv3.Cluster{eds("a", "a2", 2*time.Second), bad}); err == nil {
		t.Fatal("LOGICAL_DNS without an endpoint accepted")
	}
	if m.Get("a") != before || m.Get("dns") != nil {
		t.Error("rejected update changed state")
	}
	// Removal.
	if _, err := m.ApplyCDS("5", nil); err != nil || m.Get("a") != nil {
		t.Errorf("removal: %v %v", m.Get("a"), err)
	}
}
