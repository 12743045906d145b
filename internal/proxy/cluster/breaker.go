package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/straitmesh/strait/internal/proxy/stats"

	"github.com/straitmesh/strait/internal/proxy/fieldaudit"
)

// Envoy's circuit breaker defaults (circuit_breaker.proto).
const (
	defaultMaxConnections = 1024
	defaultMaxPending     = 1024
	defaultMaxRequests    = 1024
	defaultMaxRetries     = 3
)

// ErrOverflow is returned when a circuit breaker is open: the caller
// answers 503 with the response flag UO and x-envoy-overloaded: true.
var ErrOverflow = errors.New("upstream overflow (circuit breaker open)")

// breaker is a cluster's circuit breakers (the DEFAULT priority's
// thresholds): limits on upstream connections, requests waiting for a
// connection, requests in flight and retries in flight.
type breaker struct {
	// Set at creation, read-only.
	maxConns, maxPending, maxRequests, maxRetries int64
	budget                                        *retryBudget // replaces maxRetries when set
	st                                            breakerStats

	conns, pending, requests, retries atomic.Int64

	mu sync.Mutex // guards wake
	// wake is closed (and dropped) when a connection frees; made by the
	// first request that waits, not with the breaker: most clusters of a
	// large configuration never have a request waiting.
	wake chan struct{}
}

// retryBudget is Envoy's circuit_breakers retry_budget: concurrent
// retries are bounded by max(minConcurrency, percent % of the active and
// pending requests) instead of max_retries (ResourceManagerImpl's
// RetryBudgetImpl::max).
type retryBudget struct {
	percent        float64
	minConcurrency int64
}

// Envoy's retry budget defaults (circuit_breaker.proto).
const (
	defaultBudgetPercent       = 20
	defaultMinRetryConcurrency = 3
)

// breakerStats are Envoy's overflow counters and circuit_breakers gauges.
type breakerStats struct {
	cxOverflow, pendingOverflow, retryOverflow *atomic.Uint64
	cxOpen, pendingOpen, rqOpen, retryOpen     *atomic.Int64
	// Envoy's upstream traffic stats kept with the breaker's counts:
	// requests in flight, requests waiting for a connection (those that
	// found no idle one: they wait for a dial or a free slot), requests
	// failed by their connection's failure, connections open and closed.
	rqActive, pendingActive, cxActive          *atomic.Int64
	pendingTotal, pendingFailureEject, cxClose *atomic.Uint64
	// remaining_* gauges, only with track_remaining.
	cxRemaining, pendingRemaining, rqRemaining, retryRemaining *atomic.Int64
}

