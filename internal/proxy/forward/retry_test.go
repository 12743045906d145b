package forward

import (
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/straitmesh/strait/internal/proxy/router"
)

// TestRetryBackOff: BackOff refuses a wait the route timeout would cut
// short, and waits otherwise (no route timeout: always).
func TestRetryBackOff(t *testing.T) {
	p := rtRetryPolicy("5xx", 3)
	p.RetryBackOff = &routev3.RetryPolicy_RetryBackOff{BaseInterval: durationpb.New(time.Hour), MaxInterval: durationpb.New(time.Hour)}
	slow := rtRoute(t, &routev3.RouteAction{RetryPolicy: p}, false)
	fast := rtRoute(t, &routev3.RouteAction{RetryPolicy: rtRetryPolicy("5xx", 3)}, false)
	cases := []struct {
		name   string
		policy *router.RetryPolicy
		expiry time.Time
		want   bool
	}{
		{"no route timeout", fast.Retry, time.Time{}, true},
		{"far expiry", fast.Retry, time.Now().Add(time.Hour), true},
		{"expiry before the wait", slow.Retry, time.Now().Add(time.Second), false},
		{"expired", fast.Retry, time.Now().Add(-time.Second), false},
	}
	for _, tc := range cases {
		r, _ := router.NewRetry(tc.policy, nil, 0)
		if got := BackOff(&r, tc.expiry); got != tc.want {
			t.Errorf("%s: BackOff %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestRetryCountOutcome: upstream_rq_retry_success counts a retried
// request that got a response; upstream_rq_retry_limit_exceeded one whose
// retries ran out, whatever its end.
func TestRetryCountOutcome(t *testing.T) {
	cases := []struct {
		name             string
		retried          int
		limit, responded bool
		success, limited uint64
	}{
		{"first attempt answered", 0, false, true, 0, 0},
		{"retry answered", 1, false, true, 1, 0},
		{"retry failed locally", 1, false, false, 0, 0},
		{"limit exceeded, answered", 2, true, true, 0, 1},
		{"limit exceeded, failed", 2, true, false, 0, 1},
	}
	for _, tc := range cases {
		cl := rtCluster(t, nil, "127.0.0.1:1")
		r := router.Retry{Retried: tc.retried, LimitExceeded: tc.limit}
		CountRetryOutcome(cl, &r, tc.responded)
		if s, l := cl.Stats.Router.RetrySuccess.Load(), cl.Stats.Router.RetryLimitExceeded.Load(); s != tc.success || l != tc.limited {
			t.Errorf("%s: success %d limit %d, want %d %d", tc.name, s, l, tc.success, tc.limited)
		}
	}
}

// TestRetryBackOffWaits: BackOff sleeps its jittered wait. Ten waits
// drawn uniformly below 20 ms add up to well over 1 ms (all ten under
// 0.1 ms: odds of 1 in 10^23); only that lower bound is checked.
func TestRetryBackOffWaits(t *testing.T) {
	p := rtRetryPolicy("5xx", 10)
	p.RetryBackOff = &routev3.RetryPolicy_RetryBackOff{BaseInterval: durationpb.New(20 * time.Millisecond), MaxInterval: durationpb.New(20 * time.Millisecond)}
	rt := rtRoute(t, &routev3.RouteAction{RetryPolicy: p}, false)
	r, _ := router.NewRetry(rt.Retry, nil, 0)
	start := time.Now()
	for range 10 {
		if !BackOff(&r, time.Time{}) {
			t.Fatal("BackOff refused a wait without a route timeout")
		}
	}
	if d := time.Since(start); d < time.Millisecond {
		t.Errorf("ten back-offs took %v: BackOff did not sleep", d)
	}
}
