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
// A manager without a route store (none given) warns the same.
func TestFetchTimeoutWarnsOfMissingRoutes(t *testing.T) {
	for _, withStore := range []bool{true, false} {
		t.Run(map[bool]string{true: "route store", false: "no route store"}[withStore], func(t *testing.T) {
			fetchTimeoutWarns(t, withStore)
		})
	}
}

func fetchTimeoutWarns(t *testing.T, withStore bool) {
	h := &countingHandler{}
	log := slog.New(h)
	st := stats.New()
	cm := cluster.NewManager(slog.New(slog.DiscardHandler), st)
	t.Cleanup(cm.Close)
	srv := hcm.NewServer(hcm.Options{Logger: slog.New(slog.DiscardHandler), Clusters: cm})
	t.Cleanup(func() { srv.Close() })
	opts := Options{Logger: log, Stats: st, Clusters: cm, HTTP: srv}
	if withStore {
		opts.Routes = route.NewStore()
	}
	m := NewManager(opts)
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
