package stats

import "sync/atomic"

// The counters, gauges and gauge functions every cluster registers when
// it is built (its circuit breaker's, its connect timeout, its membership)
// are kept in arrays in ClusterStats instead of maps of pointers: with
// 1,000 clusters in scope and no traffic the maps, their entries and the
// pointed-to values were ~1.1 MiB of the proxy's 11 MiB live heap
// (bench/sidecar, issue #24). Counter, Gauge and SetGaugeFunc hand out a
// slot for these names and a map entry for any other; a slot renders only
// once handed out, as a map entry does.

// stdCounterNames are the counters with a slot, by index.
var stdCounterNames = [...]string{
	"upstream_cx_overflow",
	"upstream_rq_pending_overflow",
	"upstream_rq_retry_overflow",
	"upstream_rq_pending_total",
	"upstream_rq_pending_failure_eject",
	"upstream_cx_destroy",
	"upstream_cx_connect_timeout",
}

// stdGaugeNames are the gauges with a slot, by index.
var stdGaugeNames = [...]string{
	"circuit_breakers.default.cx_open",
	"circuit_breakers.default.rq_pending_open",
	"circuit_breakers.default.rq_open",
	"circuit_breakers.default.rq_retry_open",
	"upstream_rq_active",
	"upstream_rq_pending_active",
	"upstream_cx_active",
	// With track_remaining, which Istio sets on every cluster.
	"circuit_breakers.default.remaining_cx",
	"circuit_breakers.default.remaining_pending",
	"circuit_breakers.default.remaining_rq",
	"circuit_breakers.default.remaining_retries",
}

// stdGaugeFuncNames are the gauge functions with a slot, by index.
var stdGaugeFuncNames = [...]string{
	"membership_total",
	"membership_healthy",
}

// clusterStd is the slots of one cluster; ClusterStats.mu guards the
// used masks and the functions, not the values (atomics).
type clusterStd struct {
	counters                            [len(stdCounterNames)]atomic.Uint64
	gauges                              [len(stdGaugeNames)]atomic.Int64
	funcs                               [len(stdGaugeFuncNames)]func() int64
	countersUsed, gaugesUsed, funcsUsed uint32
}

// slot is the index of name in names, or -1.
func slot(names []string, name string) int {
	for i, n := range names {
		if n == name {
			return i
		}
	}
	return -1
}

// eachCounter calls f with every counter handed out, slots and map
// entries; the caller holds c.mu.
func (c *ClusterStats) eachCounter(f func(name string, v uint64)) {
	for i, n := range stdCounterNames {
		if c.std.countersUsed&(1<<i) != 0 {
			f(n, c.std.counters[i].Load())
		}
	}
	for n, v := range c.counters {
		f(n, v.Load())
	}
}

// eachGauge is eachCounter for gauges and gauge functions.
func (c *ClusterStats) eachGauge(f func(name string, v int64)) {
	for i, n := range stdGaugeFuncNames {
		if c.std.funcsUsed&(1<<i) != 0 {
			f(n, c.std.funcs[i]())
		}
	}
	for n, g := range c.gaugeFuncs {
		f(n, g())
	}
	for i, n := range stdGaugeNames {
		if c.std.gaugesUsed&(1<<i) != 0 {
			f(n, c.std.gauges[i].Load())
		}
	}
	for n, v := range c.gauges {
		f(n, v.Load())
	}
}