// parseBreaker reads circuit_breakers. Only the DEFAULT priority is
// implemented (strait routes have no priority), so HIGH thresholds and
// per-host thresholds are refused, as is a retry budget's budget_interval.
func parseBreaker(c *clusterv3.Cluster, st *stats.ClusterStats) (*breaker, error) {
	b := &breaker{maxConns: defaultMaxConnections, maxPending: defaultMaxPending,
		maxRequests: defaultMaxRequests, maxRetries: defaultMaxRetries}
	cb := c.GetCircuitBreakers()
	if err := fieldaudit.Only("circuit_breakers", cb.ProtoReflect(), circuitBreakersFields); err != nil {
		return nil, err
	}
	track := false
	for i, t := range cb.GetThresholds() {
		field := fmt.Sprintf("circuit_breakers.thresholds[%d]", i)
		if t.GetPriority() != corev3.RoutingPriority_DEFAULT {
			return nil, fmt.Errorf("%s.priority %s is not supported (only DEFAULT)", field, t.GetPriority())
		}
		if i > 0 {
			return nil, fmt.Errorf("%s: a second DEFAULT threshold is not allowed", field)
		}
		if err := fieldaudit.Only(field, t.ProtoReflect(), thresholdsFields); err != nil {
			return nil, err
		}
		if rb := t.GetRetryBudget(); rb != nil {
			budget, err := parseRetryBudget(field+".retry_budget", rb)
			if err != nil {
				return nil, err
			}
			b.budget = budget
		}
		set := func(dst *int64, v interface{ GetValue() uint32 }, isNil bool) {
			if !isNil {
				*dst = int64(v.GetValue())
			}
		}
		set(&b.maxConns, t.GetMaxConnections(), t.GetMaxConnections() == nil)
		set(&b.maxPending, t.GetMaxPendingRequests(), t.GetMaxPendingRequests() == nil)
		set(&b.maxRequests, t.GetMaxRequests(), t.GetMaxRequests() == nil)
		set(&b.maxRetries, t.GetMaxRetries(), t.GetMaxRetries() == nil)
		track = t.GetTrackRemaining()
	}
	const cbp = "circuit_breakers.default."
	b.st = breakerStats{
		cxOverflow:      st.Counter("upstream_cx_overflow"),
		pendingOverflow: st.Counter("upstream_rq_pending_overflow"),
		retryOverflow:   st.Counter("upstream_rq_retry_overflow"),
		cxOpen:          st.Gauge(cbp + "cx_open"),
		pendingOpen:     st.Gauge(cbp + "rq_pending_open"),
		rqOpen:          st.Gauge(cbp + "rq_open"),
		retryOpen:       st.Gauge(cbp + "rq_retry_open"),

		rqActive:            st.Gauge("upstream_rq_active"),
		pendingActive:       st.Gauge("upstream_rq_pending_active"),
		cxActive:            st.Gauge("upstream_cx_active"),
		pendingTotal:        st.Counter("upstream_rq_pending_total"),
		pendingFailureEject: st.Counter("upstream_rq_pending_failure_eject"),
		cxClose:             st.Counter("upstream_cx_destroy"),
	}
	if track {
		b.st.cxRemaining = st.Gauge(cbp + "remaining_cx")
		b.st.pendingRemaining = st.Gauge(cbp + "remaining_pending")
		b.st.rqRemaining = st.Gauge(cbp + "remaining_rq")
		b.st.cxRemaining.Store(b.maxConns)
		b.st.pendingRemaining.Store(b.maxPending)
		b.st.rqRemaining.Store(b.maxRequests)
		// With a retry budget the limit moves with the traffic; Envoy
		// then leaves remaining_retries at 0 (clearRemainingGauge).
		b.st.retryRemaining = st.Gauge(cbp + "remaining_retries")
		if b.budget == nil {
			b.st.retryRemaining.Store(b.maxRetries)
		} else {
			b.st.retryRemaining.Store(0)
			b.st.retryRemaining = nil
		}
	}
	return b, nil
}

// parseRetryBudget reads a threshold's retry_budget at field, with
// Envoy's defaults for the parts left out.
func parseRetryBudget(field string, rb *clusterv3.CircuitBreakers_Thresholds_RetryBudget) (*retryBudget, error) {
	// budget_interval (requests counted for a while after they end) is
	// not implemented.
	if err := fieldaudit.Only(field, rb.ProtoReflect(), retryBudgetFields); err != nil {
		return nil, err
	}
	budget := &retryBudget{percent: defaultBudgetPercent, minConcurrency: defaultMinRetryConcurrency}
	if p := rb.GetBudgetPercent(); p != nil {
		if v := p.GetValue(); v < 0 || v > 100 {
			return nil, fmt.Errorf("%s.budget_percent %v is out of range (0 to 100)", field, v)
		}
		budget.percent = p.GetValue()
	}
	if m := rb.GetMinRetryConcurrency(); m != nil {
		budget.minConcurrency = int64(m.GetValue())
	}
	return budget, nil
}

// retryLimit is the number of retries that may be active now: max_retries,
// or what the retry budget allows for the requests active and pending.
func (b *breaker) retryLimit() int64 {
	if b.budget == nil {
		return b.maxRetries
	}
	active := b.requests.Load() + b.pending.Load()
	return max(int64(b.budget.percent/100*float64(active)), b.budget.minConcurrency)
}

// acquire takes one unit of n under limit max and publishes the gauges.
func acquire(n *atomic.Int64, limit int64, open, remaining *atomic.Int64) bool {
	v := n.Add(1)
	if v > limit {
		n.Add(-1)
		return false
	}
	publish(v, limit, open, remaining)
	return true
}

func release(n *atomic.Int64, limit int64, open, remaining *atomic.Int64) {
	publish(n.Add(-1), limit, open, remaining)
}

func publish(v, limit int64, open, remaining *atomic.Int64) {
	if v >= limit {
		open.Store(1)
	} else {
		open.Store(0)
	}
	if remaining != nil {
		remaining.Store(max(limit-v, 0))
	}
}

