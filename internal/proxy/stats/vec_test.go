package stats

import (
	"flag"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"unsafe"
)

var update = flag.Bool("update", false, "rewrite golden files")

func golden(t *testing.T, name, got string) {
	t.Helper()
	p := "testdata/" + name
	if *update {
		if err := os.WriteFile(p, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("%s differs:\n%s", name, got)
	}
}

// A counter and a histogram family render as Prometheus text with their
// types, escaped label values, cumulative buckets, +Inf, _sum and _count.
func TestVecPrometheusGolden(t *testing.T) {
	s := New()
	c, err := s.CounterVec("istio_requests_total", []string{"reporter", "response_code"})
	if err != nil {
		t.Fatal(err)
	}
	h, err := s.HistogramVec("istio_request_duration_milliseconds", []string{"reporter"}, DefaultBuckets)
	if err != nil {
		t.Fatal(err)
	}
	c.With([]string{"destination", "200"}).Add(3)
	c.With([]string{"source", "503"}).Add(1)
	c.With([]string{`we"ird\`, "a\nb"}).Add(1)
	for _, v := range []float64{0.2, 0.5, 3, 7, 4000000} {
		h.With([]string{"destination"}).Observe(v, h.Buckets())
	}
	var b strings.Builder
	if err := s.WritePrometheus(&b); err != nil {
		t.Fatal(err)
	}
	golden(t, "vec.prom.golden", b.String())
}

// Asking again for a family returns it; asking with other labels or
// another kind is refused.
func TestVecRedeclare(t *testing.T) {
	s := New()
	a, _ := s.CounterVec("m", []string{"x"})
	b, err := s.CounterVec("m", []string{"x"})
	if err != nil || a != b {
		t.Fatalf("same family: %v", err)
	}
	if _, err := s.CounterVec("m", []string{"y"}); err == nil {
		t.Error("other labels accepted")
	}
	if _, err := s.HistogramVec("m", []string{"x"}, DefaultBuckets); err == nil {
		t.Error("other kind accepted")
	}
	if _, err := s.HistogramVec("h", nil, []float64{2, 1}); err == nil {
		t.Error("unsorted buckets accepted")
	}
}

// The cap holds across families: past it, new series are dropped and
// counted, existing ones keep counting.
func TestVecCap(t *testing.T) {
	s := New()
	s.SetMaxSeries(10)
	a, _ := s.CounterVec("a", []string{"v"})
	h, _ := s.HistogramVec("h", []string{"v"}, DefaultBuckets)
	for i := range 5 {
		a.With([]string{fmt.Sprint(i)}).Add(1)
		h.With([]string{fmt.Sprint(i)}).Observe(1, h.Buckets())
	}
	if sr := a.With([]string{"new"}); sr != nil {
		t.Fatal("series over the cap")
	}
	a.With([]string{"new"}).Add(1) // nil series: no-op, no panic
	a.With([]string{"0"}).Add(1)
	if got := a.With([]string{"0"}).Value(); got != 2 {
		t.Errorf("existing series: %d", got)
	}
	if s.SeriesCount() != 10 || s.Counter(overflowCounter).Load() != 2 {
		t.Errorf("series %d overflow %d", s.SeriesCount(), s.Counter(overflowCounter).Load())
	}
	var b strings.Builder
	_ = s.WritePrometheus(&b)
	if !strings.Contains(b.String(), "envoy_stats_series_overflow 2\n") {
		t.Errorf("overflow not exported:\n%s", b.String())
	}
}

// Looking up an existing series does not allocate (the hot path of the
// stats filter).
func TestVecWithNoAlloc(t *testing.T) {
	s := New()
	v, _ := s.CounterVec("a", []string{"x", "y"})
	vals := []string{"source", "productpage-v1"}
	v.With(vals)
	if n := testing.AllocsPerRun(100, func() { v.With(vals).Add(1) }); n != 0 {
		t.Errorf("%v allocs per lookup", n)
	}
}

// Many goroutines adding to the same and new series while the store is
// rendered (run with -race): no lost increments.
func TestVecConcurrent(t *testing.T) {
	s := New()
	v, _ := s.CounterVec("a", []string{"x"})
	h, _ := s.HistogramVec("h", []string{"x"}, DefaultBuckets)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				v.With([]string{fmt.Sprint(i % 7)}).Add(1)
				h.With([]string{fmt.Sprint(g)}).Observe(float64(i), h.Buckets())
				if i%100 == 0 {
					_ = s.WritePrometheus(&strings.Builder{})
					_ = s.WriteText(&strings.Builder{})
				}
			}
		}()
	}
	wg.Wait()
	var total uint64
	for i := range 7 {
		total += v.With([]string{fmt.Sprint(i)}).Value()
	}
	if total != 8000 {
		t.Errorf("total %d", total)
	}
	if got := h.With([]string{"3"}).Value(); got != 1000 {
		t.Errorf("histogram count %d", got)
	}
}

// A series keeps its own copy of the label values: a caller's may alias
// a buffer that the next request overwrites (an HTTP/1.1 Host header).
func TestVecCopiesValues(t *testing.T) {
	s := New()
	c, err := s.CounterVec("istio_requests_total", []string{"destination_service"})
	if err != nil {
		t.Fatal(err)
	}
	buf := []byte("ratings.default.svc.cluster.local")
	c.With([]string{unsafe.String(&buf[0], len(buf))}).Add(1)
	copy(buf, "XXXXXXX")
	var b strings.Builder
	if err := s.WritePrometheus(&b); err != nil {
		t.Fatal(err)
	}
	if want := `istio_requests_total{destination_service="ratings.default.svc.cluster.local"} 1`; !strings.Contains(b.String(), want) {
		t.Errorf("the label changed with the caller's buffer:\n%s", b.String())
	}
}

// bucket puts a sample where slices.BinarySearch does (the first bound
// at or above it, Prometheus' le): at, just above and just below each
// bound, zero, negatives, infinities and NaN.
func TestBucket(t *testing.T) {
	vals := []float64{0, -1, math.Inf(1), math.Inf(-1), math.NaN(), math.MaxFloat64, math.SmallestNonzeroFloat64}
	for _, b := range DefaultBuckets {
		vals = append(vals, b, math.Nextafter(b, math.Inf(1)), math.Nextafter(b, math.Inf(-1)), b+0.5, b-0.5)
	}
	for _, bounds := range [][]float64{DefaultBuckets, {1}, {}, {-5, 0, 5}} {
		for _, v := range vals {
			want, _ := slices.BinarySearch(bounds, v)
			if got := bucket(bounds, v); got != want {
				t.Errorf("bucket(%v, %v) = %d, want %d", bounds, v, got, want)
			}
		}
	}
}

// ObserveInt records what Observe records for the same whole numbers:
// the two stores render the same text, negatives included, and a
// histogram's sum and count are not disturbed by Add.
func TestObserveInt(t *testing.T) {
	render := func(observe func(sr *Series, v int64, bounds []float64)) string {
		s := New()
		h, err := s.HistogramVec("istio_request_bytes", []string{"reporter"}, DefaultBuckets)
		if err != nil {
			t.Fatal(err)
		}
		sr := h.With([]string{"destination"})
		for _, v := range []int64{0, 1, 3, 1024, 7, 600000, -2, 1 << 40} {
			observe(sr, v, h.Buckets())
		}
		sr.Add(5)
		var b strings.Builder
		if err := s.WritePrometheus(&b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	float := render(func(sr *Series, v int64, bounds []float64) { sr.Observe(float64(v), bounds) })
	integer := render(func(sr *Series, v int64, bounds []float64) { sr.ObserveInt(v, bounds) })
	if float != integer {
		t.Errorf("Observe:\n%s\nObserveInt:\n%s", float, integer)
	}
	if !strings.Contains(integer, "_sum{reporter=\"destination\"} 1.099512228809e+12") || !strings.Contains(integer, "_count{reporter=\"destination\"} 8\n") {
		t.Errorf("sum or count wrong:\n%s", integer)
	}
	var nilSeries *Series
	nilSeries.ObserveInt(1, DefaultBuckets) // the cap's nil series ignores it
	if nilSeries.Sum() != 0 {
		t.Error("nil series has a sum")
	}
}

// Families with Envoy's default buckets share one array of bounds.
func TestDefaultBoundsShared(t *testing.T) {
	s := New()
	a, _ := s.HistogramVec("a", nil, DefaultBuckets)
	b, _ := s.HistogramVec("b", nil, slices.Clone(DefaultBuckets))
	c, _ := s.HistogramVec("c", nil, []float64{1, 2})
	if &a.Buckets()[0] != &b.Buckets()[0] || &a.Buckets()[0] == &DefaultBuckets[0] {
		t.Error("default bounds not shared, or the exported slice itself is held")
	}
	if !slices.Equal(c.Buckets(), []float64{1, 2}) {
		t.Errorf("other bounds %v", c.Buckets())
	}
}
