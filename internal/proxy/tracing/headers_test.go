package tracing

import (
	"testing"

	"github.com/straitmesh/strait/internal/proxy/httpfilter/streamtest"
)

func TestParseB3(t *testing.T) {
	for _, tc := range []struct {
		name    string
		kv      []string
		want    SpanContext
		ok, err bool
	}{
		{name: "none", kv: nil},
		{name: "multi 64-bit", kv: []string{"x-b3-traceid", "463ac35c9f6413ad", "x-b3-spanid", "72485a3953bb6124", "x-b3-sampled", "1"},
			want: SpanContext{TraceID: TraceID{Low: 0x463ac35c9f6413ad}, SpanID: 0x72485a3953bb6124, Sampled: SampledYes}, ok: true},
		{name: "multi 128-bit with parent", kv: []string{"X-B3-TraceId", "463ac35c9f6413ad48485a3953bb6124", "x-b3-spanid", "a2fb4a1d1a96d312",
			"x-b3-parentspanid", "0020000000000001", "x-b3-sampled", "0"},
			want: SpanContext{TraceID: TraceID{High: 0x463ac35c9f6413ad, Low: 0x48485a3953bb6124}, SpanID: 0xa2fb4a1d1a96d312, ParentID: 0x20000000000001, Sampled: SampledNo}, ok: true},
		{name: "sampled true", kv: []string{"x-b3-traceid", "0000000000000001", "x-b3-spanid", "0000000000000002", "x-b3-sampled", "true"},
			want: SpanContext{TraceID: TraceID{Low: 1}, SpanID: 2, Sampled: SampledYes}, ok: true},
		{name: "flags debug", kv: []string{"x-b3-traceid", "0000000000000001", "x-b3-spanid", "0000000000000002", "x-b3-flags", "1"},
			want: SpanContext{TraceID: TraceID{Low: 1}, SpanID: 2, Sampled: SampledYes, Debug: true}, ok: true},
		{name: "sampled only", kv: []string{"x-b3-sampled", "0"}, want: SpanContext{Sampled: SampledNo}},
		{name: "trace without span", kv: []string{"x-b3-traceid", "0000000000000001"}, err: true},
		{name: "bad trace length", kv: []string{"x-b3-traceid", "00001", "x-b3-spanid", "0000000000000002"}, err: true},
		{name: "zero trace", kv: []string{"x-b3-traceid", "0000000000000000", "x-b3-spanid", "0000000000000002"}, err: true},
		{name: "bad hex", kv: []string{"x-b3-traceid", "000000000000000g", "x-b3-spanid", "0000000000000002"}, err: true},
		{name: "bad parent", kv: []string{"x-b3-traceid", "0000000000000001", "x-b3-spanid", "0000000000000002", "x-b3-parentspanid", "zz"}, err: true},
		{name: "single", kv: []string{"b3", "80f198ee56343ba864fe8b2a57d3eff7-e457b5a2e4d86bd1-1-05e3ac9a4f6e3b90"},
			want: SpanContext{TraceID: TraceID{High: 0x80f198ee56343ba8, Low: 0x64fe8b2a57d3eff7}, SpanID: 0xe457b5a2e4d86bd1, ParentID: 0x05e3ac9a4f6e3b90, Sampled: SampledYes}, ok: true},
		{name: "single no sampling", kv: []string{"b3", "64fe8b2a57d3eff7-e457b5a2e4d86bd1"},
			want: SpanContext{TraceID: TraceID{Low: 0x64fe8b2a57d3eff7}, SpanID: 0xe457b5a2e4d86bd1}, ok: true},
		{name: "single debug", kv: []string{"b3", "64fe8b2a57d3eff7-e457b5a2e4d86bd1-d"},
			want: SpanContext{TraceID: TraceID{Low: 0x64fe8b2a57d3eff7}, SpanID: 0xe457b5a2e4d86bd1, Sampled: SampledYes, Debug: true}, ok: true},
		{name: "single deny", kv: []string{"b3", "0"}, want: SpanContext{Sampled: SampledNo}},
		{name: "single bad state", kv: []string{"b3", "x"}, err: true},
		{name: "single bad", kv: []string{"b3", "64fe8b2a57d3eff7-e457b5a2e4d86bd1-2"}, err: true},
		{name: "single too many", kv: []string{"b3", "64fe8b2a57d3eff7-e457b5a2e4d86bd1-1-05e3ac9a4f6e3b90-1"}, err: true},
		{name: "multi wins over single", kv: []string{"x-b3-traceid", "0000000000000001", "x-b3-spanid", "0000000000000002", "b3", "64fe8b2a57d3eff7-e457b5a2e4d86bd1-1"},
			want: SpanContext{TraceID: TraceID{Low: 1}, SpanID: 2}, ok: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ok, err := ParseB3(streamtest.NewHeaders(tc.kv...))
			if (err != nil) != tc.err || ok != tc.ok {
				t.Fatalf("ok %v err %v, want ok %v err %v", ok, err, tc.ok, tc.err)
			}
			if !tc.err && c != tc.want {
				t.Errorf("got %+v, want %+v", c, tc.want)
			}
		})
	}
}

