package cluster

import (
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/straitmesh/strait/internal/proxy/stats"
)

func withFetchTimeout(c *clusterv3.Cluster, d *durationpb.Duration) *clusterv3.Cluster {
	c.EdsClusterConfig.EdsConfig.InitialFetchTimeout = d
	return c
}

// An EDS cluster warms until its eds_config's initial_fetch_timeout
// (default 15 s) and then replaces the version it was to replace, with no
// endpoints; repeating it in CDS does not restart the wait; with 0 it
// waits for ever; endpoints that come in time end the wait and the timer.
func TestEDSInitialFetchTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := stats.New()
		m := NewManager(slog.New(slog.DiscardHandler), st)
		defer m.Close()
		warmed := 0
		m.OnWarmed(func() { warmed++ })
		if err := m.ApplyEDS("1", []*endpointv3.ClusterLoadAssignment{assignment("old", 1)}); err != nil {
			t.Fatal(err)
		}
		cs := func(version string) []*clusterv3.Cluster {
			return []*clusterv3.Cluster{
				eds("a", "a", time.Second), // default timeout
				withFetchTimeout(eds("ever", "ever", time.Second), durationpb.New(0)),
				withFetchTimeout(eds("soon", "soon", time.Second), durationpb.New(20*time.Second)),
				eds("old", "old", time.Second),
			}
		}
		if _, err := m.ApplyCDS("1", cs("1")); err != nil {
			t.Fatal(err)
		}
		if m.Warming() != 3 || m.Get("old") == nil {
			t.Fatalf("warming %d, old active %t; want a, ever and soon warming, old (its endpoints known) active", m.Warming(), m.Get("old") != nil)
		}
		time.Sleep(10 * time.Second)
		if _, err := m.ApplyCDS("2", cs("2")); err != nil { // the same again: the waits go on
			t.Fatal(err)
		}
		if err := m.ApplyEDS("2", []*endpointv3.ClusterLoadAssignment{assignment("soon", 1)}); err != nil {
			t.Fatal(err)
		}
		// The endpoints ended soon's warming: the gauges say so at once.
		if a, w := st.Gauge("cluster_manager.active_clusters").Load(), st.Gauge("cluster_manager.warming_clusters").Load(); a != 2 || w != 2 {
			t.Errorf("after soon's endpoints: active_clusters %d, warming_clusters %d; want 2 (old, soon) and 2 (a, ever)", a, w)
		}
		time.Sleep(5*time.Second + time.Millisecond)
		synctest.Wait()
		a := m.Get("a")
		if a == nil || len(a.Endpoints()) != 0 || !a.hasEndpoints() {
			t.Fatalf("cluster a after 15 s: %v, want active with no endpoints", a)
		}
		if m.Get("ever") != nil || m.Warming() != 1 || st.Gauge("cluster_manager.warming_clusters").Load() != 1 {
			t.Errorf("ever active %t, warming %d (gauge %d); want ever still warming", m.Get("ever") != nil, m.Warming(), st.Gauge("cluster_manager.warming_clusters").Load())
		}
		if s := m.Get("soon"); s == nil || len(s.Endpoints()) != 1 {
			t.Errorf("cluster soon = %v, want active with its endpoint", s)
		}
		if warmed != 1 {
			t.Errorf("OnWarmed called %d times, want once (for a)", warmed)
		}
		m.mu.Lock()
		timers := len(m.fetchTimers)
		m.mu.Unlock()
		if timers != 0 {
			t.Errorf("%d initial fetch timers left, want none (ever has none, a and soon are done)", timers)
		}
		time.Sleep(time.Hour)
		if warmed != 1 {
			t.Errorf("OnWarmed called %d times after soon's timeout would have passed, want once", warmed)
		}
		if m.Get("ever") != nil {
			t.Error("a cluster with initial_fetch_timeout 0 stopped warming")
		}
	})
}

func TestEDSInitialFetchTimeoutInvalid(t *testing.T) {
	m := NewManager(slog.New(slog.DiscardHandler), stats.New())
	defer m.Close()
	_, err := m.ApplyCDS("1", []*clusterv3.Cluster{withFetchTimeout(eds("a", "a", time.Second), durationpb.New(-time.Second))})
	if err == nil || !strings.Contains(err.Error(), "eds_config") || !strings.Contains(err.Error(), "initial_fetch_timeout") {
		t.Errorf("err = %v, want eds_config initial_fetch_timeout named", err)
	}
}
