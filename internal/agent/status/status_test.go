package status

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// fakeAdmin is the proxy's admin API: /ready and /stats/prometheus.
func fakeAdmin(t *testing.T, ready *atomic.Bool) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("/ready", func(w http.ResponseWriter, r *http.Request) {
		if ready.Load() {
			fmt.Fprintln(w, "LIVE")
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, "PRE_INITIALIZING")
	})
	mux.HandleFunc("/stats/prometheus", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `envoy_cluster_upstream_rq_total{cluster_name="a"} 3`) // no trailing newline
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Body.String()
}

func TestReady(t *testing.T) {
	var ready atomic.Bool
	admin := fakeAdmin(t, &ready)
	s := New(Options{
		AdminURL:  admin.URL,
		XDSSynced: func() (bool, bool) { return true, false },
		Logger:    slog.New(slog.DiscardHandler),
	})
	for _, h := range []http.Handler{s.ReadyHandler(), s.Handler()} {
		ready.Store(false)
		code, body := get(t, h, ReadyPath)
		if code != http.StatusServiceUnavailable || !strings.Contains(body, "PRE_INITIALIZING") || !strings.Contains(body, "LDS acked=false") {
			t.Errorf("before LIVE: %d %q", code, body)
		}
		ready.Store(true)
		if code, body := get(t, h, ReadyPath); code != http.StatusOK {
			t.Errorf("after LIVE: %d %q", code, body)
		}
	}
	s.SetDraining()
	if code, body := get(t, s.ReadyHandler(), ReadyPath); code != http.StatusServiceUnavailable || !strings.Contains(body, "draining") {
		t.Errorf("draining: %d %q", code, body)
	}
}

func TestReadyAdminDown(t *testing.T) {
	var ready atomic.Bool
	admin := fakeAdmin(t, &ready)
	admin.Close()
	s := New(Options{AdminURL: admin.URL, Logger: slog.New(slog.DiscardHandler)})
	if code, body := get(t, s.ReadyHandler(), ReadyPath); code != http.StatusServiceUnavailable || !strings.Contains(body, "not reachable") {
		t.Errorf("admin down: %d %q", code, body)
	}
}

func TestMergedMetrics(t *testing.T) {
	var ready atomic.Bool
	admin := fakeAdmin(t, &ready)
	s := New(Options{
		AdminURL:     admin.URL,
		AgentMetrics: func(w io.Writer) error { _, err := fmt.Fprintln(w, "strait_agent_up 1"); return err },
		Logger:       slog.New(slog.DiscardHandler),
	})
	code, body := get(t, s.Handler(), PrometheusPath)
	want := "envoy_cluster_upstream_rq_total{cluster_name=\"a\"} 3\nstrait_agent_up 1\n# HELP istio_agent_scrapes_total"
	if code != http.StatusOK || !strings.HasPrefix(body, want) {
		t.Errorf("metrics: %d %q, want %q", code, body, want)
	}
	if code, _ := get(t, s.ReadyHandler(), PrometheusPath); code != http.StatusNotFound {
		t.Errorf("15021 should not serve metrics, got %d", code)
	}
	admin.Close()
	if code, body := get(t, s.Handler(), PrometheusPath); code != http.StatusOK || !strings.HasPrefix(body, "strait_agent_up 1\n") ||
		!strings.Contains(body, `istio_agent_scrape_failures_total{type="envoy"} 1`) {
		t.Errorf("metrics with proxy down: %d %q", code, body)
	}
}

// TestDrainInbound: the agent asks the proxy's admin for Istio's
// termination drain, and reports an admin that refuses it.
func TestDrainInbound(t *testing.T) {
	var got []string
	mux := http.NewServeMux()
	mux.HandleFunc("/drain_listeners", func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Method+" "+r.URL.RequestURI())
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
		}
	})
	admin := httptest.NewServer(mux)
	defer admin.Close()
	s := New(Options{AdminURL: admin.URL, Logger: slog.New(slog.DiscardHandler)})
	if err := s.DrainInbound(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != "POST /drain_listeners?inboundonly&graceful" {
		t.Fatalf("admin saw %q, want one POST /drain_listeners?inboundonly&graceful", got)
	}

	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNotFound) }))
	defer refusing.Close()
	s = New(Options{AdminURL: refusing.URL, Logger: slog.New(slog.DiscardHandler)})
	if err := s.DrainInbound(t.Context()); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("DrainInbound against a 404 admin = %v, want an error naming the status", err)
	}
}

// TestReadyWaitsForDNS: with a DNS proxy, the pod is not ready until it
// says so, even when the proxy is LIVE.
func TestReadyWaitsForDNS(t *testing.T) {
	var ready, dnsReady atomic.Bool
	ready.Store(true)
	admin := fakeAdmin(t, &ready)
	s := New(Options{
		AdminURL: admin.URL,
		DNSReady: func() error {
			if !dnsReady.Load() {
				return fmt.Errorf("dns proxy: waiting for the first name table")
			}
			return nil
		},
		Logger: slog.New(slog.DiscardHandler),
	})
	if code, body := get(t, s.ReadyHandler(), ReadyPath); code != http.StatusServiceUnavailable || !strings.Contains(body, "first name table") {
		t.Errorf("before the name table: %d %q", code, body)
	}
	dnsReady.Store(true)
	if code, body := get(t, s.ReadyHandler(), ReadyPath); code != http.StatusOK {
		t.Errorf("after the name table: %d %q", code, body)
	}
}
