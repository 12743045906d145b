package stats

import (
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Labeled metric families: Istio's istio_* metrics, a counter or a
// histogram per distinct set of label values (a series), rendered under
// their own names in Prometheus. The label names are fixed when the family
// is created; a caller passes the values in the same order.
//
// Cardinality is bounded per Store (MaxSeries): once that many series
// exist, an observation for a new set of values is dropped and counted in
// stats.series_overflow (envoy_stats_series_overflow), so a label fed by
// a peer cannot grow the proxy's memory without bound.

// DefaultMaxSeries is the series cap of a Store made by New.
const DefaultMaxSeries = 5000

// overflowCounter names the counter of observations dropped at the cap
// (Strait's own; Envoy has no such limit).
const overflowCounter = "stats.series_overflow"

// DefaultBuckets are Envoy's default histogram bucket bounds
// (source/common/stats/histogram_impl.h, HistogramSettingsImpl::defaultBuckets),
// which Istio's istio.stats histograms use unless the pod's
// sidecar.istio.io/statsHistogramBuckets annotation sets others.
var DefaultBuckets = []float64{0.5, 1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 300000, 600000, 1800000, 3600000}

// defaultBounds is DefaultBuckets as the families that use them share
// them (a copy, which no caller holds).
var defaultBounds = slices.Clone(DefaultBuckets)

// Kind is a family's Prometheus type.
type Kind uint8

// The Prometheus types a family can have.
const (
	KindCounter Kind = iota
	KindHistogram
)

func (k Kind) String() string {
	if k == KindHistogram {
		return "histogram"
	}
	return "counter"
}

// Vec is one labeled family. Safe for concurrent use: With takes a read
// lock to find an existing series and the write lock only to add one.
type Vec struct {
	// Set at creation, read-only.
	name    string
	kind    Kind
	labels  []string
	buckets []float64
	store   *Store

	mu     sync.RWMutex // guards series
	series map[string]*Series
}

// Series is one set of label values of a family. A nil *Series (the cap
// was reached) ignores Add, Observe and ObserveInt.
type Series struct {
	values []string
	// count is a counter's value. A histogram's count is its bins' sum,
	// and its sum is count, as an int64, (ObserveInt's samples: one
	// atomic add, where a float needs a load and a compare-and-swap)
	// plus the float64 in sum's bits (Observe's). 64 bytes: one cache
	// line.
	count atomic.Uint64
	sum   atomic.Uint64
	bins  []atomic.Uint64 // histogram: per-bucket (not cumulative) counts; last is +Inf
}

// Add adds n to a counter series (a histogram's ignores it).
func (s *Series) Add(n uint64) {
	if s != nil && s.bins == nil {
		s.count.Add(n)
	}
}

// Observe records one histogram sample.
func (s *Series) Observe(v float64, bounds []float64) {
	if s == nil {
		return
	}
	s.bins[bucket(bounds, v)].Add(1)
	for {
		old := s.sum.Load()
		if s.sum.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			break
		}
	}
}

// ObserveInt records one histogram sample that is a whole number (a
// size in bytes, a duration in whole milliseconds): Observe(float64(v),
// bounds), with the sum kept as an integer.
func (s *Series) ObserveInt(v int64, bounds []float64) {
	if s == nil {
		return
	}
	s.bins[bucket(bounds, float64(v))].Add(1)
	s.count.Add(uint64(v)) // two's complement: a negative v subtracts
}

// Sum is a histogram series' sum of samples.
func (s *Series) Sum() float64 {
	if s == nil {
		return 0
	}
	return math.Float64frombits(s.sum.Load()) + float64(int64(s.count.Load()))
}

