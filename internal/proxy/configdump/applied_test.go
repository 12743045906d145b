package configdump

import (
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// edsCluster is an EDS cluster named name.
func edsCluster(name string) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name:                 name,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig:     &clusterv3.Cluster_EdsClusterConfig{ServiceName: name},
		ConnectTimeout:       durationpb.New(10 * time.Second),
	}
}

// appliedTimes: a config keeps its time while it is shown, an equal one
// sent again does not move it, a changed one gets the new time, and a
// config no longer shown is forgotten, so coming back is a change again.
func TestAppliedTimes(t *testing.T) {
	var a appliedTimes
	t0 := time.Unix(100, 0)
	c1 := edsCluster("a")
	c2 := edsCluster("a")
	c2.ConnectTimeout = nil // another config of a
	at := func(m *clusterv3.Cluster) time.Time {
		ts := a.lookup(kindCluster, "a", m)
		if ts == nil {
			return time.Time{}
		}
		return ts.AsTime()
	}
	live := func(ms ...proto.Message) map[string][]configSum {
		var sums []configSum
		for _, m := range ms {
			sums = append(sums, sumOf(m))
		}
		return map[string][]configSum{"a": sums}
	}

	a.record(kindCluster, "a", sumOf(c1), t0)
	a.record(kindCluster, "a", sumOf(proto.Clone(c1)), t0.Add(time.Second)) // sent again unchanged
	if got := at(c1); !got.Equal(t0) {
		t.Errorf("unchanged: %v, want %v", got, t0)
	}
	if a.lookup(kindListener, "a", c1) != nil || a.lookup(kindCluster, "b", c1) != nil {
		t.Error("a time found under another kind or name")
	}
	a.record(kindCluster, "a", sumOf(c2), t0.Add(2*time.Second)) // changed; c1 still shown (warming c2)
	a.keep(kindCluster, live(c1, c2))
	if !at(c1).Equal(t0) || !at(c2).Equal(t0.Add(2*time.Second)) {
		t.Errorf("two configs shown: %v and %v, want %v and %v", at(c1), at(c2), t0, t0.Add(2*time.Second))
	}
	a.keep(kindCluster, live(c2)) // c1 gone
	a.record(kindCluster, "a", sumOf(c1), t0.Add(3*time.Second))
	if got := at(c1); !got.Equal(t0.Add(3 * time.Second)) {
		t.Errorf("back to an earlier config: %v, want the new time %v", got, t0.Add(3*time.Second))
	}
	a.keep(kindListener, nil) // another kind: clusters untouched
	if at(c2).IsZero() {
		t.Error("keep of listeners forgot a cluster")
	}
	a.keep(kindCluster, nil)
	if !at(c1).IsZero() || len(a.names) != 0 {
		t.Errorf("a name no longer configured is remembered: %v", a.names)
	}
}
