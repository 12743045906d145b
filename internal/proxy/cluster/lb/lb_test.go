package lb

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/straitmesh/strait/internal/proxy/fieldtest"
)

// testHost is a Host with its fields set by the test.
type testHost struct {
	addr    string
	weight  uint32
	active  atomic.Int64
	created time.Time
}

func (h *testHost) Weight() uint32     { return h.weight }
func (h *testHost) Address() string    { return h.addr }
func (h *testHost) Active() int64      { return h.active.Load() }
func (h *testHost) Created() time.Time { return h.created }

func hostsOf(weights ...uint32) []*testHost {
	hs := make([]*testHost, len(weights))
	for i, w := range weights {
		hs[i] = &testHost{addr: fmt.Sprintf("10.0.0.%d:80", i+1), weight: w}
	}
	return hs
}

// Every balancer: weights shape the share (3:1 within a tolerance), and a
// host the filter refuses is never picked; nil when the filter refuses all.
func TestBalancersWeightsAndFilter(t *testing.T) {
	for _, p := range []clusterv3.Cluster_LbPolicy{clusterv3.Cluster_ROUND_ROBIN, clusterv3.Cluster_RANDOM,
		clusterv3.Cluster_RING_HASH, clusterv3.Cluster_MAGLEV, clusterv3.Cluster_LEAST_REQUEST} {
		lb := Config{Policy: p, minRing: 1024, maxRing: defaultMaxRingSize, maglevSize: 65537, choiceCount: 2}
		hs := hostsOf(3, 1)
		b := New(lb, hs)
		n := map[*testHost]int{}
		for i := range uint64(4000) {
			n[b.Pick(i*0x9e3779b97f4a7c15, true, nil)]++
		}
		if p != clusterv3.Cluster_LEAST_REQUEST { // no request is in flight: least request ignores weights then
			if share := float64(n[hs[0]]) / 4000; share < 0.65 || share > 0.85 {
				t.Errorf("%s: the weight-3 host got %.2f of the picks, want about 0.75", p, share)
			}
		}
		notFirst := func(h *testHost) bool { return h != hs[0] }
		for i := range uint64(200) {
			if got := b.Pick(i*0x9e3779b97f4a7c15, true, notFirst); got != hs[1] {
				t.Fatalf("%s: picked %v with the filter refusing it", p, got.addr)
			}
		}
		if got := b.Pick(1, true, func(*testHost) bool { return false }); got != nil {
			t.Errorf("%s: picked %v with every host refused", p, got.addr)
		}
	}
	if got := New[*testHost](Config{Policy: clusterv3.Cluster_ROUND_ROBIN}, nil).Pick(0, false, nil); got != nil {
		t.Errorf("empty host set picked %v", got)
	}
}

// Least request weighs active requests by weight: a weight-4 host with 3
// in flight is as loaded as a weight-1 host with none.
func TestLeastRequestWeighted(t *testing.T) {
	hs := hostsOf(4, 1)
	hs[0].active.Store(3)
	if less(hs[0], hs[1]) || less(hs[1], hs[0]) {
		t.Error("(3+1)/4 and (0+1)/1 are equal loads")
	}
	hs[0].active.Store(2)
	if !less(hs[0], hs[1]) {
		t.Error("(2+1)/4 is less than (0+1)/1")
	}
}

// The lb_config allow-lists name only real fields.
func TestLBConfigFields(t *testing.T) {
	for _, c := range []struct {
		m    protoreflect.ProtoMessage
		list map[protoreflect.Name]bool
	}{
		{&clusterv3.Cluster_RingHashLbConfig{}, ringHashFields},
		{&clusterv3.Cluster_LeastRequestLbConfig{}, leastRequestFields},
		{&clusterv3.Cluster_RoundRobinLbConfig{}, roundRobinFields},
		{&clusterv3.Cluster_SlowStartConfig{}, slowStartFields},
	} {
		fieldtest.Known(t, c.m.ProtoReflect().Descriptor(), c.list)
	}
}
