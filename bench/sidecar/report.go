package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"time"
)

// report prints one Markdown table of medians: a row per build, scope and
// process (one row for a sidecar of one process), then the sidecar's
// totals and its start.
func report(w io.Writer, builds []build, scopes []int, results []result) {
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| build | scope | process | clusters | VmRSS MiB | VmHWM MiB | RssAnon | RssFile | Go heap live MiB | heap objects MiB | stacks MiB | Go total MiB | goroutines | threads | binary MB |")
	fmt.Fprintln(w, "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, scope := range scopes {
		for _, b := range builds {
			rs := resultsOf(results, b.name, scope)
			if len(rs) == 0 {
				continue
			}
			clusters := median(rs, func(r result) float64 { return r.clusters })
			type process struct {
				name string
				get  func(result) processStats
				size int64
			}
			agent := process{"strait-agent", func(r result) processStats { return r.agent }, b.agentSize}
			procs := []process{agent, {"strait-proxy", func(r result) processStats { return r.proxy }, b.proxySize}}
			if oneProcess(rs) {
				agent.name = "strait-agent (proxy in-process)"
				procs = []process{agent}
			}
			for i, p := range procs {
				col := func(f func(processStats) float64) float64 {
					return median(rs, func(r result) float64 { return f(p.get(r)) })
				}
				rt := func(name string, scale float64) string {
					v := col(func(s processStats) float64 {
						if s.runtime == nil {
							return math.NaN()
						}
						return s.runtime[name]
					})
					if math.IsNaN(v) {
						return "-"
					}
					if scale == 1 {
						return fmt.Sprintf("%.0f", v)
					}
					return fmt.Sprintf("%.1f", v/scale)
				}
				cl := "-"
				if i == len(procs)-1 { // the process that runs the proxy
					cl = fmt.Sprintf("%.0f", clusters)
				}
				fmt.Fprintf(w, "| %s | %s | %s | %s | %.1f | %.1f | %.1f | %.1f | %s | %s | %s | %s | %s | %.0f | %.1f |\n",
					b.name, scopeName(scope), p.name, cl,
					col(func(s processStats) float64 { return s.rssKB / 1024 }),
					col(func(s processStats) float64 { return s.hwmKB / 1024 }),
					col(func(s processStats) float64 { return s.anonKB / 1024 }),
					col(func(s processStats) float64 { return s.fileKB / 1024 }),
					rt("/gc/heap/live:bytes", 1<<20), rt("/memory/classes/heap/objects:bytes", 1<<20),
					rt("/memory/classes/heap/stacks:bytes", 1<<20), rt("/memory/classes/total:bytes", 1<<20),
					rt("/sched/goroutines:goroutines", 1), col(func(s processStats) float64 { return s.threads }),
					float64(p.size)/1e6)
			}
		}
	}
	reportClasses(w, builds, scopes, results)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| build | scope | processes | sidecar VmRSS MiB | RssAnon MiB | RssFile MiB | CPU s to idle | exec → proxy exec | exec → ready | exec → ready (each run) |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
	for _, scope := range scopes {
		for _, b := range builds {
			rs := resultsOf(results, b.name, scope)
			if len(rs) == 0 {
				continue
			}
			var each []string
			for _, r := range rs {
				each = append(each, r.ready.Round(time.Millisecond).String())
			}
			procs, proxyExec := 2, time.Duration(median(rs, func(r result) float64 { return float64(r.proxyExec) })).Round(time.Millisecond).String()
			if oneProcess(rs) {
				procs, proxyExec = 1, "-"
			}
			sum := func(f func(processStats) float64) float64 {
				return median(rs, func(r result) float64 { return (f(r.agent) + f(r.proxy)) / 1024 })
			}
			fmt.Fprintf(w, "| %s | %s | %d | %.1f | %.1f | %.1f | %.2f | %s | %s | %v |\n", b.name, scopeName(scope), procs,
				sum(func(s processStats) float64 { return s.rssKB }),
				sum(func(s processStats) float64 { return s.anonKB }),
				sum(func(s processStats) float64 { return s.fileKB }),
				sum(func(s processStats) float64 { return s.cpuSec * 1024 }), // sum divides by 1024
				proxyExec,
				time.Duration(median(rs, func(r result) float64 { return float64(r.ready) })).Round(time.Millisecond),
				each)
		}
	}
}

// memoryClasses are the Go runtime's memory classes (runtime/metrics)
// that are resident, or may be: where a process's RssAnon goes.
var memoryClasses = []struct{ title, metric string }{
	{"heap objects", "/memory/classes/heap/objects:bytes"},
	{"heap unused", "/memory/classes/heap/unused:bytes"},
	{"heap free", "/memory/classes/heap/free:bytes"},
	{"stacks", "/memory/classes/heap/stacks:bytes"},
	{"metadata other", "/memory/classes/metadata/other:bytes"},
	{"mspans", "/memory/classes/metadata/mspan/inuse:bytes"},
	{"profiling", "/memory/classes/profiling/buckets:bytes"},
	{"other", "/memory/classes/other:bytes"},
}

// reportClasses prints the medians of the Go memory classes per process
// (MiB), for the processes with a debug server (none with -debug=false:
// no table).
func reportClasses(w io.Writer, builds []build, scopes []int, results []result) {
	if !slices.ContainsFunc(results, func(r result) bool { return r.agent.runtime != nil || r.proxy.runtime != nil }) {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprint(w, "| build | scope | process |")
	for _, c := range memoryClasses {
		fmt.Fprintf(w, " %s |", c.title)
	}
	fmt.Fprint(w, "\n|---|---|---|")
	for range memoryClasses {
		fmt.Fprint(w, "---:|")
	}
	fmt.Fprintln(w)
	for _, scope := range scopes {
		for _, b := range builds {
			rs := resultsOf(results, b.name, scope)
			if len(rs) == 0 {
				continue
			}
			procs := []struct {
				name string
				get  func(result) processStats
			}{{"strait-agent", func(r result) processStats { return r.agent }}, {"strait-proxy", func(r result) processStats { return r.proxy }}}
			if oneProcess(rs) {
				procs = procs[:1]
			}
			for _, p := range procs {
				if p.get(rs[0]).runtime == nil {
					continue
				}
				fmt.Fprintf(w, "| %s | %s | %s |", b.name, scopeName(scope), p.name)
				for _, c := range memoryClasses {
					fmt.Fprintf(w, " %.1f |", median(rs, func(r result) float64 { return p.get(r).runtime[c.metric] })/(1<<20))
				}
				fmt.Fprintln(w)
			}
		}
	}
}

// resultsOf are one build's results in one scope.
func resultsOf(results []result, build string, scope int) []result {
	var rs []result
	for _, r := range results {
		if r.build == build && r.scope == scope {
			rs = append(rs, r)
		}
	}
	return rs
}

// oneProcess: every start of rs ran the proxy in the agent's process.
func oneProcess(rs []result) bool {
	for _, r := range rs {
		if !r.oneProcess {
			return false
		}
	}
	return len(rs) > 0
}

func median(rs []result, f func(result) float64) float64 {
	vs := make([]float64, 0, len(rs))
	for _, r := range rs {
		vs = append(vs, f(r))
	}
	slices.Sort(vs)
	if len(vs) == 0 {
		return math.NaN()
	}
	if len(vs)%2 == 1 {
		return vs[len(vs)/2]
	}
	return (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
}
