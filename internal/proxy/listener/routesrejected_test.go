package listener

import (
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
)

// A rejected RDS response for the route configuration a listener waits
// for ends its warming (Envoy counts the failed update as the initial
// fetch done); a rejection of another name, or of a name nothing waits
// for, changes nothing.
func TestRoutesRejectedEndsWarming(t *testing.T) {
	m, _, _ := warmingManager(t)
	if _, err := m.ApplyLDS("1", []*listenerv3.Listener{rdsListener(t, "l", freeTCP(t), "r", nil)}); err != nil {
		t.Fatal(err)
	}
	m.RoutesRejected([]string{"other"})
	if m.Warming() != 1 {
		t.Fatalf("after rejecting another name: %d warming, want 1", m.Warming())
	}
	m.RoutesRejected([]string{"r"})
	if m.Warming() != 0 {
		t.Errorf("after rejecting r: %d warming, want the listener active", m.Warming())
	}
	if _, ok := m.Addr("l"); !ok {
		t.Error("the listener left warming without a socket")
	}
}
