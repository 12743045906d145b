package cluster

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/proxy/stats"
)

// Every cluster straitd generates for DestinationRule traffic policies is
// accepted by strait-proxy.
func TestGeneratedTrafficPolicyClustersBuild(t *testing.T) {
	data, err := os.ReadFile("../../xds/gen/testdata/trafficpolicy/golden/client.clusters.json")
	if err != nil {
		t.Fatal(err)
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	for _, r := range raw {
		var c clusterv3.Cluster
		if err := protojson.Unmarshal(r, &c); err != nil {
			t.Fatal(err)
		}
		if _, err := build(&c, stats.New(), nil); err != nil {
			t.Errorf("cluster %s: %v", c.GetName(), err)
		}
	}
}

// staticCluster is a STATIC cluster of n endpoints 127.0.0.1:1.. with
// edit applied.
func staticCluster(t *testing.T, n int, edit func(*clusterv3.Cluster)) *Cluster {
	t.Helper()
	cfg := &clusterv3.Cluster{Name: "c", ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC}}
	ports := make([]uint32, n)
	for i := range ports {
		ports[i] = uint32(i + 1)
	}
	cfg.LoadAssignment = assignment("c", ports...)
	if edit != nil {
		edit(cfg)
	}
	c, err := build(cfg, stats.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestRefusedClusterFields(t *testing.T) {
	for name, edit := range map[string]func(*clusterv3.Cluster){
		"lb_subset_config": func(c *clusterv3.Cluster) { c.LbSubsetConfig = &clusterv3.Cluster_LbSubsetConfig{} },
		"transport_socket": func(c *clusterv3.Cluster) { c.TransportSocket = &corev3.TransportSocket{Name: "tls"} },
		"lb_policy":        func(c *clusterv3.Cluster) { c.LbPolicy = clusterv3.Cluster_LOAD_BALANCING_POLICY_CONFIG },
		"table_size": func(c *clusterv3.Cluster) {
			c.LbPolicy = clusterv3.Cluster_MAGLEV
			c.LbConfig = &clusterv3.Cluster_MaglevLbConfig_{MaglevLbConfig: &clusterv3.Cluster_MaglevLbConfig{TableSize: wrapperspb.UInt64(1000)}}
		},
		"priority": func(c *clusterv3.Cluster) {
			c.CircuitBreakers = &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{Priority: corev3.RoutingPriority_HIGH}}}
		},
		"enforcing_success_rate": func(c *clusterv3.Cluster) { c.OutlierDetection = &clusterv3.OutlierDetection{} },
		"zone_aware_lb_config": func(c *clusterv3.Cluster) {
			c.CommonLbConfig = &clusterv3.Cluster_CommonLbConfig{LocalityConfigSpecifier: &clusterv3.Cluster_CommonLbConfig_ZoneAwareLbConfig_{}}
		},
		"dns_refresh_rate": func(c *clusterv3.Cluster) { c.DnsRefreshRate = durationpb.New(time.Second) },
	} {
		cfg := &clusterv3.Cluster{Name: "c", ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC}}
		edit(cfg)
		// The manager's build: the transport socket is its part.
		_, err := NewManager(slog.New(slog.DiscardHandler), stats.New()).build(cfg, nil)
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: error %v, want one naming %s", name, err, name)
		}
	}
}

func TestTCPKeepaliveConfig(t *testing.T) {
	c := staticCluster(t, 1, func(c *clusterv3.Cluster) {
		c.UpstreamConnectionOptions = &clusterv3.UpstreamConnectionOptions{TcpKeepalive: &corev3.TcpKeepalive{
			KeepaliveTime: wrapperspb.UInt32(60), KeepaliveInterval: wrapperspb.UInt32(10), KeepaliveProbes: wrapperspb.UInt32(3)}}
	})
	want := net.KeepAliveConfig{Enable: true, Idle: time.Minute, Interval: 10 * time.Second, Count: 3}
	if got := c.dialer.KeepAliveConfig; got != want {
		t.Errorf("keepalive %+v, want %+v", got, want)
	}
	c = staticCluster(t, 1, func(c *clusterv3.Cluster) {
		c.UpstreamConnectionOptions = &clusterv3.UpstreamConnectionOptions{TcpKeepalive: &corev3.TcpKeepalive{}}
	})
	want = net.KeepAliveConfig{Enable: true, Idle: -1, Interval: -1, Count: -1}
	if got := c.dialer.KeepAliveConfig; got != want {
		t.Errorf("keepalive without values %+v, want the system's (%+v)", got, want)
	}
}

// An endpoint update keeps the state of the hosts whose address stays
// (here an ejection) and drops the others.
func TestEndpointUpdateKeepsHostState(t *testing.T) {
	c := staticCluster(t, 2, func(c *clusterv3.Cluster) {
		c.OutlierDetection = &clusterv3.OutlierDetection{Consecutive_5Xx: wrapperspb.UInt32(1),
			EnforcingSuccessRate: wrapperspb.UInt32(0), BaseEjectionTime: durationpb.New(time.Hour)}
	})
	old := c.hosts.Load().hosts
	c.ReportStatus(Endpoint{h: old[0]}, 500)
	c.setEndpoints([]Endpoint{old[0].ep.endpoint(), {Network: "tcp", Address: "127.0.0.1:9"}})
	now := c.hosts.Load().hosts
	if now[0] != old[0] || !now[0].ejected.Load() {
		t.Fatal("the host that stayed lost its state")
	}
	if now[1] == old[1] || now[1].ep.Address != "127.0.0.1:9" {
		t.Fatal("the new host is not a new one")
	}
	if got := c.Endpoints(); len(got) != 2 || got[1].Address != "127.0.0.1:9" {
		t.Fatalf("Endpoints() = %v", got)
	}
}

// TestAltStatName: alt_stat_name names the cluster's stats, as in Envoy.
func TestAltStatName(t *testing.T) {
	st := stats.New()
	cfg := &clusterv3.Cluster{Name: "outbound|80||a.b.svc.cluster.local", AltStatName: "outbound|80||a.b", ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC}}
	c, err := build(cfg, st, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if c.Stats.Name != "outbound|80||a.b" {
		t.Errorf("stats name %q, want the alt_stat_name", c.Stats.Name)
	}
}

// A connect that outlasts connect_timeout counts upstream_cx_connect_fail
// and upstream_cx_connect_timeout; one cut short by the caller's own
// deadline (the request gave up) counts only the failure.
func TestConnectTimeoutStat(t *testing.T) {
	c := staticCluster(t, 1, func(cfg *clusterv3.Cluster) {
		cfg.ConnectTimeout = durationpb.New(time.Nanosecond) // over before the dial starts
	})
	ep := Endpoint{Network: "tcp", Address: "127.0.0.1:1"}
	if _, err := c.Dial(context.Background(), ep); err == nil {
		t.Fatal("dial within 1ns succeeded")
	}
	if got := c.Stats.Counter("upstream_cx_connect_timeout").Load(); got != 1 {
		t.Errorf("upstream_cx_connect_timeout = %d after a connect timeout, want 1", got)
	}
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	if _, err := c.Dial(ctx, ep); err == nil {
		t.Fatal("dial with an expired context succeeded")
	}
	if got := c.Stats.Counter("upstream_cx_connect_timeout").Load(); got != 1 {
		t.Errorf("upstream_cx_connect_timeout = %d after the caller's deadline, want still 1", got)
	}
	if got := c.Stats.CxConnectFail.Load(); got != 2 {
		t.Errorf("upstream_cx_connect_fail = %d, want 2", got)
	}
}
