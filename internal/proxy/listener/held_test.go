package listener

import (
	"log/slog"
	"net"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/route"
	"github.com/straitmesh/strait/internal/proxy/stats"
)

// A held manager binds its listeners, static and LDS ones, but accepts
// nothing until StartListening; an update of a held listener keeps its
// socket, a removal frees it; after StartListening every listener
// accepts, and new ones listen at once.
func TestHeldListenersListenOnStart(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	st := stats.New()
	cm := cluster.NewManager(log, st)
	t.Cleanup(cm.Close)
	if err := cm.AddStatic([]*clusterv3.Cluster{staticCluster("be", nameServer(t, "be"))}); err != nil {
		t.Fatal(err)
	}
	od := &fakeOrigDst{}
	m := NewManager(Options{Logger: log, Stats: st, Routes: route.NewStore(), Clusters: cm, OriginalDst: od.get, Held: true})
	t.Cleanup(m.Close)
	tcpListener := func(name, hostport string) *listenerv3.Listener {
		return &listenerv3.Listener{Name: name, Address: addr(hostport), FilterChains: []*listenerv3.FilterChain{tcpChain(t, "be", nil)}}
	}
	if err := m.AddStatic([]*listenerv3.Listener{tcpListener("static", "127.0.0.1:0")}); err != nil {
		t.Fatal(err)
	}
	staticAddr, ok := m.Addr("static")
	if !ok || staticAddr.(*net.TCPAddr).Port == 0 {
		t.Fatalf("held static listener's address = %v %t, want a bound port", staticAddr, ok)
	}
	dyn, gone := freeTCP(t), freeTCP(t)
	if _, err := m.ApplyLDS("1", []*listenerv3.Listener{tcpListener("dyn", dyn), tcpListener("gone", gone)}); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{staticAddr.String(), dyn, gone} {
		if !connectRefused(t, a) {
			t.Errorf("held listener on %s accepts before StartListening", a)
		}
	}
	v2 := tcpListener("dyn", dyn)
	v2.ListenerFiltersTimeout = durationpb.New(time.Second) // a full update, same address
	if _, err := m.ApplyLDS("2", []*listenerv3.Listener{v2}); err != nil {
		t.Fatal(err)
	}
	if a, ok := m.Addr("gone"); ok {
		t.Errorf("the removed held listener still has its socket on %v", a)
	}
	m.mu.Lock()
	heldDyn := m.sockets["dyn"]
	m.mu.Unlock()
	if heldDyn == nil || heldDyn.held == nil || heldDyn.current.Load().Config != v2 {
		t.Errorf("dyn's socket after a full update while held = %+v, want still held, serving v2", heldDyn)
	}
	m.StartListening()
	for _, a := range []string{staticAddr.String(), dyn} {
		if got := dialLine(t, a); got != "be 127.0.0.1" {
			t.Errorf("via %s after StartListening: %q, want be's greeting", a, got)
		}
	}
	late := freeTCP(t)
	if _, err := m.ApplyLDS("3", []*listenerv3.Listener{v2, tcpListener("late", late)}); err != nil {
		t.Fatal(err)
	}
	if got := dialLine(t, late); got != "be 127.0.0.1" {
		t.Errorf("a listener added after StartListening: %q, want be's greeting", got)
	}
}
