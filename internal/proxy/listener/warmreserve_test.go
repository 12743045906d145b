package listener

import (
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func reservedAddr(m *Manager, name string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r := m.reserved[name]; r != nil {
		return r.addr.String()
	}
	return ""
}

// Every warming listener that will need a socket of its own reserves its
// address, whatever the warming listeners before it (in name order) need:
// one that binds no port, one whose update keeps its address, one that
// moves to a new address.
func TestWarmingListenersEachReserve(t *testing.T) {
	m, routes, _ := warmingManager(t)
	if err := routes.Apply("1", emptyRoutes("ready")); err != nil {
		t.Fatal(err)
	}
	aAddr, bAddr, cAddr, cMoved := freeTCP(t), freeTCP(t), freeTCP(t), freeTCP(t)
	if _, err := m.ApplyLDS("1", []*listenerv3.Listener{rdsListener(t, "a", aAddr, "ready", nil), rdsListener(t, "c", cAddr, "ready", nil)}); err != nil {
		t.Fatal(err)
	}
	if m.Warming() != 0 {
		t.Fatalf("version 1: %d warming, want a and c active", m.Warming())
	}

	// Version 2: a keeps its address, c moves, b is new and binds no port;
	// all three wait for route configuration "later".
	a2 := rdsListener(t, "a", aAddr, "later", nil)
	b := rdsListener(t, "b", bAddr, "later", nil)
	b.BindToPort = wrapperspb.Bool(false)
	c2 := rdsListener(t, "c", cMoved, "later", nil)
	dAddr := freeTCP(t)
	d := rdsListener(t, "d", dAddr, "later", nil)
	if _, err := m.ApplyLDS("2", []*listenerv3.Listener{a2, b, c2, d}); err != nil {
		t.Fatal(err)
	}
	if m.Warming() != 4 {
		t.Fatalf("version 2: %d warming, want 4", m.Warming())
	}
	for name, want := range map[string]string{"a": "", "b": "", "c": cMoved, "d": dAddr} {
		if got := reservedAddr(m, name); got != want {
			t.Errorf("warming %s reserved %q, want %q", name, got, want)
		}
	}
}
