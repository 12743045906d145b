// Package stats holds the proxy's counters and renders them with Envoy's
// names, both as Prometheus text (/stats/prometheus) and as Envoy's plain
// "name: value" form (/stats).
//
// Counters are plain atomics. Creating a counter takes the store's mutex;
// incrementing never does, so hot paths look counters up once (when a
// cluster or listener is built) and keep the pointer.
package stats

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
)

// maxStatusCode bounds the per-code response counters.
const maxStatusCode = 600

// ClusterStats are the per-cluster upstream counters. A cluster keeps the
// same *ClusterStats across config updates (looked up by name).
type ClusterStats struct {
	Name          string
	RqTotal       atomic.Uint64
	CxTotal       atomic.Uint64
	CxConnectFail atomic.Uint64
	NoHealthy     atomic.Uint64
	Router        RouterStats // router.go
	SSL           SSLStats    // ssl.go
	// codes counts responses by status code. It is allocated on the
	// cluster's first response: the array is 4.7 KiB, and most of the
	// clusters of a large mesh (a sidecar with 1,000 services in scope)
	// never carry a request (bench/sidecar).
	codes atomic.Pointer[codeCounters]

	mu         sync.Mutex // guards std's masks and funcs and the maps below (creation and rendering only)
	std        clusterStd // clusterstd.go: the stats every cluster has
	counters   map[string]*atomic.Uint64
	gauges     map[string]*atomic.Int64
	gaugeFuncs map[string]func() int64
}

// Counter returns the cluster's counter named by its Envoy suffix (e.g.
// "upstream_cx_overflow", "outlier_detection.ejections_enforced_total"),
// creating it once. It renders as cluster.NAME.SUFFIX in /stats and as
// envoy_cluster_SUFFIX{cluster_name="NAME"} in Prometheus, as Envoy does.
func (c *ClusterStats) Counter(suffix string) *atomic.Uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i := slot(stdCounterNames[:], suffix); i >= 0 {
		c.std.countersUsed |= 1 << i
		return &c.std.counters[i]
	}
	v, ok := c.counters[suffix]
	if !ok {
		if c.counters == nil {
			c.counters = map[string]*atomic.Uint64{}
		}
		v = new(atomic.Uint64)
		c.counters[suffix] = v
	}
	return v
}

// Gauge is Counter for gauges (e.g. "circuit_breakers.default.cx_open").
func (c *ClusterStats) Gauge(suffix string) *atomic.Int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i := slot(stdGaugeNames[:], suffix); i >= 0 {
		c.std.gaugesUsed |= 1 << i
		return &c.std.gauges[i]
	}
	v, ok := c.gauges[suffix]
	if !ok {
		if c.gauges == nil {
			c.gauges = map[string]*atomic.Int64{}
		}
		v = new(atomic.Int64)
		c.gauges[suffix] = v
	}
	return v
}

// SetGaugeFunc makes the gauge named by suffix read f when the stats are
// rendered (e.g. "membership_healthy", worked out from the hosts rather
// than kept up to date on every change). A later call replaces f: the
// cluster built last owns the gauge.
func (c *ClusterStats) SetGaugeFunc(suffix string, f func() int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i := slot(stdGaugeFuncNames[:], suffix); i >= 0 {
		c.std.funcsUsed |= 1 << i
		c.std.funcs[i] = f
		return
	}
	if c.gaugeFuncs == nil {
		c.gaugeFuncs = map[string]func() int64{}
	}
	c.gaugeFuncs[suffix] = f
}

// codeCounters are the per-status-code response counters of a cluster.
type codeCounters [maxStatusCode]atomic.Uint64

// codeCounters returns the cluster's code counters, allocating them once.
func (c *ClusterStats) codeCounters() *codeCounters {
	if p := c.codes.Load(); p != nil {
		return p
	}
	c.codes.CompareAndSwap(nil, new(codeCounters))
	return c.codes.Load()
}

// eachCode calls f with every status code counted at least once.
func (c *ClusterStats) eachCode(f func(code int, v uint64)) {
	p := c.codes.Load()
	if p == nil {
		return
	}
	for code := range p {
		if v := p[code].Load(); v > 0 {
			f(code, v)
		}
	}
}

// responses returns the responses counted by AddResponse: in all
// (upstream_rq_completed) and by class (index 1 to 5: upstream_rq_1xx to
// upstream_rq_5xx), as Envoy's router charges every upstream response to
// its code, its class and the completed total at once.
func (c *ClusterStats) responses() (completed uint64, classes [6]uint64) {
	c.eachCode(func(code int, v uint64) {
		if code >= 100 {
			completed += v
			classes[code/100] += v
		}
	})
	return completed, classes
}

// AddResponse counts one upstream response with the given HTTP status code.
func (c *ClusterStats) AddResponse(code int) {
	if code > 0 && code < maxStatusCode {
		c.codeCounters()[code].Add(1)
	}
}

