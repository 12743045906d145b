package cluster

import (
	"net/netip"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/types/known/durationpb"
)

// A host that just joined gets less of the picks until its window passes
// (the weights themselves: lb's TestSlowStartFactor).
func TestSlowStart(t *testing.T) {
	c := staticCluster(t, 2, func(c *clusterv3.Cluster) {
		c.LbConfig = &clusterv3.Cluster_RoundRobinLbConfig_{RoundRobinLbConfig: &clusterv3.Cluster_RoundRobinLbConfig{
			SlowStartConfig: &clusterv3.Cluster_SlowStartConfig{SlowStartWindow: durationpb.New(time.Hour)}}}
	})
	s := c.hosts.Load()
	old, fresh := s.hosts[0], s.hosts[1]
	longAgo := time.Now().Add(-2 * time.Hour)
	old.created = &longAgo // long in the cluster (not the time it shares with fresh)
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
	s.newest = longAgo
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
