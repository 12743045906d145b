package main

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
)

// appMetrics are the echo's own Prometheus metrics (--metrics-addr): the
// requests it answered, by status, so a test of the agent's metrics merge
// sees an app's metrics with values it can predict.
type appMetrics struct {
	mu     sync.Mutex // guards byCode
	byCode map[int]int
}

func newAppMetrics() *appMetrics { return &appMetrics{byCode: map[int]int{}} }

// count wraps h and counts each response's status.
func (m *appMetrics) count(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		h.ServeHTTP(rec, r)
		m.mu.Lock()
		m.byCode[rec.code]++
		m.mu.Unlock()
	})
}

// ServeHTTP writes the text exposition (0.0.4) on any path.
func (m *appMetrics) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	m.mu.Lock()
	codes := make([]int, 0, len(m.byCode))
	for c := range m.byCode {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	fmt.Fprint(w, "# HELP strait_echo_requests_total Requests the echo answered, by status.\n# TYPE strait_echo_requests_total counter\n")
	for _, c := range codes {
		fmt.Fprintf(w, "strait_echo_requests_total{code=%q} %d\n", strconv.Itoa(c), m.byCode[c])
	}
	m.mu.Unlock()
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.code = code
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
