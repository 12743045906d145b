package cluster

import (
	"testing"
	"time"
	"unsafe"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"

	"github.com/straitmesh/strait/internal/proxy/cluster/lb"
)

// A host fits the 112-byte size class: a sidecar's configuration of
// 1,000 services holds 10,000 of them (bench/sidecar); it was 136 bytes,
// allocated as 144.
func TestHostSize(t *testing.T) {
	if n := unsafe.Sizeof(host{}); n > 112 {
		t.Errorf("host is %d bytes, want ≤ 112", n)
	}
}

// The hosts of one update share their creation time; a host kept by the
// next update keeps its time, a new one gets the later time, and the
// set's newest follows.
func TestHostCreatedAcrossUpdates(t *testing.T) {
	cfg := lb.Config{Policy: clusterv3.Cluster_ROUND_ROBIN}
	first := newHostSet(endpointList{eps: []Endpoint{{Address: "a"}, {Address: "b"}}}, nil, cfg)
	a, b := first.hosts[0], first.hosts[1]
	if a.created != b.created || first.newest != a.Created() {
		t.Fatalf("one update's hosts: created %v and %v, newest %v", a.Created(), b.Created(), first.newest)
	}
	was := a.Created()
	time.Sleep(2 * time.Millisecond)
	second := newHostSet(endpointList{eps: []Endpoint{{Address: "a"}, {Address: "c"}}}, first, cfg)
	kept, c := second.hosts[0], second.hosts[1]
	if kept != a || !kept.Created().Equal(was) || !b.Created().Equal(was) {
		t.Errorf("the kept host's time moved: %v, then %v (b %v)", was, kept.Created(), b.Created())
	}
	if !c.Created().After(was) || !second.newest.Equal(c.Created()) {
		t.Errorf("the new host was created %v (first update %v), newest %v", c.Created(), was, second.newest)
	}
}
