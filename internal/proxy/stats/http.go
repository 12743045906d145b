package stats

import "sync/atomic"

// HTTPStats are one HTTP connection manager stat_prefix's downstream
// counters, with Envoy's names: http.PREFIX.downstream_rq_total and the
// rest in /stats, envoy_http_downstream_rq_total{envoy_http_conn_manager_prefix="PREFIX"}
// in Prometheus (Envoy's tag extraction, which Istio keeps).
type HTTPStats struct {
	Prefix string
	// RqTotal counts requests received (a request head parsed), by
	// protocol too; RqActive the requests in progress.
	RqTotal, RqHTTP1Total, RqHTTP2Total atomic.Uint64
	RqActive                            atomic.Int64
	// RqTooLarge counts requests answered 413 for a body past the
	// buffer limit of the filters that read it (downstream_rq_too_large).
	RqTooLarge atomic.Uint64
	// CxTotal counts connections served; CxActive those open; CxDestroy
	// those closed (downstream_cx_destroy, whichever side closed them).
	CxTotal, CxDestroy atomic.Uint64
	CxActive           atomic.Int64
	classes            [6]atomic.Uint64 // responses by status class (1 to 5)
}

// AddResponse counts one response sent downstream with the given status:
// downstream_rq_completed and downstream_rq_Nxx, as Envoy charges them
// when the response headers are encoded.
func (h *HTTPStats) AddResponse(code int) {
	if code >= 100 && code < maxStatusCode {
		h.classes[code/100].Add(1)
	}
}

// HTTP returns the counters of an HTTP connection manager's stat_prefix,
// creating them once. Connection managers with the same prefix share them,
// as in Envoy.
func (s *Store) HTTP(prefix string) *HTTPStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.http[prefix]
	if !ok {
		h = &HTTPStats{Prefix: prefix}
		s.http[prefix] = h
	}
	return h
}

// each calls f with every counter's name (after http.PREFIX.), whether it
// is a gauge, and its value. The class counters are always there, as
// Envoy's are.
func (h *HTTPStats) each(f func(name string, gauge bool, v int64)) {
	var completed uint64
	for class := 1; class <= 5; class++ {
		v := h.classes[class].Load()
		completed += v
		f("downstream_rq_"+string(rune('0'+class))+"xx", false, int64(v))
	}
	f("downstream_rq_completed", false, int64(completed))
	f("downstream_rq_total", false, int64(h.RqTotal.Load()))
	f("downstream_rq_http1_total", false, int64(h.RqHTTP1Total.Load()))
	f("downstream_rq_http2_total", false, int64(h.RqHTTP2Total.Load()))
	f("downstream_rq_active", true, h.RqActive.Load())
	f("downstream_rq_too_large", false, int64(h.RqTooLarge.Load()))
	f("downstream_cx_total", false, int64(h.CxTotal.Load()))
	f("downstream_cx_active", true, h.CxActive.Load())
	f("downstream_cx_destroy", false, int64(h.CxDestroy.Load()))
}
