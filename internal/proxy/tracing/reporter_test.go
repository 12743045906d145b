package tracing

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// zipkinReceiver is a real HTTP server taking Zipkin v2 JSON on
// /api/v2/spans, as a Zipkin collector does.
type zipkinReceiver struct {
	srv   *httptest.Server
	spans chan ZipkinSpan
}

func newZipkinReceiver(t *testing.T, handler func(http.ResponseWriter, *http.Request) bool) *zipkinReceiver {
	z := &zipkinReceiver{spans: make(chan ZipkinSpan, 1000)}
	z.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if handler != nil && !handler(w, r) {
			return
		}
		if r.URL.Path != "/api/v2/spans" || r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		var spans []ZipkinSpan
		if err := json.NewDecoder(r.Body).Decode(&spans); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, s := range spans {
			z.spans <- s
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(z.srv.Close)
	return z
}

func (z *zipkinReceiver) dial(t *testing.T) DialFunc {
	addr := z.srv.Listener.Addr().String()
	return func(ctx context.Context, cluster string) (net.Conn, error) {
		if cluster != "zipkin" {
			t.Errorf("dialed cluster %q", cluster)
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
}

func TestZipkinReporter(t *testing.T) {
	z := newZipkinReceiver(t, nil)
	reps := NewReporters(ReportersOptions{Dial: z.dial(t), FlushInterval: 50 * time.Millisecond})
	defer reps.Close()
	p := Provider{Kind: KindZipkin, Cluster: "zipkin", Host: "zipkin.istio-system:9411", Path: "/api/v2/spans"}
	rep := reps.For(p)
	if reps.For(p) != rep {
		t.Error("one reporter per provider")
	}
	start := time.UnixMicro(1_700_000_000_000_000)
	rep.Report(&Span{TraceID: TraceID{High: 1, Low: 2}, ID: 3, ParentID: 4, Name: "ingress", Kind: KindServer, Start: start,
		Duration: 1500 * time.Microsecond, Service: "app.ns", Tags: []Tag{{"component", "proxy"}}})
	select {
	case s := <-z.spans:
		want := ZipkinSpan{TraceID: "00000000000000010000000000000002", ID: "0000000000000003", ParentID: "0000000000000004", Name: "ingress",
			Kind: "SERVER", Timestamp: 1_700_000_000_000_000, Duration: 1500}
		if s.TraceID != want.TraceID || s.ID != want.ID || s.ParentID != want.ParentID || s.Kind != want.Kind || s.Timestamp != want.Timestamp ||
			s.Duration != want.Duration || s.LocalEndpoint == nil || s.LocalEndpoint.ServiceName != "app.ns" || s.Tags["component"] != "proxy" {
			t.Errorf("got %+v", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no span reached the collector")
	}
}

// TestSlowCollectorNeverBlocks: with a collector that never answers,
// Report returns at once and the spans past the queue are dropped and
// counted.
func TestSlowCollectorNeverBlocks(t *testing.T) {
	stall := make(chan struct{})
	z := newZipkinReceiver(t, func(http.ResponseWriter, *http.Request) bool { <-stall; return false })
	defer close(stall)
	reps := NewReporters(ReportersOptions{Dial: z.dial(t), QueueSize: 8, BatchSize: 2, FlushInterval: time.Millisecond})
	defer reps.Close()
	rep := reps.For(Provider{Kind: KindZipkin, Cluster: "zipkin", Host: "zipkin", Path: "/api/v2/spans", Timeout: time.Minute})
	begin := time.Now()
	for range 1000 {
		rep.Report(&Span{TraceID: TraceID{Low: 1}, ID: 1, Start: time.Now()})
	}
	if d := time.Since(begin); d > time.Second {
		t.Errorf("1000 reports took %v with a stalled collector", d)
	}
	if s := reps.Stats(); s.Dropped < 1000-8-2 {
		t.Errorf("stats %+v: want the spans past the queue dropped", s)
	}
}

// TestReporterCountsFailures: a collector that answers 500 counts the
// batch as failed.
func TestReporterCountsFailures(t *testing.T) {
	z := newZipkinReceiver(t, func(w http.ResponseWriter, _ *http.Request) bool { http.Error(w, "no", 500); return false })
	reps := NewReporters(ReportersOptions{Dial: z.dial(t), FlushInterval: 10 * time.Millisecond})
	defer reps.Close()
	reps.For(Provider{Kind: KindZipkin, Cluster: "zipkin", Host: "zipkin", Path: "/api/v2/spans"}).Report(&Span{TraceID: TraceID{Low: 1}, ID: 1, Start: time.Now()})
	deadline := time.Now().Add(10 * time.Second)
	for reps.Stats().Failed == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the failure was not counted")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
