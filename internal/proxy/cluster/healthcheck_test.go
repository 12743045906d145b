package cluster

import (
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/proxy/stats"
)

func TestHTTPHealthCheck(t *testing.T) {
	healthy := make(chan bool, 1)
	healthy <- true
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ok := <-healthy
		healthy <- ok
		if r.URL.Path != "/healthz" || r.Host != "svc" {
			w.WriteHeader(404)
			return
		}
		if !ok {
			w.WriteHeader(503)
		}
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()
	port := uint32(ln.Addr().(*net.TCPAddr).Port)
	c, err := build(&clusterv3.Cluster{Name: "c", ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		LoadAssignment: assignment("c", port),
		CommonLbConfig: &clusterv3.Cluster_CommonLbConfig{HealthyPanicThreshold: &typev3.Percent{Value: 0}},
		HealthChecks: []*corev3.HealthCheck{{
			Timeout: durationpb.New(time.Second), Interval: durationpb.New(20 * time.Millisecond),
			NoTrafficInterval:  durationpb.New(20 * time.Millisecond),
			UnhealthyThreshold: wrapperspb.UInt32(2), HealthyThreshold: wrapperspb.UInt32(2),
			HealthChecker: &corev3.HealthCheck_HttpHealthCheck_{HttpHealthCheck: &corev3.HealthCheck_HttpHealthCheck{Path: "/healthz", Host: "svc"}},
		}},
	}, stats.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	c.activate()
	waitPick := func(wantOK bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, err := c.Pick(netip.AddrPort{})
			if (err == nil) == wantOK {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("host never became healthy=%v (last pick error %v)", wantOK, err)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitPick(true)
	<-healthy
	healthy <- false
	waitPick(false)
	<-healthy
	healthy <- true
	waitPick(true)
}

// A cluster's health checks start when the manager publishes it, not
// when a CDS response merely builds it.
func TestHealthChecksStartWhenActive(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := uint32(ln.Addr().(*net.TCPAddr).Port)
	ln.Close() // nothing listens: the TCP check fails
	cfg := func(name string) *clusterv3.Cluster {
		return &clusterv3.Cluster{Name: name, ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
			LoadAssignment: assignment(name, port),
			CommonLbConfig: &clusterv3.Cluster_CommonLbConfig{HealthyPanicThreshold: &typev3.Percent{Value: 0}},
			HealthChecks: []*corev3.HealthCheck{{
				Timeout: durationpb.New(time.Second), Interval: durationpb.New(time.Hour),
				UnhealthyThreshold: wrapperspb.UInt32(1), HealthyThreshold: wrapperspb.UInt32(1),
				HealthChecker: &corev3.HealthCheck_TcpHealthCheck_{TcpHealthCheck: &corev3.HealthCheck_TcpHealthCheck{}},
			}}}
	}
	m := NewManager(slog.New(slog.DiscardHandler), stats.New())
	// A response refused for its second cluster starts nothing.
	bad := cfg("bad")
	bad.LbPolicy = clusterv3.Cluster_LOAD_BALANCING_POLICY_CONFIG
	if _, err := m.ApplyCDS("1", []*clusterv3.Cluster{cfg("a"), bad}); err == nil {
		t.Fatal("want the response refused")
	}
	if _, err := m.ApplyCDS("2", []*clusterv3.Cluster{cfg("a")}); err != nil {
		t.Fatal(err)
	}
	c := m.Get("a")
	defer c.close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := c.Stats.Counter("health_check.failure").Load()
		if st > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no health check ran on the active cluster")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := c.Pick(netip.AddrPort{}); !errors.Is(err, ErrNoHealthyUpstream) {
		t.Errorf("pick with the only host failing its check: %v", err)
	}
}

// Health check thresholds: a new host is healthy on its first success;
// then unhealthy_threshold failures in a row take it out and
// healthy_threshold successes in a row bring it back.
func TestHealthThresholds(t *testing.T) {
	c := staticCluster(t, 1, func(c *clusterv3.Cluster) {
		c.HealthChecks = []*corev3.HealthCheck{{Timeout: durationpb.New(time.Second), Interval: durationpb.New(time.Hour),
			UnhealthyThreshold: wrapperspb.UInt32(2), HealthyThreshold: wrapperspb.UInt32(3),
			HealthChecker: &corev3.HealthCheck_TcpHealthCheck_{TcpHealthCheck: &corev3.HealthCheck_TcpHealthCheck{}}}}
	})
	hc, h := c.hc, c.hosts.Load().hosts[0]
	if !h.hcFailed.Load() {
		t.Fatal("a new host must start failed")
	}
	fail := errors.New("down")
	steps := []struct {
		err        error
		wantFailed bool
	}{
		{nil, false},                               // first success
		{fail, false}, {nil, false}, {fail, false}, // never two in a row
		{fail, true},
		{nil, true}, {nil, true}, {fail, true}, {nil, true}, {nil, true},
		{nil, false}, // third success in a row
	}
	for i, s := range steps {
		hc.record(h, s.err)
		if h.hcFailed.Load() != s.wantFailed {
			t.Fatalf("step %d: failed = %v, want %v", i, h.hcFailed.Load(), s.wantFailed)
		}
	}
	if got := c.Stats.Counter("health_check.attempt").Load(); got != uint64(len(steps)) {
		t.Errorf("health_check.attempt = %d, want %d", got, len(steps))
	}
	if got := c.Stats.Counter("health_check.failure").Load(); got != 4 {
		t.Errorf("health_check.failure = %d, want 4", got)
	}
}
