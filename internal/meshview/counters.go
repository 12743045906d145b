package meshview

import (
	"math"
	"slices"
	"strconv"
	"strings"
)

// The metrics the page reads: Istio's standard HTTP/gRPC request count and
// duration histogram (https://istio.io/latest/docs/reference/config/metrics/).
const (
	requestsTotal      = "istio_requests_total"
	durationBuckets    = "istio_request_duration_milliseconds_bucket"
	tcpSentBytes       = "istio_tcp_sent_bytes_total"
	tcpReceivedBytes   = "istio_tcp_received_bytes_total"
	tcpConnectionsOpen = "istio_tcp_connections_opened_total"
)

// wantedMetric is the filter ParseText applies to a scrape.
func wantedMetric(name string) bool {
	switch name {
	case requestsTotal, durationBuckets, tcpSentBytes, tcpReceivedBytes, tcpConnectionsOpen:
		return true
	}
	return false
}

// Workload is a node of the graph: a workload in its namespace, as the
// istio_* labels name it ("unknown" for a peer outside the mesh).
type Workload struct {
	Namespace string
	Name      string
}

// String is NAMESPACE/NAME, or NAME alone for "unknown".
func (w Workload) String() string {
	if w.Namespace == "" || w.Namespace == "unknown" {
		return w.Name
	}
	return w.Namespace + "/" + w.Name
}

func compareWorkloads(a, b Workload) int {
	if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

// EdgeKey is one direction of traffic between two workloads.
type EdgeKey struct {
	Source, Destination Workload
}

// reportedEdge is an edge as one side's proxy reports it.
type reportedEdge struct {
	EdgeKey
	// Reporter is the istio "reporter" label: "source" or "destination".
	Reporter string
}

// Counters are the summed counters of one reported edge in one scrape
// (or, after delta, their increase over an interval).
type Counters struct {
	// Requests and ServerErrors (5xx responses) come from
	// istio_requests_total summed over its other labels.
	Requests, ServerErrors float64
	// Buckets is istio_request_duration_milliseconds_bucket summed over
	// its other labels: cumulative count by upper bound (le, +Inf included).
	Buckets map[float64]float64
	// TCPBytes (sent and received) and TCPConnections (opened) come from
	// istio_tcp_*: the traffic of TCP services, which has no requests.
	TCPBytes, TCPConnections float64
	// Services are the destination_service_name values seen.
	Services []string
}

// countersFromSamples sums a scrape's samples by reported edge.
func countersFromSamples(samples []Sample) map[reportedEdge]*Counters {
	out := map[reportedEdge]*Counters{}
	get := func(l map[string]string) *Counters {
		k := reportedEdge{
			EdgeKey: EdgeKey{
				Source:      Workload{Namespace: l["source_workload_namespace"], Name: orUnknown(l["source_workload"])},
				Destination: Workload{Namespace: l["destination_workload_namespace"], Name: orUnknown(l["destination_workload"])},
			},
			Reporter: l["reporter"],
		}
		c := out[k]
		if c == nil {
			c = &Counters{Buckets: map[float64]float64{}}
			out[k] = c
		}
		if svc := l["destination_service_name"]; svc != "" && svc != "unknown" && !slices.Contains(c.Services, svc) {
			c.Services = append(c.Services, svc)
			slices.Sort(c.Services)
		}
		return c
	}
	for _, s := range samples {
		switch s.Name {
		case requestsTotal:
			c := get(s.Labels)
			c.Requests += s.Value
			if strings.HasPrefix(s.Labels["response_code"], "5") {
				c.ServerErrors += s.Value
			}
		case tcpSentBytes, tcpReceivedBytes:
			get(s.Labels).TCPBytes += s.Value
		case tcpConnectionsOpen:
			get(s.Labels).TCPConnections += s.Value
		case durationBuckets:
			le, err := strconv.ParseFloat(s.Labels["le"], 64)
			if err != nil {
				continue // a bucket without a bound cannot be placed
			}
			get(s.Labels).Buckets[le] += s.Value
		}
	}
	return out
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// delta returns newer's increase over older for one reported edge. A
// counter that went down was reset (the proxy restarted): its increase is
// its new value, as Prometheus's rate() treats resets (the request count
// decides for the 5xx count and the buckets). older nil means the edge was
// not there yet: it started at zero.
func delta(older, newer *Counters) Counters {
	if older == nil {
		older = &Counters{}
	}
	d := Counters{Buckets: map[float64]float64{}, Services: newer.Services,
		TCPBytes: increase(older.TCPBytes, newer.TCPBytes), TCPConnections: increase(older.TCPConnections, newer.TCPConnections)}
	if newer.Requests < older.Requests {
		d.Requests, d.ServerErrors = newer.Requests, newer.ServerErrors
		for le, v := range newer.Buckets {
			d.Buckets[le] = v
		}
		return d
	}
	d.Requests = newer.Requests - older.Requests
	d.ServerErrors = math.Max(0, newer.ServerErrors-older.ServerErrors)
	for le, v := range newer.Buckets {
		d.Buckets[le] = math.Max(0, v-older.Buckets[le])
	}
	return d
}

// increase is a counter's increase from o to n, n itself after a reset.
func increase(o, n float64) float64 {
	if n < o {
		return n
	}
	return n - o
}

// add adds o into c.
func (c *Counters) add(o Counters) {
	c.Requests += o.Requests
	c.ServerErrors += o.ServerErrors
	c.TCPBytes += o.TCPBytes
	c.TCPConnections += o.TCPConnections
	if c.Buckets == nil {
		c.Buckets = map[float64]float64{}
	}
	for le, v := range o.Buckets {
		c.Buckets[le] += v
	}
	for _, s := range o.Services {
		if !slices.Contains(c.Services, s) {
			c.Services = append(c.Services, s)
		}
	}
	slices.Sort(c.Services)
}

// Quantile is Prometheus's histogram_quantile over cumulative buckets
// (promql/quantile.go, bucketQuantile): the rank q·count is found in its
// bucket and interpolated linearly within it, the first bucket starting at
// 0; a rank in the +Inf bucket answers the highest finite bound. NaN when
// there is no +Inf bucket or no observation.
func Quantile(q float64, buckets map[float64]float64) float64 {
	les := make([]float64, 0, len(buckets))
	for le := range buckets {
		les = append(les, le)
	}
	slices.Sort(les)
	if len(les) < 2 || !math.IsInf(les[len(les)-1], 1) {
		return math.NaN()
	}
	counts := make([]float64, len(les))
	for i, le := range les {
		counts[i] = buckets[le]
		if i > 0 && counts[i] < counts[i-1] { // summed deltas may dip: keep monotonic
			counts[i] = counts[i-1]
		}
	}
	total := counts[len(counts)-1]
	if total == 0 {
		return math.NaN()
	}
	rank := q * total
	b, _ := slices.BinarySearch(counts, rank)
	for b < len(counts) && counts[b] < rank {
		b++
	}
	if b >= len(les)-1 {
		return les[len(les)-2]
	}
	start, end := 0.0, les[b]
	below := 0.0
	if b > 0 {
		start, below = les[b-1], counts[b-1]
	} else if end <= 0 {
		return end
	}
	inBucket := counts[b] - below
	if inBucket == 0 {
		return end
	}
	return start + (end-start)*((rank-below)/inBucket)
}
