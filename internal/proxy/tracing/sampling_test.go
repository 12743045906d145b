package tracing

import (
	"strings"
	"testing"
)

func TestRequestIDPacking(t *testing.T) {
	id := NewRequestID()
	if len(id) != 36 || id[14] != '4' || strings.Count(id, "-") != 4 {
		t.Fatalf("NewRequestID %q is not a UUID4", id)
	}
	if r := traceReason(id); r != ReasonNone {
		t.Errorf("a fresh id has reason %v", r)
	}
	for _, r := range []Reason{ReasonSampling, ReasonForced, ReasonClient, ReasonNone} {
		if got := traceReason(withTraceReason(id, r)); got != r {
			t.Errorf("packed %v, read %v", r, got)
		}
	}
	if got := withTraceReason("short", ReasonSampling); got != "short" {
		t.Errorf("a non-UUID id was changed: %q", got)
	}
}

// TestDecide follows Envoy's mutateTracingRequestHeader: a reason already
// packed is kept, client and forced tracing come before the random
// draw, overall_sampling caps everything, and the draw is the request
// id's first 8 hex digits mod 10000 (so every hop draws the same).
func TestDecide(t *testing.T) {
	// 0x00000064 = 100: draws 100 of 10000 (1 %).
	const id = "00000064-0000-4000-8000-000000000000"
	for _, tc := range []struct {
		name           string
		s              Sampling
		o              RequestIDOptions
		id             string
		client, forced bool
		want           Reason
		wantByte       byte
	}{
		{name: "random hit", s: Sampling{Random: 101, Overall: 10000}, o: DefaultRequestID, id: id, want: ReasonSampling, wantByte: '9'},
		{name: "random miss", s: Sampling{Random: 100, Overall: 10000}, o: DefaultRequestID, id: id, want: ReasonNone, wantByte: '4'},
		{name: "client", s: Sampling{Client: 10000, Overall: 10000}, o: DefaultRequestID, id: id, client: true, want: ReasonClient, wantByte: 'b'},
		{name: "client sampling 0", s: Sampling{Client: 0, Overall: 10000}, o: DefaultRequestID, id: id, client: true, want: ReasonNone, wantByte: '4'},
		{name: "forced", s: Sampling{Overall: 10000}, o: DefaultRequestID, id: id, forced: true, want: ReasonForced, wantByte: 'a'},
		{name: "overall caps", s: Sampling{Random: 10000, Overall: 100}, o: DefaultRequestID, id: id, want: ReasonNone, wantByte: '4'},
		{name: "packed kept", s: Sampling{Random: 0, Overall: 10000}, o: DefaultRequestID, id: withTraceReason(id, ReasonSampling), want: ReasonSampling, wantByte: '9'},
		{name: "packed but overall caps", s: Sampling{Random: 0, Overall: 0}, o: DefaultRequestID, id: withTraceReason(id, ReasonSampling), want: ReasonNone, wantByte: '4'},
		{name: "no packing", s: Sampling{Random: 10000, Overall: 10000}, o: RequestIDOptions{UseForSampling: true}, id: id, want: ReasonSampling, wantByte: '4'},
		{name: "packed ignored without packing", s: Sampling{Random: 0, Overall: 10000}, o: RequestIDOptions{UseForSampling: true}, id: withTraceReason(id, ReasonSampling), want: ReasonNone, wantByte: '9'},
		{name: "corrupt id", s: DefaultSampling, o: DefaultRequestID, id: "not-hex!", want: ReasonNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, out := tc.s.decide(tc.o, tc.id, tc.client, tc.forced)
			if r != tc.want {
				t.Errorf("reason %v, want %v", r, tc.want)
			}
			if tc.wantByte != 0 && out[14] != tc.wantByte {
				t.Errorf("id %q, want byte 14 %q", out, tc.wantByte)
			}
		})
	}
}

// TestDecideRandomDraw: without use_request_id_for_trace_sampling the
// draw is random, so the same id is sampled about random_sampling of the
// time; with it, always or never.
func TestDecideRandomDraw(t *testing.T) {
	const id = "00000064-0000-4000-8000-000000000000"
	s := Sampling{Random: 5000, Overall: 10000}
	hits := 0
	for range 2000 {
		if r, _ := s.decide(RequestIDOptions{}, id, false, false); r.Traced() {
			hits++
		}
	}
	if hits < 800 || hits > 1200 {
		t.Errorf("random draw at 50 %%: %d of 2000", hits)
	}
	for range 100 {
		if r, _ := s.decide(RequestIDOptions{UseForSampling: true}, id, false, false); !r.Traced() {
			t.Fatal("the id's draw (100) is under 5000 but was not sampled")
		}
	}
}
