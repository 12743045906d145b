package hcm

import (
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/proxy/forward"
	"github.com/straitmesh/strait/internal/proxy/route"
)

// TestStreamClock: which timeout a stream ran into, and the reply the
// client gets, as Envoy's connection manager decides it.
func TestStreamClock(t *testing.T) {
	now := time.Now()
	at := func(d time.Duration) time.Time { return now.Add(d) }
	for _, tc := range []struct {
		name        string
		s           streamClock
		readingHead bool
		want        forward.Failure
		head        time.Time
	}{
		{"nothing set: stream idle", streamClock{}, true, forward.FailStreamIdle, time.Time{}},
		{"request passed", streamClock{request: at(-time.Second)}, false, forward.FailRequestTimeout, at(-time.Second)},
		{"request passed while reading the head", streamClock{request: at(-time.Second), headers: at(-2 * time.Second)}, true, forward.FailRequestTimeout, at(-2 * time.Second)},
		{"head passed", streamClock{headers: at(-time.Second), request: at(time.Hour)}, true, failRequestHeadersTimeout, at(-time.Second)},
		{"head deadline after the head", streamClock{headers: at(-time.Second)}, false, forward.FailStreamIdle, at(-time.Second)},
		{"neither passed", streamClock{headers: at(time.Hour), request: at(time.Minute)}, true, forward.FailStreamIdle, at(time.Minute)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.s.expired(now, tc.readingHead); got != tc.want {
				t.Errorf("expired = %+v, want %+v", got, tc.want)
			}
			if got := tc.s.headDeadline(); !got.Equal(tc.head) {
				t.Errorf("headDeadline = %v, want %v", got, tc.head)
			}
		})
	}
	if failRequestHeadersTimeout.Code != 408 || forward.FailRequestTimeout.Code != 408 || forward.FailStreamIdle.Code != 408 || forward.FailStreamIdle.Flags != "SI" {
		t.Error("Envoy answers every request-side timeout 408, stream idle with SI")
	}
}

// TestStreamClockRouted: a route's idle_timeout replaces the HCM's stream
// idle timeout, also a disabled one; a route without one keeps it.
func TestStreamClockRouted(t *testing.T) {
	s := (&Limits{StreamIdleTimeout: 0}).startStream()
	if s.routed(&route.Route{}) || s.idle != 0 {
		t.Fatalf("a route without idle_timeout changed it: %v", s.idle)
	}
	if !s.routed(&route.Route{Action: route.Action{HasIdleTimeout: true, IdleTimeout: time.Second}}) || s.idle != time.Second {
		t.Fatalf("route idle_timeout over a disabled stream idle timeout: %v", s.idle)
	}
	if !s.routed(&route.Route{Action: route.Action{HasIdleTimeout: true}}) || s.idle != 0 {
		t.Fatalf("route idle_timeout 0 disables it: %v", s.idle)
	}
}

// TestConnLimits: max_requests_per_connection counts requests begun, the
// one that reaches it is the last; max_connection_duration ends the
// connection once passed.
func TestConnLimits(t *testing.T) {
	var c connLimits
	c.init(&Limits{MaxRequestsPerConnection: 2, MaxConnectionDuration: time.Hour})
	if c.served() || c.spent(time.Now()) {
		t.Fatal("a new connection is spent")
	}
	if c.beginRequest() || c.spent(time.Now()) || !c.served() {
		t.Fatal("the first of two requests ended the connection")
	}
	if !c.beginRequest() || !c.spent(time.Now()) {
		t.Fatal("the second of two requests is not the last")
	}
	var d connLimits
	d.init(&Limits{MaxConnectionDuration: time.Minute})
	if d.spent(time.Now()) || !d.spent(time.Now().Add(time.Minute)) || !d.expiredAt(time.Now().Add(2*time.Minute)) {
		t.Fatal("max_connection_duration not kept")
	}
	var none connLimits
	none.init(&Limits{})
	for range 1000 {
		if none.beginRequest() {
			t.Fatal("no limit ended the connection")
		}
	}
}
