package stats

import "sync/atomic"

// RouterStats are a cluster's router counters, with Envoy's names
// (upstream_rq_retry and the rest, cluster.NAME. prefixed).
type RouterStats struct {
	// Retry counts retries sent; RetrySuccess the requests that ended in
	// a response not to be retried after at least one retry;
	// RetryLimitExceeded those whose last outcome was retriable with no
	// retry left (response flag URX).
	Retry, RetrySuccess, RetryLimitExceeded atomic.Uint64
	// Timeout counts route timeouts (504 UT); PerTryTimeout the attempts
	// that reached the per-try timeout.
	Timeout, PerTryTimeout atomic.Uint64
}

// each calls f with every counter's Envoy name and value.
func (r *RouterStats) each(f func(name string, v uint64)) {
	f("upstream_rq_retry", r.Retry.Load())
	f("upstream_rq_retry_success", r.RetrySuccess.Load())
	f("upstream_rq_retry_limit_exceeded", r.RetryLimitExceeded.Load())
	f("upstream_rq_timeout", r.Timeout.Load())
	f("upstream_rq_per_try_timeout", r.PerTryTimeout.Load())
}
