package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestAppMetrics: the echo counts its answers by status and exposes them
// in Prometheus' text format.
func TestAppMetrics(t *testing.T) {
	m := newAppMetrics()
	h := m.count(handler("v1", "p"))
	for _, st := range []string{"", "", "503"} {
		req := httptest.NewRequest(http.MethodGet, "/x", nil)
		if st != "" {
			req.Header.Set("X-Echo-Status", st)
		}
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	rec := httptest.NewRecorder()
	m.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body := rec.Body.String()
	if !strings.Contains(body, "strait_echo_requests_total{code=\"200\"} 2\nstrait_echo_requests_total{code=\"503\"} 1\n") ||
		!strings.HasPrefix(rec.Header().Get("Content-Type"), "text/plain; version=0.0.4") {
		t.Errorf("metrics:\n%s", body)
	}
}