// ListenerStats are the per-listener downstream counters.
type ListenerStats struct {
	Address  string // Envoy's label form, e.g. "0.0.0.0_15001"
	CxTotal  atomic.Uint64
	CxActive atomic.Int64
	SSL      SSLStats // ssl.go
}

// Store owns every counter of one proxy. The zero value is not usable; use New.
type Store struct {
	mu        sync.Mutex // guards the maps below (creation and rendering only)
	clusters  map[string]*ClusterStats
	listeners map[string]*ListenerStats
	http      map[string]*HTTPStats
	counters  map[string]*atomic.Uint64
	gauges    map[string]*atomic.Int64
	vecs      map[string]*Vec // vec.go

	maxSeries   atomic.Int64 // the series cap of all vecs
	seriesCount atomic.Int64 // series in all vecs
}

// New returns an empty store.
func New() *Store {
	s := &Store{
		clusters:  map[string]*ClusterStats{},
		listeners: map[string]*ListenerStats{},
		http:      map[string]*HTTPStats{},
		counters:  map[string]*atomic.Uint64{},
		gauges:    map[string]*atomic.Int64{},
		vecs:      map[string]*Vec{},
	}
	s.maxSeries.Store(DefaultMaxSeries)
	return s
}

// Cluster returns the counters for the named cluster, creating them once.
func (s *Store) Cluster(name string) *ClusterStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.clusters[name]
	if !ok {
		c = &ClusterStats{Name: name}
		s.clusters[name] = c
	}
	return c
}

// Listener returns the counters for a listener address label, creating them once.
func (s *Store) Listener(address string) *ListenerStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.listeners[address]
	if !ok {
		l = &ListenerStats{Address: address}
		s.listeners[address] = l
	}
	return l
}

// Counter returns a named counter (Envoy dotted name without the "envoy_"
// prefix, e.g. "cluster_manager.cds.update_success"), creating it once.
func (s *Store) Counter(name string) *atomic.Uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.counters[name]
	if !ok {
		c = new(atomic.Uint64)
		s.counters[name] = c
	}
	return c
}

// Gauge returns a named gauge, creating it once.
func (s *Store) Gauge(name string) *atomic.Int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.gauges[name]
	if !ok {
		g = new(atomic.Int64)
		s.gauges[name] = g
	}
	return g
}

type sample struct {
	labels string
	value  string
}

type family struct {
	kind    string
	samples []sample
}

func promName(dotted string) string {
	r := strings.NewReplacer(".", "_", "-", "_")
	return "envoy_" + r.Replace(dotted)
}

