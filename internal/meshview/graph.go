package meshview

import (
	"math"
	"slices"
	"time"
)

// ProxyScrape is one scrape of one proxy.
type ProxyScrape struct {
	At time.Time
	// Edges holds the proxy's istio_* counters by reported edge.
	Edges map[reportedEdge]*Counters
}

// Edge is one edge of the graph over the window.
type Edge struct {
	EdgeKey
	// Reporter is the side whose metrics the figures come from:
	// "destination" when the destination's proxy reported the edge (it
	// sees every request that reached it, retries included, as Kiali
	// prefers), else "source".
	Reporter string
	// Requests and ServerErrors are the increases over the window.
	Requests, ServerErrors float64
	// Window is the longest interval over which a reporting proxy's
	// counters were compared.
	Window time.Duration
	// Rate is requests per second (the sum of each reporting proxy's
	// increase over its own interval).
	Rate float64
	// TCPBytes and TCPConnections are the bytes sent and received and the
	// connections opened over the window (istio_tcp_*); ByteRate and
	// ConnectionRate are their rates, summed as Rate is.
	TCPBytes, TCPConnections float64
	ByteRate, ConnectionRate float64
	// P99 is the 99th percentile of istio_request_duration_milliseconds,
	// NaN without observations.
	P99 float64
	// Services are the destination services the requests were sent to.
	Services []string
}

// SuccessRate is the share of responses that are not 5xx, the success rate
// of Istio's service dashboard; NaN with no request.
func (e Edge) SuccessRate() float64 {
	if e.Requests == 0 {
		return math.NaN()
	}
	return 1 - e.ServerErrors/e.Requests
}

// Graph is what the page draws.
type Graph struct {
	Nodes []Workload
	Edges []Edge
}

// Build computes the graph from each proxy's scrapes in the window,
// oldest first: each proxy's newest scrape is compared with its oldest.
// A proxy with a single scrape adds no edge yet. An edge reported by a
// destination proxy takes its figures from the destination reports only;
// an edge only a source reports (the destination has no sidecar) takes
// the source's, as Kiali's graph does.
func Build(scrapes map[string][]ProxyScrape) Graph {
	type sum struct {
		c                        Counters
		rate, byteRate, connRate float64
		window                   time.Duration
	}
	byReporter := map[reportedEdge]*sum{}
	for _, list := range scrapes {
		if len(list) < 2 {
			continue
		}
		oldest, newest := list[0], list[len(list)-1]
		dt := newest.At.Sub(oldest.At)
		if dt <= 0 {
			continue
		}
		for k, c := range newest.Edges {
			d := delta(oldest.Edges[k], c)
			s := byReporter[k]
			if s == nil {
				s = &sum{}
				byReporter[k] = s
			}
			s.c.add(d)
			s.rate += d.Requests / dt.Seconds()
			s.byteRate += d.TCPBytes / dt.Seconds()
			s.connRate += d.TCPConnections / dt.Seconds()
			s.window = max(s.window, dt)
		}
	}
	edges := map[EdgeKey]Edge{}
	for k, s := range byReporter {
		if prev, ok := edges[k.EdgeKey]; ok && prev.Reporter == "destination" {
			continue
		}
		if k.Reporter != "destination" && k.Reporter != "source" {
			continue
		}
		if k.Reporter == "source" {
			if _, ok := byReporter[reportedEdge{EdgeKey: k.EdgeKey, Reporter: "destination"}]; ok {
				continue
			}
		}
		services := s.c.Services
		if src, ok := byReporter[reportedEdge{EdgeKey: k.EdgeKey, Reporter: "source"}]; ok && k.Reporter == "destination" {
			// The client's proxy names the service it addressed; the
			// server's may not know it.
			merged := append(slices.Clone(services), src.c.Services...)
			slices.Sort(merged)
			services = slices.Compact(merged)
		}
		edges[k.EdgeKey] = Edge{
			EdgeKey: k.EdgeKey, Reporter: k.Reporter,
			Requests: s.c.Requests, ServerErrors: s.c.ServerErrors,
			Window: s.window, Rate: s.rate, P99: Quantile(0.99, s.c.Buckets), Services: services,
			TCPBytes: s.c.TCPBytes, TCPConnections: s.c.TCPConnections, ByteRate: s.byteRate, ConnectionRate: s.connRate,
		}
	}
	var g Graph
	nodes := map[Workload]bool{}
	for _, e := range edges {
		g.Edges = append(g.Edges, e)
		nodes[e.Source], nodes[e.Destination] = true, true
	}
	for n := range nodes {
		g.Nodes = append(g.Nodes, n)
	}
	slices.SortFunc(g.Nodes, compareWorkloads)
	slices.SortFunc(g.Edges, func(a, b Edge) int {
		if c := compareWorkloads(a.Source, b.Source); c != 0 {
			return c
		}
		return compareWorkloads(a.Destination, b.Destination)
	})
	return g
}
