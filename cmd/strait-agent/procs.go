package main

import "runtime"

// agentMaxProcs caps the agent's GOMAXPROCS. The agent relays xDS, serves
// SDS, DNS and health, and supervises the proxy: two Ps are plenty, and
// each more costs memory whatever the load (its P's caches, a GC worker
// goroutine and its stack). On a node of many cores without a CPU limit
// the runtime would start one P per core: an idle agent with 1,000
// services in scope was 5.2 MiB RssAnon at GOMAXPROCS 2, 6.1 at 16 and
// 7.7 at 64 (bench/sidecar, bench/README.md, issue #24). An exec'd proxy
// sets its own from --concurrency.
const agentMaxProcs = 2

// capProcs lowers GOMAXPROCS to agentMaxProcs (never raises it: a CPU
// limit of one core stays one P) unless GOMAXPROCS is set in the
// environment, which the runtime has then honoured. It returns the
// value in effect.
func capProcs(getenv func(string) string) int {
	n := runtime.GOMAXPROCS(0)
	if getenv("GOMAXPROCS") != "" || n <= agentMaxProcs {
		return n
	}
	runtime.GOMAXPROCS(agentMaxProcs)
	return agentMaxProcs
}

// inProcessProcs sets GOMAXPROCS for an agent that runs the proxy in its
// own process: the proxy's --concurrency, as strait-proxy sets it for
// itself (Istio's injected 2 is the agent's cap too), unless GOMAXPROCS
// is set in the environment; concurrency 0 (one worker per core) leaves
// the runtime's default, which follows the CPU limit. It returns the
// value in effect.
func inProcessProcs(getenv func(string) string, concurrency int) int {
	if getenv("GOMAXPROCS") != "" || concurrency <= 0 {
		return runtime.GOMAXPROCS(0)
	}
	runtime.GOMAXPROCS(concurrency)
	return concurrency
}
