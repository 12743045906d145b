package cluster

import (
	"net/netip"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/types/known/durationpb"
)

// A host that just joined gets min_weight_percent of its weight, then
// more as its window passes, then all of it.
func TestSlowStart(t *testing.T) {
	ss := &slowStart{window: 100 * time.Second, aggression: 1, minWeight: 0.1}
	now := time.Now()
	for _, c := range []struct {
		age  time.Duration
		want float64
	}{{0, 0.1}, {50 * time.Second, 0.5}, {99 * time.Second, 0.99}, {100 * time.Second, 1}, {time.Hour, 1}} {
		if got := ss.factor(now.Add(-c.age), now); got < c.want-1e-9 || got > c.want+1e-9 {
			t.Errorf("factor at %v = %v, want %v", c.age, got, c.want)
		}
	}
	c := staticCluster(t, 2, func(c *clusterv3.Cluster) {
		c.LbConfig = &clusterv3.Cluster_RoundRobinLbConfig_{RoundRobinLbConfig: &clusterv3.Cluster_RoundRobinLbConfig{
			SlowStartConfig: &clusterv3.Cluster_SlowStartConfig{SlowStartWindow: durationpb.New(time.Hour)}}}
	})
	s := c.hosts.Load()
	old, fresh := s.hosts[0], s.hosts[1]
	old.created = time.Now().Add(-2 * time.Hour) // long in the cluster
	n := 0
	for range 1000 {
		if ep, _ := c.Pick(netip.AddrPort{}); ep.Address == fresh.ep.Address {
			n++
		}
	}
	// The fresh host weighs 0.1 against 1: about 91 of 1000.
	if n < 40 || n > 160 {
		t.Errorf("the host in slow start got %d of 1000 picks; want about 91", n)
	}
	// Once its window is over the two share evenly (the round robin).
	fresh.created = old.created
	s.newest = old.created
	n = 0
	for range 1000 {
		if ep, _ := c.Pick(netip.AddrPort{}); ep.Address == fresh.ep.Address {
			n++
		}
	}
	if n != 500 {
		t.Errorf("after the window: %d of 1000 picks, want 500", n)
	}
}
