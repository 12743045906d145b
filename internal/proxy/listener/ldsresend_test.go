package listener

import (
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
)

// An LDS response that repeats a still-warming listener unchanged keeps
// it warming and applies the listeners after it in the response too.
func TestLDSRepeatsWarmingListener(t *testing.T) {
	m, _, _ := warmingManager(t)
	warmAddr, plainAddr := freeTCP(t), freeTCP(t)
	w := rdsListener(t, "w", warmAddr, "r", nil)
	plain := &listenerv3.Listener{Name: "plain", Address: addr(plainAddr), FilterChains: []*listenerv3.FilterChain{tcpChain(t, "be", nil)}}
	if _, err := m.ApplyLDS("1", []*listenerv3.Listener{w, plain}); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Addr("plain"); !ok || m.Warming() != 1 {
		t.Fatalf("after version 1: plain bound %v, warming %d; want plain bound and w warming", ok, m.Warming())
	}
	if _, err := m.ApplyLDS("2", []*listenerv3.Listener{w, plain}); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Addr("plain"); !ok {
		t.Error("version 2 repeats w (warming) then plain: plain was removed")
	}
	if m.Warming() != 1 {
		t.Errorf("version 2: %d warming, want w still warming", m.Warming())
	}
}
