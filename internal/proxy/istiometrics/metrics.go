package istiometrics

import (
	"fmt"
	"slices"

	"github.com/straitmesh/strait/internal/proxy/stats"
)

// The metric names (Istio's stat_prefix "istio_" included).
const (
	RequestsTotal      = "istio_requests_total"
	RequestDuration    = "istio_request_duration_milliseconds"
	RequestBytes       = "istio_request_bytes"
	ResponseBytes      = "istio_response_bytes"
	TCPSentBytes       = "istio_tcp_sent_bytes_total"
	TCPReceivedBytes   = "istio_tcp_received_bytes_total"
	TCPConnectionsOpen = "istio_tcp_connections_opened_total"
	TCPConnectionsDone = "istio_tcp_connections_closed_total"
	// Istio's gRPC message counts, which strait-proxy does not record:
	// dropping them is accepted and changes nothing.
	RequestMessages  = "istio_request_messages_total"
	ResponseMessages = "istio_response_messages_total"
)

// Known reports whether name is one of Istio's standard metrics.
func Known(name string) bool {
	switch name {
	case RequestsTotal, RequestDuration, RequestBytes, ResponseBytes, TCPSentBytes, TCPReceivedBytes,
		TCPConnectionsOpen, TCPConnectionsDone, RequestMessages, ResponseMessages:
		return true
	}
	return false
}

// HTTP are the request metrics of one store. A dropped metric's Vec is
// nil: it is neither created nor recorded.
type HTTP struct {
	Requests, Duration, RequestBytes, ResponseBytes *stats.Vec
}

// NewHTTP finds or creates the request metrics in store, but for the
// dropped ones (full names), which the Telemetry API disabled.
func NewHTTP(store *stats.Store, dropped ...string) (*HTTP, error) {
	var m HTTP
	var err error
	if !slices.Contains(dropped, RequestsTotal) {
		if m.Requests, err = store.CounterVec(RequestsTotal, HTTPLabels); err != nil {
			return nil, fmt.Errorf("istio metrics: %w", err)
		}
	}
	for _, h := range []struct {
		v    **stats.Vec
		name string
	}{{&m.Duration, RequestDuration}, {&m.RequestBytes, RequestBytes}, {&m.ResponseBytes, ResponseBytes}} {
		if slices.Contains(dropped, h.name) {
			continue
		}
		if *h.v, err = store.HistogramVec(h.name, HTTPLabels, stats.DefaultBuckets); err != nil {
			return nil, fmt.Errorf("istio metrics: %w", err)
		}
	}
	return &m, nil
}

// Record counts one request with the label values of AppendHTTP, its
// duration in milliseconds and its request and response sizes in bytes.
func (m *HTTP) Record(values []string, durationMS float64, reqBytes, respBytes int64) {
	s, _ := m.Series(values)
	s.Record(durationMS, reqBytes, respBytes)
}

// HTTPSeries are the series of one set of label values in the four
// request metrics (nil for a dropped metric, or one the store's series
// cap left out), found once so that a caller that knows the values
// again (istio.stats' per-filter cache) records without building them.
type HTTPSeries struct {
	requests, duration, reqBytes, respBytes *stats.Series
	// bounds are the three histograms' bucket bounds (NewHTTP makes
	// them all with stats.DefaultBuckets, which a store keeps as one
	// array), held here so that recording reads no Vec.
	bounds []float64
}

// Series finds or creates the series of values (AppendHTTP's) in each
// metric kept. complete is false when the store's cap left one out: a
// set that is not complete must not be kept, so that every request
// after it is tried (and counted in stats.series_overflow) again.
func (m *HTTP) Series(values []string) (s HTTPSeries, complete bool) {
	var stack [1024]byte
	key := stats.AppendKey(stack[:0], values)
	with := func(v *stats.Vec) *stats.Series {
		if v == nil {
			return nil
		}
		sr := v.WithKey(key, values)
		complete = complete && sr != nil
		if v.Buckets() != nil {
			s.bounds = v.Buckets()
		}
		return sr
	}
	complete = true
	s.requests, s.duration = with(m.Requests), with(m.Duration)
	s.reqBytes, s.respBytes = with(m.RequestBytes), with(m.ResponseBytes)
	return s, complete
}

// Record counts one request in the series: its duration in
// milliseconds and its request and response sizes in bytes.
func (s *HTTPSeries) Record(durationMS float64, reqBytes, respBytes int64) {
	s.requests.Add(1) // a nil Series ignores Add and Observe
	if ms := int64(durationMS); float64(ms) == durationMS {
		s.duration.ObserveInt(ms, s.bounds) // whole milliseconds, as istio.stats records
	} else {
		s.duration.Observe(durationMS, s.bounds)
	}
	s.reqBytes.ObserveInt(reqBytes, s.bounds)
	s.respBytes.ObserveInt(respBytes, s.bounds)
}

// TCP are the connection metrics of one store; a dropped one is nil.
type TCP struct {
	Sent, Received, Opened, Closed *stats.Vec
}

// NewTCP finds or creates the connection metrics in store, but for the
// dropped ones (full names).
func NewTCP(store *stats.Store, dropped ...string) (*TCP, error) {
	var m TCP
	for _, c := range []struct {
		v    **stats.Vec
		name string
	}{{&m.Sent, TCPSentBytes}, {&m.Received, TCPReceivedBytes}, {&m.Opened, TCPConnectionsOpen}, {&m.Closed, TCPConnectionsDone}} {
		if slices.Contains(dropped, c.name) {
			continue
		}
		var err error
		if *c.v, err = store.CounterVec(c.name, TCPLabels); err != nil {
			return nil, fmt.Errorf("istio metrics: %w", err)
		}
	}
	return &m, nil
}
