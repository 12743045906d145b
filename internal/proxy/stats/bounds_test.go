package stats

import (
	"bytes"
	"strings"
	"testing"
)

// text renders s in /stats' plain form.
func text(t *testing.T, s *Store) string {
	t.Helper()
	var b strings.Builder
	if err := s.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func prom(t *testing.T, s *Store) string {
	t.Helper()
	var b strings.Builder
	if err := s.WritePrometheus(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// Status codes at the edges of 100..599: 100 and 599 are counted (with
// their class and in completed), 99, 600 and beyond are not, and none of
// them panics.
func TestResponseCodeBounds(t *testing.T) {
	s := New()
	h := s.HTTP("p")
	c := s.Cluster("c")
	for _, code := range []int{99, 100, 599, 600, 700, -1} {
		h.AddResponse(code)
		c.AddResponse(code)
	}
	out := text(t, s)
	for _, want := range []string{
		"http.p.downstream_rq_1xx: 1\n",
		"http.p.downstream_rq_5xx: 1\n",
		"http.p.downstream_rq_completed: 2\n",
		"cluster.c.upstream_rq_100: 1\n",
		"cluster.c.upstream_rq_1xx: 1\n",
		"cluster.c.upstream_rq_599: 1\n",
		"cluster.c.upstream_rq_5xx: 1\n",
		"cluster.c.upstream_rq_completed: 2\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
	for _, bad := range []string{"upstream_rq_600", "upstream_rq_700", "upstream_rq_6xx"} {
		if strings.Contains(out, bad) {
			t.Errorf("%s counted:\n%s", bad, out)
		}
	}
}

// The TLS counters appear once either of them moved, both of them, on
// clusters and listeners alike, in both forms.
func TestSSLStatsListedOnceUsed(t *testing.T) {
	s := New()
	c := s.Cluster("c")
	l := s.Listener("l")
	if out := text(t, s); strings.Contains(out, "ssl.") {
		t.Fatalf("ssl stats before any handshake:\n%s", out)
	}
	c.SSL.Handshake.Add(2)
	l.SSL.ConnectionError.Add(3)
	out := text(t, s)
	for _, want := range []string{
		"cluster.c.ssl.handshake: 2\n", "cluster.c.ssl.connection_error: 0\n",
		"listener.l.ssl.handshake: 0\n", "listener.l.ssl.connection_error: 3\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
	p := prom(t, s)
	for _, want := range []string{
		"envoy_cluster_ssl_handshake{cluster_name=\"c\"} 2\n",
		"envoy_cluster_ssl_connection_error{cluster_name=\"c\"} 0\n",
		"envoy_listener_ssl_connection_error{envoy_listener_address=\"l\"} 3\n",
	} {
		if !strings.Contains(p, want) {
			t.Errorf("missing %q in\n%s", want, p)
		}
	}
}

// The first standard gauge and gauge function have a slot like the
// others: no map is made for them.
func TestFirstStdSlotUsed(t *testing.T) {
	c := New().Cluster("c")
	c.Gauge(stdGaugeNames[0]).Store(4)
	c.SetGaugeFunc(stdGaugeFuncNames[0], func() int64 { return 5 })
	if c.gauges != nil || c.gaugeFuncs != nil {
		t.Errorf("maps made for standard names: gauges %v funcs %v", c.gauges, c.gaugeFuncs)
	}
	if c.std.gaugesUsed&1 == 0 || c.std.funcsUsed&1 == 0 {
		t.Errorf("slot 0 not marked used: %b %b", c.std.gaugesUsed, c.std.funcsUsed)
	}
}

// A value of 255 bytes or more takes the long length form: a 255-byte
// value's key is 255, its length in four bytes, then the value.
func TestAppendKeyLongForm(t *testing.T) {
	for _, n := range []int{254, 255, 300} {
		v := strings.Repeat("v", n)
		got := AppendKey(nil, []string{v})
		var want []byte
		if n < 255 {
			want = append([]byte{byte(n)}, v...)
		} else {
			want = append([]byte{255, 0, 0, byte(n >> 8), byte(n)}, v...)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("AppendKey(%d bytes) = %v..., want %v...", n, got[:6], want[:6])
		}
	}
}

// /stats lists a histogram series' count and its sum (shortest form); a
// counter has no sum. A family without series is skipped, not the end
// of the list. A label value that starts with a character to escape is
// escaped.
func TestVecsInText(t *testing.T) {
	s := New()
	if _, err := s.CounterVec("a_empty", []string{"k"}); err != nil {
		t.Fatal(err)
	}
	cv, err := s.CounterVec("b_total", []string{"k"})
	if err != nil {
		t.Fatal(err)
	}
	hv, err := s.HistogramVec("c_ms", []string{"k"}, DefaultBuckets)
	if err != nil {
		t.Fatal(err)
	}
	cv.With([]string{`"q`}).Add(2)
	hv.With([]string{"x"}).Observe(1.25, hv.Buckets())
	out := text(t, s)
	for _, want := range []string{
		"b_total{k=\"\\\"q\"}: 2\n",
		"c_ms{k=\"x\"}: 1\n",
		"c_ms_sum{k=\"x\"}: 1.25\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
	if strings.Contains(out, "b_total_sum") || strings.Contains(out, "a_empty") {
		t.Errorf("a counter's sum or an empty family listed:\n%s", out)
	}
	p := prom(t, s)
	if !strings.Contains(p, "b_total{k=\"\\\"q\"} 2\n") || !strings.Contains(p, "c_ms_sum{k=\"x\"} 1.25\n") {
		t.Errorf("prometheus form:\n%s", p)
	}
}
