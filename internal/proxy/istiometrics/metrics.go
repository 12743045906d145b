package istiometrics

import (
	"fmt"

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
)

// HTTP are the request metrics of one store.
type HTTP struct {
	Requests, Duration, RequestBytes, ResponseBytes *stats.Vec
}

// NewHTTP finds or creates the request metrics in store.
func NewHTTP(store *stats.Store) (*HTTP, error) {
	var m HTTP
	var err error
	if m.Requests, err = store.CounterVec(RequestsTotal, HTTPLabels); err != nil {
		return nil, fmt.Errorf("istio metrics: %w", err)
	}
	for _, h := range []struct {
		v    **stats.Vec
		name string
	}{{&m.Duration, RequestDuration}, {&m.RequestBytes, RequestBytes}, {&m.ResponseBytes, ResponseBytes}} {
		if *h.v, err = store.HistogramVec(h.name, HTTPLabels, stats.DefaultBuckets); err != nil {
			return nil, fmt.Errorf("istio metrics: %w", err)
		}
	}
	return &m, nil
}

// Record counts one request with the label values of AppendHTTP, its
// duration in milliseconds and its request and response sizes in bytes.
func (m *HTTP) Record(values []string, durationMS float64, reqBytes, respBytes int64) {
	var stack [1024]byte
	key := stats.AppendKey(stack[:0], values)
	m.Requests.WithKey(key, values).Add(1)
	m.Duration.WithKey(key, values).Observe(durationMS, m.Duration.Buckets())
	m.RequestBytes.WithKey(key, values).Observe(float64(reqBytes), m.RequestBytes.Buckets())
	m.ResponseBytes.WithKey(key, values).Observe(float64(respBytes), m.ResponseBytes.Buckets())
}

// TCP are the connection metrics of one store.
type TCP struct {
	Sent, Received, Opened, Closed *stats.Vec
}

// NewTCP finds or creates the connection metrics in store.
func NewTCP(store *stats.Store) (*TCP, error) {
	var m TCP
	for _, c := range []struct {
		v    **stats.Vec
		name string
	}{{&m.Sent, TCPSentBytes}, {&m.Received, TCPReceivedBytes}, {&m.Opened, TCPConnectionsOpen}, {&m.Closed, TCPConnectionsDone}} {
		var err error
		if *c.v, err = store.CounterVec(c.name, TCPLabels); err != nil {
			return nil, fmt.Errorf("istio metrics: %w", err)
		}
	}
	return &m, nil
}
