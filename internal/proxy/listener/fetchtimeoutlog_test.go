package listener

import (
	"log/slog"
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/hcm"
	"github.com/straitmesh/strait/internal/proxy/route"
	"github.com/straitmesh/strait/internal/proxy/stats"
)

// When a route configuration's initial fetch timeout passes without it,
// its listeners leave warming and the manager warns once that they start
// without it.
func TestFetchTimeoutWarnsOfMissingRoutes(t *testing.T) {
	h := &countingHandler{}
	log := slog.New(h)
	st := stats.New()
	cm := cluster.NewManager(slog.New(slog.DiscardHandler), st)
	t.Cleanup(cm.Close)
	srv := hcm.NewServer(hcm.Options{Logger: slog.New(slog.DiscardHandler), Clusters: cm})
	t.Cleanup(func() { srv.Close() })
	m := NewManager(Options{Logger: log, Stats: st, Routes: route.NewStore(), Clusters: cm, HTTP: srv})
	t.Cleanup(m.Close)

	if _, err := m.ApplyLDS("1", []*listenerv3.Listener{rdsListener(t, "l", freeTCP(t), "missing", durationpb.New(20*time.Millisecond))}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for m.Warming() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the listener still warms long after its initial fetch timeout")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := h.warns.Load(); n != 1 {
		t.Errorf("%d warnings, want 1 that the route configuration did not come", n)
	}
}
