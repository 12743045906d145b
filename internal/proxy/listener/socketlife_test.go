package listener

import (
	"log/slog"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/route"
	"github.com/straitmesh/strait/internal/proxy/stats"
)

func socketManager(t *testing.T, held bool) *Manager {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	st := stats.New()
	cm := cluster.NewManager(log, st)
	t.Cleanup(cm.Close)
	if err := cm.AddStatic([]*clusterv3.Cluster{staticCluster("be", nameServer(t, "be"))}); err != nil {
		t.Fatal(err)
	}
	m := NewManager(Options{Logger: log, Stats: st, Routes: route.NewStore(), Clusters: cm, OriginalDst: (&fakeOrigDst{}).get, Held: held})
	t.Cleanup(m.Close)
	return m
}

func plainListener(t *testing.T, name, hostport string) *listenerv3.Listener {
	return &listenerv3.Listener{Name: name, Address: addr(hostport), FilterChains: []*listenerv3.FilterChain{tcpChain(t, "be", nil)}}
}

// A held manager binds every listener of an LDS response, not only the
// first, and each listens once StartListening is called.
func TestHeldBindsEveryListener(t *testing.T) {
	m := socketManager(t, true)
	a, b, c := freeTCP(t), freeTCP(t), freeTCP(t)
	if _, err := m.ApplyLDS("1", []*listenerv3.Listener{plainListener(t, "a", a), plainListener(t, "b", b), plainListener(t, "c", c)}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a", "b", "c"} {
		if _, ok := m.Addr(n); !ok {
			t.Errorf("held listener %s has no socket", n)
		}
	}
	m.StartListening()
	for _, hp := range []string{a, b, c} {
		if got := dialLine(t, hp); got != "be 127.0.0.1" {
			t.Errorf("via %s after StartListening: %q, want be's greeting", hp, got)
		}
	}
}

// A listener that an LDS update removes stops listening at once.
func TestRemovedListenerStopsListening(t *testing.T) {
	m := socketManager(t, false)
	a, b := freeTCP(t), freeTCP(t)
	if _, err := m.ApplyLDS("1", []*listenerv3.Listener{plainListener(t, "a", a), plainListener(t, "b", b)}); err != nil {
		t.Fatal(err)
	}
	if got := dialLine(t, b); got != "be 127.0.0.1" {
		t.Fatalf("via b: %q", got)
	}
	if _, err := m.ApplyLDS("2", []*listenerv3.Listener{plainListener(t, "a", a)}); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Addr("b"); ok {
		t.Error("removed listener b still has its socket")
	}
	if !connectRefused(t, b) {
		t.Error("removed listener b still accepts connections")
	}
	if got := dialLine(t, a); got != "be 127.0.0.1" {
		t.Errorf("via a, kept: %q", got)
	}
}

// /drain_listeners without graceful stops the listeners it covers: their
// sockets close; with inboundonly the others go on.
func TestAdminDrainStopsListening(t *testing.T) {
	m := socketManager(t, false)
	in, out := freeTCP(t), freeTCP(t)
	inbound := plainListener(t, "in", in)
	inbound.TrafficDirection = corev3.TrafficDirection_INBOUND
	if _, err := m.ApplyLDS("1", []*listenerv3.Listener{inbound, plainListener(t, "out", out)}); err != nil {
		t.Fatal(err)
	}
	m.DrainListeners(true, false)
	if !connectRefused(t, in) {
		t.Error("the inbound listener accepts after /drain_listeners?inboundonly")
	}
	if got := dialLine(t, out); got != "be 127.0.0.1" {
		t.Errorf("the outbound listener after an inbound-only drain: %q, want be's greeting", got)
	}
}

// Removing a listener that binds no port (a handoff target) removes it;
// there is no socket to close.
func TestRemoveListenerWithoutSocket(t *testing.T) {
	m := socketManager(t, false)
	target := plainListener(t, "target", "10.0.0.1:8080")
	target.BindToPort = wrapperspb.Bool(false)
	if _, err := m.ApplyLDS("1", []*listenerv3.Listener{target}); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Addr("target"); ok {
		t.Fatal("a listener with bind_to_port false has a socket")
	}
	if _, err := m.ApplyLDS("2", nil); err != nil {
		t.Fatal(err)
	}
	if _, _, dyn := m.Snapshot(); len(dyn) != 0 {
		t.Errorf("after removing it: %d dynamic listeners, want none", len(dyn))
	}
}
