package forward

// This file holds what every codec's retry loop shares: the retry circuit
// breaker's slot, the wait between attempts, the endpoint of a retry and
// the counters of how a retried request ended.

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"time"

	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/router"
)

// RetryBufferLimit is the largest request body buffered so that a request
// can be retried (Envoy's per_request_buffer_limit_bytes default, the
// listener's 1 MiB buffer limit); a larger or unsized body is streamed and
// its request is not retried once sent.
const RetryBufferLimit = 1 << 20

// RetrySlot is a request's hold on its cluster's retry circuit breaker
// (max_retries): a retry is admitted only while the breaker has room, and
// holds its slot until the next retry or the end of the exchange, as
// Envoy counts a retry active until its attempt completes.
type RetrySlot struct {
	cl   *cluster.Cluster
	held bool
}

// Admit releases the previous retry's slot and takes one for the next
// retry; false (counted as upstream_rq_retry_overflow) means no retry.
func (s *RetrySlot) Admit(cl *cluster.Cluster) bool {
	s.Release()
	if !cl.BeginRetry() {
		return false
	}
	s.cl, s.held = cl, true
	return true
}

// Release gives the slot back, if one is held.
func (s *RetrySlot) Release() {
	if s.held {
		s.cl.EndRetry()
		s.held = false
	}
}

// BackOff waits before a retry, and reports false when the route timeout
// (routeExpiry; zero: none) would pass first.
func BackOff(r *router.Retry, routeExpiry time.Time) bool {
	d := r.BackOff()
	if !routeExpiry.IsZero() && time.Now().Add(d).After(routeExpiry) {
		return false
	}
	if d > 0 {
		time.Sleep(d)
	}
	return true
}

// BackOffCtx is BackOff bounded by ctx's deadline.
func BackOffCtx(ctx context.Context, r *router.Retry) bool {
	dl, _ := ctx.Deadline()
	return BackOff(r, dl)
}

// Repick chooses the endpoint of a retry (prev is the last attempt's):
// with the previous_hosts predicate, one not tried yet if one turns up
// within the allowed picks; with the previous_priorities retry priority,
// outside the priority levels it excludes by now.
func Repick(cl *cluster.Cluster, r *router.Retry, dst netip.AddrPort, src cluster.OriginalSource, tried []string, prev cluster.Endpoint) cluster.Endpoint {
	avoid, picks := r.AvoidPreviousHosts()
	if !avoid {
		picks = 1
	}
	excluded := r.ExcludedPriorities(prev.Priority())
	ep := prev
	for i := 0; i < picks; i++ {
		next, err := cl.PickExcluding(dst, excluded)
		if err != nil {
			return prev
		}
		next.Source = src
		next.Downstream = prev.Downstream
		ep = next
		if !avoid || !slices.Contains(tried, next.Address) {
			break
		}
	}
	return ep
}

// CountRetryOutcome counts how a request that may have been retried ended
// (responded: with an upstream response rather than a local reply).
func CountRetryOutcome(cl *cluster.Cluster, r *router.Retry, responded bool) {
	switch {
	case r.LimitExceeded:
		cl.Stats.Router.RetryLimitExceeded.Add(1)
	case responded && r.Retried > 0:
		cl.Stats.Router.RetrySuccess.Add(1)
	}
}

// DeadlinePassed reports whether ctx's deadline has passed. A dial or read
// bounded by that deadline can fail with its own timeout an instant before
// the context's timer marks ctx done, so ctx.Err() alone may not say so yet.
func DeadlinePassed(ctx context.Context) bool {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return true
	}
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}