// bucket is the index of the first bound >= v (Prometheus' le), or
// len(bounds) for +Inf: slices.BinarySearch's answer (a NaN too falls
// in the first), without its generic comparison, which orders NaNs for
// every step.
func bucket(bounds []float64, v float64) int {
	lo, hi := 0, len(bounds)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if bounds[m] < v {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// Value is a counter series' value (the sample count of a histogram).
func (s *Series) Value() uint64 {
	if s == nil {
		return 0
	}
	if s.bins != nil {
		var n uint64
		for i := range s.bins {
			n += s.bins[i].Load()
		}
		return n
	}
	return s.count.Load()
}

// Labels are the family's label names, in order.
func (v *Vec) Labels() []string { return v.labels }

// Buckets are a histogram family's bucket bounds.
func (v *Vec) Buckets() []float64 { return v.buckets }

// CounterVec returns the counter family name with the given label names,
// creating it once; a second call with other labels or another kind is an
// error.
func (s *Store) CounterVec(name string, labels []string) (*Vec, error) {
	return s.vec(name, KindCounter, labels, nil)
}

// HistogramVec is CounterVec for a histogram with the given bucket bounds
// (ascending).
func (s *Store) HistogramVec(name string, labels []string, buckets []float64) (*Vec, error) {
	if !slices.IsSorted(buckets) {
		return nil, fmt.Errorf("histogram %s: buckets %v not ascending", name, buckets)
	}
	return s.vec(name, KindHistogram, labels, buckets)
}

func (s *Store) vec(name string, kind Kind, labels []string, buckets []float64) (*Vec, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.vecs[name]; ok {
		if v.kind != kind || !slices.Equal(v.labels, labels) || !slices.Equal(v.buckets, buckets) {
			return nil, fmt.Errorf("metric %s already exists as a %s with labels %v", name, v.kind, v.labels)
		}
		return v, nil
	}
	bounds := slices.Clone(buckets)
	if slices.Equal(buckets, defaultBounds) {
		// Istio's four request metrics' three histograms search the
		// same bounds for each request: one array, warm in the cache
		// for the second and third.
		bounds = defaultBounds
	}
	v := &Vec{
		name: name, kind: kind, store: s,
		labels:  slices.Clone(labels),
		buckets: bounds,
		series:  map[string]*Series{},
	}
	s.vecs[name] = v
	return v, nil
}

// SetMaxSeries changes the store's series cap (for tests and the
// bootstrap's stats settings); series already made stay.
func (s *Store) SetMaxSeries(n int) { s.maxSeries.Store(int64(n)) }

// SeriesCount is the number of series in all families of the store.
func (s *Store) SeriesCount() int { return int(s.seriesCount.Load()) }

// With returns the series for values (one per label, in order), creating
// it unless the store is at its cap (then nil, and the drop is counted).
// It does not allocate when the series exists.
func (v *Vec) With(values []string) *Series {
	var stack [512]byte
	return v.WithKey(AppendKey(stack[:0], values), values)
}

// WithKey is With for a key made by AppendKey from the same values, so
// that families with the same labels (Istio's four request metrics) make
// the key once.
func (v *Vec) WithKey(key []byte, values []string) *Series {
	if len(values) != len(v.labels) {
		panic(fmt.Sprintf("stats: %s takes %d label values, got %d", v.name, len(v.labels), len(values)))
	}
	v.mu.RLock()
	sr := v.series[string(key)]
	v.mu.RUnlock()
	if sr != nil {
		return sr
	}
	if sr = v.add(key, values); sr == nil {
		// Created on the first drop, so that a proxy under its cap shows
		// only Envoy's own counters.
		v.store.Counter(overflowCounter).Add(1)
	}
	return sr
}

func (v *Vec) add(key []byte, values []string) *Series {
	v.mu.Lock()
	defer v.mu.Unlock()
	if sr := v.series[string(key)]; sr != nil {
		return sr
	}
	st := v.store
	if st.seriesCount.Add(1) > st.maxSeries.Load() {
		st.seriesCount.Add(-1)
		return nil
	}
	// The values are copied: a caller's may alias a buffer it reuses
	// (istio.stats' destination_service from an HTTP/1.1 Host header).
	sr := &Series{values: make([]string, len(values))}
	for i, s := range values {
		sr.values[i] = strings.Clone(s)
	}
	if v.kind == KindHistogram {
		sr.bins = make([]atomic.Uint64, len(v.buckets)+1)
	}
	v.series[string(key)] = sr
	return sr
}

// snapshot returns the store's families, sorted by name, without holding
// the store's lock afterwards (lock order: a Vec's mu is never taken
// under the Store's).
func (s *Store) snapshot() []*Vec {
	s.mu.Lock()
	vecs := make([]*Vec, 0, len(s.vecs))
	for _, v := range s.vecs {
		vecs = append(vecs, v)
	}
	s.mu.Unlock()
	sort.Slice(vecs, func(i, j int) bool { return vecs[i].name < vecs[j].name })
	return vecs
}

// AppendKey appends the series key of values to dst: each value prefixed
// with its length (one byte under 255, else 255 and four bytes), so that
// no two value lists share a key.
func AppendKey(dst []byte, values []string) []byte {
	for _, s := range values {
		if n := len(s); n < 255 {
			dst = append(dst, byte(n))
		} else {
			dst = append(dst, 255, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
		}
		dst = append(dst, s...)
	}
	return dst
}

// writeVecs renders every family in the Prometheus text format, families
// by name and series by label values.
func (s *Store) writeVecs(b *strings.Builder) {
	for _, v := range s.snapshot() {
		v.mu.RLock()
		series := make([]*Series, 0, len(v.series))
		for _, sr := range v.series {
			series = append(series, sr)
		}
		v.mu.RUnlock()
		if len(series) == 0 {
			continue
		}
		labels := make([]string, len(series))
		for i, sr := range series {
			labels[i] = promLabels(v.labels, sr.values)
		}
		idx := make([]int, len(series))
		for i := range idx {
			idx[i] = i
		}
		sort.Slice(idx, func(i, j int) bool { return labels[idx[i]] < labels[idx[j]] })
		fmt.Fprintf(b, "# TYPE %s %s\n", v.name, v.kind)
		for _, i := range idx {
			sr, l := series[i], labels[i]
			if v.kind == KindCounter {
				fmt.Fprintf(b, "%s{%s} %d\n", v.name, l, sr.count.Load())
				continue
			}
			var cum uint64
			for bi, bound := range v.buckets {
				cum += sr.bins[bi].Load()
				fmt.Fprintf(b, "%s_bucket{%s,le=\"%s\"} %d\n", v.name, l, strconv.FormatFloat(bound, 'g', -1, 64), cum)
			}
			cum += sr.bins[len(v.buckets)].Load()
			fmt.Fprintf(b, "%s_bucket{%s,le=\"+Inf\"} %d\n", v.name, l, cum)
			fmt.Fprintf(b, "%s_sum{%s} %s\n", v.name, l, strconv.FormatFloat(sr.Sum(), 'g', -1, 64))
			fmt.Fprintf(b, "%s_count{%s} %d\n", v.name, l, cum)
		}
	}
}

// writeVecsText renders the families in /stats' plain form, one line per
// counter series (NAME{labels}: value) and the count and sum of each
// histogram series.
func (s *Store) writeVecsText(lines []string) []string {
	for _, v := range s.snapshot() {
		v.mu.RLock()
		for _, sr := range v.series {
			l := promLabels(v.labels, sr.values)
			lines = append(lines, fmt.Sprintf("%s{%s}: %d", v.name, l, sr.Value()))
			if v.kind == KindHistogram {
				lines = append(lines, fmt.Sprintf("%s_sum{%s}: %s", v.name, l,
					strconv.FormatFloat(sr.Sum(), 'g', -1, 64)))
			}
		}
		v.mu.RUnlock()
	}
	return lines
}

func promLabels(names, values []string) string {
	var b strings.Builder
	for i, n := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(n)
		b.WriteString(`="`)
		writeLabelValue(&b, values[i])
		b.WriteByte('"')
	}
	return b.String()
}

// writeLabelValue escapes a label value as the Prometheus text format
// asks: backslash, double quote and line feed.
func writeLabelValue(w io.StringWriter, s string) {
	for {
		i := strings.IndexAny(s, "\\\"\n")
		if i < 0 {
			_, _ = w.WriteString(s)
			return
		}
		_, _ = w.WriteString(s[:i])
		switch s[i] {
		case '\\':
			_, _ = w.WriteString(`\\`)
		case '"':
			_, _ = w.WriteString(`\"`)
		case '\n':
			_, _ = w.WriteString(`\n`)
		}
		s = s[i+1:]
	}
}
