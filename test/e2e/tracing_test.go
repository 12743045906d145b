package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/localmesh"
	"github.com/straitmesh/strait/internal/proxy/tracing"
)

// zipkinReceiver is a Zipkin collector as far as the wire goes: a real
// HTTP server taking v2 JSON span lists on POST /api/v2/spans.
type zipkinReceiver struct {
	mu    sync.Mutex
	spans []tracing.ZipkinSpan
}

func (z *zipkinReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/api/v2/spans" {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	var got []tracing.ZipkinSpan
	if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	z.mu.Lock()
	z.spans = append(z.spans, got...)
	z.mu.Unlock()
	w.WriteHeader(http.StatusAccepted)
}

// traces groups the spans received by trace id.
func (z *zipkinReceiver) traces() map[string][]tracing.ZipkinSpan {
	z.mu.Lock()
	defer z.mu.Unlock()
	out := map[string][]tracing.ZipkinSpan{}
	for _, s := range z.spans {
		out[s.TraceID] = append(out[s.TraceID], s)
	}
	return out
}

// TestTracing: a request from the client pod goes client sidecar → front
// sidecar → front's app, which calls back through its own sidecar with
// the trace headers it got (as applications must) → back sidecar → back's
// app. With the mesh config's tracing (Zipkin at a real collector on the
// host, 100 % sampling), the collector gets one trace of four spans: the
// client sidecar's CLIENT span (the root), front's SERVER span as its
// child, front's outbound CLIENT span as the child of that, and back's
// SERVER span as the child of the last, each from its own sidecar.
func TestTracing(t *testing.T) {
	requireMesh(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	meshFile := filepath.Join(t.TempDir(), "mesh.yaml")
	replaceFile(t, meshFile, "trustDomain: cluster.local\n")
	m := startMesh(ctx, t, "tracing", localmesh.Options{StraitdArgs: []string{"--mesh", meshFile},
		Workloads: []localmesh.Workload{
			{Name: "client", Namespace: "trace", ConfigIP: "10.89.0.10"},
			echoPod("front", "trace", "10.89.0.11", "v1", "--next", "http://240.240.20.2/"),
			echoPod("back", "trace", "10.89.0.12", "v1"),
		}})
	// The collector listens on the bridge's host address, which every
	// pod reaches; the mesh config then points the sidecars at it.
	ln, err := net.Listen("tcp", net.JoinHostPort(m.HostIP().String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	z := &zipkinReceiver{}
	srv := &http.Server{Handler: z, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	replaceFile(t, meshFile, fmt.Sprintf("enableTracing: true\ndefaultConfig:\n  tracing:\n    sampling: 100\n    zipkin: {address: %q}\n", ln.Addr().String()))

	c := m.Pod("client").NewHTTPClient(false)
	var trace []tracing.ZipkinSpan
	err = poll(ctx, 90*time.Second, func() error {
		r := send(ctx, c, http.MethodGet, "http://240.240.20.1/", "", nil)
		if r.err != nil {
			return r.err
		}
		if r.status != http.StatusOK {
			return fmt.Errorf("status %d: %s", r.status, r.body)
		}
		for _, spans := range z.traces() {
			if len(spans) == 4 {
				trace = spans
				return nil
			}
		}
		return fmt.Errorf("no trace of 4 spans yet (%d traces)", len(z.traces()))
	})
	if err != nil {
		t.Fatal(err)
	}
	byParent := map[string]tracing.ZipkinSpan{}
	var root *tracing.ZipkinSpan
	for i, s := range trace {
		if s.ParentID == "" {
			if root != nil {
				t.Fatalf("two root spans: %+v", trace)
			}
			root = &trace[i]
			continue
		}
		byParent[s.ParentID] = s
	}
	if root == nil {
		t.Fatalf("no root span: %+v", trace)
	}
	// Walk the chain from the root: each span the parent of the next.
	want := []struct{ kind, service string }{{"CLIENT", "client.trace"}, {"SERVER", "front.trace"}, {"CLIENT", "front.trace"}, {"SERVER", "back.trace"}}
	s := *root
	for i, w := range want {
		if s.Kind != w.kind || s.LocalEndpoint == nil || s.LocalEndpoint.ServiceName != w.service {
			t.Errorf("span %d of the chain: kind %s service %v, want %s from %s's sidecar (%+v)", i, s.Kind, s.LocalEndpoint, w.kind, w.service, s)
		}
		if s.Tags["http.status_code"] != "200" || s.Tags["component"] != "proxy" {
			t.Errorf("span %d tags %v", i, s.Tags)
		}
		if i == len(want)-1 {
			break
		}
		next, ok := byParent[s.ID]
		if !ok {
			t.Fatalf("no span has span %d (%s) as parent: %+v", i, s.ID, trace)
		}
		s = next
	}
	if len(byParent) != 3 {
		t.Errorf("%d child spans, want 3 in one chain: %+v", len(byParent), trace)
	}
}
