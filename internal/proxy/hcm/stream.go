package hcm

import (
	"sync/atomic"
	"time"

	"github.com/straitmesh/strait/internal/proxy/forward"
	"github.com/straitmesh/strait/internal/proxy/http1"
	"github.com/straitmesh/strait/internal/proxy/route"
)

// This file is the one place where a stream's timeouts and a connection's
// limits are decided, for every codec: the HTTP/1.1 path (h1.go) keeps
// them as socket deadlines, the HTTP/2 path (h2.go, h2limits.go) as
// timers, but both ask what the deadlines are, which of them passed and
// what the client is then told, and whether the connection must end.
//
// Envoy's names and replies (source/common/http/conn_manager_impl.cc):
//
//	request_timeout          the whole request by then      408 "request timeout"
//	request_headers_timeout  the request head by then       408 "request header timeout"
//	stream_idle_timeout      no activity for that long      408 SI "stream timeout" (a reset once the response started)
//	route idle_timeout       replaces stream_idle_timeout, also when that is 0
//	route timeout            the response by then           504 UT "upstream request timeout" (forward/h1, forward.RoundTrip)
//	max_requests_per_connection   the connection ends after that many (HTTP/1.1: connection: close; HTTP/2: GOAWAY)
//	max_connection_duration       the connection ends after that long (same)
//
// max_stream_duration is refused (buildLimits): no codec bounds a stream's
// total duration apart from the route timeout.

// failRequestHeadersTimeout is the reply to a head not received in time.
var failRequestHeadersTimeout = forward.Failure{Code: 408, Flags: "", Body: "request header timeout"}

// streamClock is one stream's timeouts. Owned by the stream's goroutine.
type streamClock struct {
	request time.Time     // request_timeout: the whole request by then; zero: none
	headers time.Time     // request_headers_timeout: the head by then; zero: none
	idle    time.Duration // stream_idle_timeout, or the route's idle_timeout; 0: none
}

// startStream returns the timeouts of a stream that begins now.
func (l *Limits) startStream() streamClock {
	return streamClock{
		request: http1.Deadline(l.RequestTimeout),
		headers: http1.Deadline(l.RequestHeadersTimeout),
		idle:    l.StreamIdleTimeout,
	}
}

// headDeadline is when the request head must have arrived: the earlier of
// the request and head deadlines (zero: none).
func (s *streamClock) headDeadline() time.Time {
	switch {
	case s.headers.IsZero():
		return s.request
	case s.request.IsZero() || s.headers.Before(s.request):
		return s.headers
	}
	return s.request
}

// routed applies rt's idle_timeout, which replaces the HCM's stream idle
// timeout (also a disabled one); it reports whether the idle timeout
// changed.
func (s *streamClock) routed(rt *route.Route) bool {
	if !rt.HasIdleTimeout || rt.IdleTimeout == s.idle {
		return false
	}
	s.idle = rt.IdleTimeout
	return true
}

// expired says which timeout a read that timed out at now ran into: the
// request's, else (while the head is read) the head's, else the stream
// idle timeout.
func (s *streamClock) expired(now time.Time, readingHead bool) forward.Failure {
	switch {
	case !s.request.IsZero() && !now.Before(s.request):
		return forward.FailRequestTimeout
	case readingHead && !s.headers.IsZero() && !now.Before(s.headers):
		return failRequestHeadersTimeout
	}
	return forward.FailStreamIdle
}

// connLimits is what a connection's limits say about it: how many requests
// it began and when it must end. requests is atomic: HTTP/2 streams begin
// on their own goroutines.
type connLimits struct {
	maxRequests uint32    // max_requests_per_connection; 0: none
	expiry      time.Time // max_connection_duration from the start; zero: none
	requests    atomic.Uint32
}

// init sets the limits of a connection that starts now.
func (c *connLimits) init(l *Limits) {
	c.maxRequests = l.MaxRequestsPerConnection
	c.expiry = time.Time{}
	if d := l.MaxConnectionDuration; d > 0 {
		c.expiry = time.Now().Add(d)
	}
}

// beginRequest counts a request; it reports whether it is the last one
// the connection may carry (the connection ends after it).
func (c *connLimits) beginRequest() (last bool) {
	n := c.requests.Add(1)
	return c.maxRequests > 0 && n == c.maxRequests
}

// served reports whether the connection carried a request.
func (c *connLimits) served() bool { return c.requests.Load() > 0 }

// spent reports whether the connection must end after the request in
// progress: max_requests_per_connection reached or max_connection_duration
// passed at now.
func (c *connLimits) spent(now time.Time) bool {
	if c.maxRequests > 0 && c.requests.Load() >= c.maxRequests {
		return true
	}
	return c.expiredAt(now)
}

// expiredAt reports whether max_connection_duration has passed at now.
func (c *connLimits) expiredAt(now time.Time) bool {
	return !c.expiry.IsZero() && !now.Before(c.expiry)
}

// limits returns the filter's limits, Envoy's defaults for a Filter made
// without Build (tests).
func (f *Filter) limits() *Limits {
	if f.Limits.MaxRequestHeadBytes == 0 {
		l := DefaultLimits()
		return &l
	}
	return &f.Limits
}