// WritePrometheus writes every metric in the Prometheus text format with
// Envoy's names and labels.
func (s *Store) WritePrometheus(w io.Writer) error {
	fams := map[string]*family{}
	add := func(name, kind, labels, value string) {
		f, ok := fams[name]
		if !ok {
			f = &family{kind: kind}
			fams[name] = f
		}
		f.samples = append(f.samples, sample{labels, value})
	}
	s.mu.Lock()
	for _, c := range s.clusters {
		l := fmt.Sprintf(`cluster_name=%q`, c.Name)
		add("envoy_cluster_upstream_rq_total", "counter", l, fmt.Sprint(c.RqTotal.Load()))
		add("envoy_cluster_upstream_cx_total", "counter", l, fmt.Sprint(c.CxTotal.Load()))
		add("envoy_cluster_upstream_cx_connect_fail", "counter", l, fmt.Sprint(c.CxConnectFail.Load()))
		add("envoy_cluster_upstream_cx_none_healthy", "counter", l, fmt.Sprint(c.NoHealthy.Load()))
		c.Router.each(func(n string, v uint64) { add("envoy_cluster_"+n, "counter", l, fmt.Sprint(v)) })
		c.SSL.each(func(n string, v uint64) { add(promName("cluster."+n), "counter", l, fmt.Sprint(v)) })
		c.eachCode(func(code int, v uint64) {
			add("envoy_cluster_upstream_rq", "counter",
				fmt.Sprintf(`envoy_response_code="%d",%s`, code, l), fmt.Sprint(v))
		})
		completed, classes := c.responses()
		add("envoy_cluster_upstream_rq_completed", "counter", l, fmt.Sprint(completed))
		for class, v := range classes {
			if v > 0 {
				add("envoy_cluster_upstream_rq_xx", "counter",
					fmt.Sprintf(`envoy_response_code_class="%d",%s`, class, l), fmt.Sprint(v))
			}
		}
		c.mu.Lock()
		c.eachCounter(func(n string, v uint64) { add(promName("cluster."+n), "counter", l, fmt.Sprint(v)) })
		c.eachGauge(func(n string, v int64) { add(promName("cluster."+n), "gauge", l, fmt.Sprint(v)) })
		c.mu.Unlock()
	}
	for _, ls := range s.listeners {
		l := fmt.Sprintf(`envoy_listener_address=%q`, ls.Address)
		add("envoy_listener_downstream_cx_total", "counter", l, fmt.Sprint(ls.CxTotal.Load()))
		add("envoy_listener_downstream_cx_active", "gauge", l, fmt.Sprint(ls.CxActive.Load()))
		ls.SSL.each(func(n string, v uint64) { add(promName("listener."+n), "counter", l, fmt.Sprint(v)) })
	}
	for _, h := range s.http {
		l := fmt.Sprintf(`envoy_http_conn_manager_prefix=%q`, h.Prefix)
		h.each(func(n string, gauge bool, v int64) {
			kind := "counter"
			if gauge {
				kind = "gauge"
			}
			if class, ok := strings.CutSuffix(strings.TrimPrefix(n, "downstream_rq_"), "xx"); ok && len(class) == 1 {
				add("envoy_http_downstream_rq_xx", kind, fmt.Sprintf(`envoy_response_code_class="%s",%s`, class, l), fmt.Sprint(v))
				return
			}
			add("envoy_http_"+n, kind, l, fmt.Sprint(v))
		})
	}
	for n, c := range s.counters {
		add(promName(n), "counter", "", fmt.Sprint(c.Load()))
	}
	for n, g := range s.gauges {
		add(promName(n), "gauge", "", fmt.Sprint(g.Load()))
	}
	s.mu.Unlock()

	names := make([]string, 0, len(fams))
	for n := range fams {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		f := fams[n]
		sort.Slice(f.samples, func(i, j int) bool { return f.samples[i].labels < f.samples[j].labels })
		fmt.Fprintf(&b, "# TYPE %s %s\n", n, f.kind)
		for _, sm := range f.samples {
			if sm.labels == "" {
				fmt.Fprintf(&b, "%s %s\n", n, sm.value)
			} else {
				fmt.Fprintf(&b, "%s{%s} %s\n", n, sm.labels, sm.value)
			}
		}
	}
	s.writeVecs(&b)
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteText writes every metric in Envoy's plain /stats form.
func (s *Store) WriteText(w io.Writer) error {
	var lines []string
	s.mu.Lock()
	for _, c := range s.clusters {
		p := "cluster." + c.Name + "."
		lines = append(lines,
			fmt.Sprintf("%supstream_rq_total: %d", p, c.RqTotal.Load()),
			fmt.Sprintf("%supstream_cx_total: %d", p, c.CxTotal.Load()),
			fmt.Sprintf("%supstream_cx_connect_fail: %d", p, c.CxConnectFail.Load()),
			fmt.Sprintf("%supstream_cx_none_healthy: %d", p, c.NoHealthy.Load()))
		c.Router.each(func(n string, v uint64) { lines = append(lines, fmt.Sprintf("%s%s: %d", p, n, v)) })
		c.SSL.each(func(n string, v uint64) { lines = append(lines, fmt.Sprintf("%s%s: %d", p, n, v)) })
		c.eachCode(func(code int, v uint64) {
			lines = append(lines, fmt.Sprintf("%supstream_rq_%d: %d", p, code, v))
		})
		completed, classes := c.responses()
		lines = append(lines, fmt.Sprintf("%supstream_rq_completed: %d", p, completed))
		for class, v := range classes {
			if v > 0 {
				lines = append(lines, fmt.Sprintf("%supstream_rq_%dxx: %d", p, class, v))
			}
		}
		c.mu.Lock()
		c.eachCounter(func(n string, v uint64) { lines = append(lines, fmt.Sprintf("%s%s: %d", p, n, v)) })
		c.eachGauge(func(n string, v int64) { lines = append(lines, fmt.Sprintf("%s%s: %d", p, n, v)) })
		c.mu.Unlock()
	}
	for _, l := range s.listeners {
		lines = append(lines,
			fmt.Sprintf("listener.%s.downstream_cx_total: %d", l.Address, l.CxTotal.Load()),
			fmt.Sprintf("listener.%s.downstream_cx_active: %d", l.Address, l.CxActive.Load()))
		l.SSL.each(func(n string, v uint64) { lines = append(lines, fmt.Sprintf("listener.%s.%s: %d", l.Address, n, v)) })
	}
	for _, h := range s.http {
		h.each(func(n string, _ bool, v int64) {
			lines = append(lines, fmt.Sprintf("http.%s.%s: %d", h.Prefix, n, v))
		})
	}
	for n, c := range s.counters {
		lines = append(lines, fmt.Sprintf("%s: %d", n, c.Load()))
	}
	for n, g := range s.gauges {
		lines = append(lines, fmt.Sprintf("%s: %d", n, g.Load()))
	}
	s.mu.Unlock()
	lines = s.writeVecsText(lines)
	sort.Strings(lines)
	_, err := io.WriteString(w, strings.Join(lines, "\n")+"\n")
	return err
}