func TestParseW3C(t *testing.T) {
	const good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, tc := range []struct {
		name    string
		kv      []string
		want    SpanContext
		ok, err bool
	}{
		{name: "none"},
		{name: "sampled", kv: []string{"traceparent", good, "tracestate", "congo=t61rcWkgMzE"},
			want: SpanContext{TraceID: TraceID{High: 0x4bf92f3577b34da6, Low: 0xa3ce929d0e0e4736}, SpanID: 0x00f067aa0ba902b7, Sampled: SampledYes, TraceState: "congo=t61rcWkgMzE"}, ok: true},
		{name: "not sampled", kv: []string{"traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"},
			want: SpanContext{TraceID: TraceID{High: 0x4bf92f3577b34da6, Low: 0xa3ce929d0e0e4736}, SpanID: 0x00f067aa0ba902b7, Sampled: SampledNo}, ok: true},
		{name: "future version longer", kv: []string{"traceparent", "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what"},
			want: SpanContext{TraceID: TraceID{High: 0x4bf92f3577b34da6, Low: 0xa3ce929d0e0e4736}, SpanID: 0x00f067aa0ba902b7, Sampled: SampledYes}, ok: true},
		{name: "version 00 longer", kv: []string{"traceparent", good + "-x"}, err: true},
		{name: "version ff", kv: []string{"traceparent", "ff" + good[2:]}, err: true},
		{name: "upper case", kv: []string{"traceparent", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"}, err: true},
		{name: "zero trace", kv: []string{"traceparent", "00-00000000000000000000000000000000-00f067aa0ba902b7-01"}, err: true},
		{name: "zero span", kv: []string{"traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"}, err: true},
		{name: "short", kv: []string{"traceparent", good[:54]}, err: true},
		{name: "bad separator", kv: []string{"traceparent", "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}, err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ok, err := ParseW3C(streamtest.NewHeaders(tc.kv...))
			if (err != nil) != tc.err || ok != tc.ok {
				t.Fatalf("ok %v err %v, want ok %v err %v", ok, err, tc.ok, tc.err)
			}
			if !tc.err && c != tc.want {
				t.Errorf("got %+v, want %+v", c, tc.want)
			}
		})
	}
}

// TestInjectRoundTrip: what a proxy writes, the next one reads back.
func TestInjectRoundTrip(t *testing.T) {
	for _, c := range []SpanContext{
		{TraceID: TraceID{High: 1, Low: 2}, SpanID: 3, ParentID: 4, Sampled: SampledYes},
		{TraceID: TraceID{Low: 0xabc}, SpanID: 0xdef, Sampled: SampledNo},
	} {
		h := streamtest.NewHeaders("x-b3-parentspanid", "stale")
		InjectB3(h, c)
		got, ok, err := ParseB3(h)
		if !ok || err != nil || got != c {
			t.Errorf("B3: %+v -> %v -> %+v (%v, %v)", c, h.Fields, got, ok, err)
		}
		InjectW3C(h, c)
		got, ok, err = ParseW3C(h)
		want := c
		want.ParentID = 0 // W3C does not carry it
		if !ok || err != nil || got != want {
			t.Errorf("W3C: %+v -> %v -> %+v (%v, %v)", c, h.Fields, got, ok, err)
		}
	}
}

func FuzzParseB3(f *testing.F) {
	f.Add("463ac35c9f6413ad48485a3953bb6124", "a2fb4a1d1a96d312", "1", "80f198ee56343ba864fe8b2a57d3eff7-e457b5a2e4d86bd1-1-05e3ac9a4f6e3b90")
	f.Add("", "", "", "d")
	f.Fuzz(func(t *testing.T, tid, sid, sampled, single string) {
		var kv []string
		for _, p := range [][2]string{{"x-b3-traceid", tid}, {"x-b3-spanid", sid}, {"x-b3-sampled", sampled}, {"b3", single}} {
			if p[1] != "" {
				kv = append(kv, p[0], p[1])
			}
		}
		c, ok, err := ParseB3(streamtest.NewHeaders(kv...))
		if ok && (err != nil || !c.Valid()) {
			t.Fatalf("ok with an invalid context %+v (%v)", c, err)
		}
		if ok {
			h := streamtest.NewHeaders()
			InjectB3(h, c)
			back, ok2, err2 := ParseB3(h)
			c.Debug = false
			if c.Sampled == SampledUnset {
				c.Sampled = SampledNo
			}
			if !ok2 || err2 != nil || back.TraceID != c.TraceID || back.SpanID != c.SpanID || back.ParentID != c.ParentID {
				t.Fatalf("round trip %+v -> %+v", c, back)
			}
		}
	})
}

func FuzzParseW3C(f *testing.F) {
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	f.Add("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x")
	f.Fuzz(func(t *testing.T, v string) {
		c, ok, err := ParseW3C(streamtest.NewHeaders("traceparent", v))
		if ok && (err != nil || !c.Valid()) {
			t.Fatalf("ok with an invalid context %+v (%v)", c, err)
		}
		if ok {
			h := streamtest.NewHeaders()
			InjectW3C(h, c)
			back, ok2, _ := ParseW3C(h)
			if !ok2 || back.TraceID != c.TraceID || back.SpanID != c.SpanID || back.Sampled != c.Sampled {
				t.Fatalf("round trip %+v -> %+v", c, back)
			}
		}
	})
}