// tryConn takes a max_connections slot for a connection about to be
// dialed; the connection counts as active (upstream_cx_active) from now
// until releaseConn, as Envoy counts a connecting client.
func (b *breaker) tryConn() bool {
	if !acquire(&b.conns, b.maxConns, b.st.cxOpen, b.st.cxRemaining) {
		return false
	}
	b.st.cxActive.Add(1)
	return true
}

// releaseConn gives back a connection slot and wakes the requests waiting
// for one.
func (b *breaker) releaseConn() {
	release(&b.conns, b.maxConns, b.st.cxOpen, b.st.cxRemaining)
	b.st.cxActive.Add(-1)
	b.st.cxClose.Add(1)
	b.signal()
}

// signal wakes the requests waiting for a connection (one freed, or an
// idle one went back to the pool).
func (b *breaker) signal() {
	if b.pending.Load() == 0 {
		return
	}
	b.mu.Lock()
	if b.wake != nil {
		close(b.wake)
		b.wake = nil
	}
	b.mu.Unlock()
}

func (b *breaker) waitCh() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.wake == nil {
		b.wake = make(chan struct{})
	}
	return b.wake
}

// BeginRetry admits one retry (max_retries, or the retry budget). It
// returns false, counting
// upstream_rq_retry_overflow, when the retry circuit breaker is open; else
// the caller calls EndRetry when the retry is done.
func (c *Cluster) BeginRetry() bool {
	b := c.breaker
	if !acquire(&b.retries, b.retryLimit(), b.st.retryOpen, b.st.retryRemaining) {
		b.st.retryOverflow.Add(1)
		return false
	}
	return true
}

// EndRetry ends a retry admitted by BeginRetry.
func (c *Cluster) EndRetry() {
	b := c.breaker
	release(&b.retries, b.retryLimit(), b.st.retryOpen, b.st.retryRemaining)
}

// pendingStart counts a request that found no idle connection and waits
// for one to be dialed or freed (upstream_rq_pending_total and _active);
// pendingEnd ends that wait, failed by the connection (a connect failure:
// upstream_rq_pending_failure_eject) or not.
func (b *breaker) pendingStart() {
	b.st.pendingTotal.Add(1)
	b.st.pendingActive.Add(1)
}

func (b *breaker) pendingEnd(connFailed bool) {
	b.st.pendingActive.Add(-1)
	if connFailed {
		b.st.pendingFailureEject.Add(1)
	}
}

// waitForConn is called by a request that found no idle connection and no
// free connection slot: it becomes pending (max_pending_requests, else
// ErrOverflow) until a connection may be free or ctx ends. A nil error
// means: look for an idle connection or a slot again.
// counted says the request is already counted as pending (a second
// wait); else it is counted here once admitted.
func (c *Cluster) waitForConn(ctx context.Context, counted bool) error {
	b := c.breaker
	b.st.cxOverflow.Add(1)
	if !acquire(&b.pending, b.maxPending, b.st.pendingOpen, b.st.pendingRemaining) {
		b.st.pendingOverflow.Add(1)
		return ErrOverflow
	}
	if !counted {
		b.pendingStart()
	}
	defer release(&b.pending, b.maxPending, b.st.pendingOpen, b.st.pendingRemaining)
	// Pending is counted before the channel is read and the state looked
	// at again, so a connection freed at any point is seen: either here,
	// or by signal, which then closes this channel.
	ch := b.waitCh()
	if b.conns.Load() < b.maxConns {
		return nil
	}
	// An idle connection (to another endpoint or source) holds a slot
	// nobody is about to use: close it so that this request can dial.
	if c.h1.closeOneIdle() {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		if !counted {
			b.pendingEnd(false) // the caller counts only what it started
		}
		return fmt.Errorf("cluster %s: waiting for a connection: %w", c.Name, ctx.Err())
	}
}

// AcquireConnection takes a max_connections slot for a connection the
// caller opens and owns (tcp_proxy); false, counting upstream_cx_overflow,
// when none is free. Give it back with ReleaseConnection.
func (c *Cluster) AcquireConnection() bool {
	if !c.breaker.tryConn() {
		c.breaker.st.cxOverflow.Add(1)
		return false
	}
	return true
}

// ReleaseConnection gives back a slot taken by AcquireConnection.
func (c *Cluster) ReleaseConnection() { c.breaker.releaseConn() }
