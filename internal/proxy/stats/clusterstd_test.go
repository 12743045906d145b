package stats

import (
	"strings"
	"testing"
)

// Every cluster's breaker stats live in slots, not maps: handing them out
// allocates nothing, a second lookup returns the same value, and only
// the names handed out render, slots and map entries alike.
func TestClusterStdSlots(t *testing.T) {
	tests := []struct {
		name   string
		gauge  bool
		inSlot bool
	}{
		{"upstream_cx_overflow", false, true},
		{"upstream_cx_connect_timeout", false, true},
		{"outlier_detection.ejections_overflow", false, false},
		{"circuit_breakers.default.rq_open", true, true},
		{"upstream_cx_active", true, true},
		{"circuit_breakers.default.remaining_cx", true, true},
		{"circuit_breakers.default.remaining_retries", true, true},
		{"outlier_detection.ejections_active", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New()
			c := s.Cluster("outbound|80||a")
			line := "cluster.outbound|80||a." + tt.name + ": "
			var text strings.Builder
			if err := s.WriteText(&text); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(text.String(), line) {
				t.Fatalf("%s renders before it was handed out", tt.name)
			}
			get := func() any {
				if tt.gauge {
					g := c.Gauge(tt.name)
					g.Add(7)
					return g
				}
				v := c.Counter(tt.name)
				v.Add(7)
				return v
			}
			first := get()
			if first != get() {
				t.Fatal("a second lookup returned another value")
			}
			allocs := testing.AllocsPerRun(10, func() { get() })
			if tt.inSlot && allocs != 0 {
				t.Errorf("a lookup of %s allocates %v times; want a slot", tt.name, allocs)
			}
			text.Reset()
			if err := s.WriteText(&text); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(text.String(), line) || strings.Contains(text.String(), line+"0\n") {
				t.Errorf("/stats lacks %s with its count:\n%s", tt.name, text.String())
			}
			if tt.inSlot && (len(c.counters) != 0 || len(c.gauges) != 0) {
				t.Errorf("%s went to a map: %v %v", tt.name, c.counters, c.gauges)
			}
		})
	}
}

// membership_total and membership_healthy are gauge functions in slots:
// the one set last renders, once.
func TestClusterStdGaugeFuncs(t *testing.T) {
	s := New()
	c := s.Cluster("c")
	c.SetGaugeFunc("membership_healthy", func() int64 { return 1 })
	c.SetGaugeFunc("membership_healthy", func() int64 { return 2 })
	c.SetGaugeFunc("other", func() int64 { return 5 })
	if len(c.gaugeFuncs) != 1 {
		t.Errorf("gauge function map %v, want only other", c.gaugeFuncs)
	}
	var text strings.Builder
	if err := s.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	out := text.String()
	if strings.Count(out, "cluster.c.membership_healthy: ") != 1 || !strings.Contains(out, "cluster.c.membership_healthy: 2\n") ||
		!strings.Contains(out, "cluster.c.other: 5\n") || strings.Contains(out, "membership_total") {
		t.Errorf("/stats:\n%s", out)
	}
}
