package tracing

import "math/rand/v2"

// TraceID is a 128-bit trace id; High is zero for a 64-bit one.
type TraceID struct{ High, Low uint64 }

// IsZero reports whether the id is all zeros (invalid in B3 and W3C).
func (t TraceID) IsZero() bool { return t.High == 0 && t.Low == 0 }

// AppendHex appends the id in lower-case hex: 32 digits, or 16 when
// short and High is zero (a 64-bit B3 trace id).
func (t TraceID) AppendHex(b []byte, short bool) []byte {
	if !(short && t.High == 0) {
		b = appendHex64(b, t.High)
	}
	return appendHex64(b, t.Low)
}

// Sampled is a trace context's sampling flag: unset (the proxy decides),
// yes or no.
type Sampled uint8

// The sampling flag's states.
const (
	SampledUnset Sampled = iota
	SampledYes
	SampledNo
)

// SpanContext is a trace context read from, or written to, a request's
// headers.
type SpanContext struct {
	TraceID TraceID
	SpanID  uint64
	// ParentID is the parent of SpanID, 0 for none (B3's
	// x-b3-parentspanid; W3C does not carry it).
	ParentID uint64
	Sampled  Sampled
	// Debug is B3's x-b3-flags: 1 (or the single header's "d"): sampled,
	// and the collector is asked to keep the trace.
	Debug bool
	// TraceState is W3C's tracestate, passed on unchanged.
	TraceState string
}

// Valid reports whether c names a span (a trace id and a span id).
func (c SpanContext) Valid() bool { return !c.TraceID.IsZero() && c.SpanID != 0 }

// newID draws a non-zero random 64-bit id.
func newID() uint64 {
	for {
		if id := rand.Uint64(); id != 0 {
			return id
		}
	}
}

// newTraceID draws a new trace id, 128 bits when long.
func newTraceID(long bool) TraceID {
	t := TraceID{Low: newID()}
	if long {
		t.High = rand.Uint64()
	}
	return t
}

const hexDigits = "0123456789abcdef"

func appendHex64(b []byte, v uint64) []byte {
	for s := 60; s >= 0; s -= 4 {
		b = append(b, hexDigits[(v>>uint(s))&0xf])
	}
	return b
}

// hex64 is v as 16 lower-case hex digits.
func hex64(v uint64) string { return string(appendHex64(make([]byte, 0, 16), v)) }

// parseHex64 reads 1 to 16 hex digits (either case).
func parseHex64(s string) (uint64, bool) {
	if len(s) == 0 || len(s) > 16 {
		return 0, false
	}
	var v uint64
	for i := 0; i < len(s); i++ {
		d, ok := hexVal(s[i])
		if !ok {
			return 0, false
		}
		v = v<<4 | uint64(d)
	}
	return v, true
}

// parseTraceID reads a 16- or 32-digit hex trace id.
func parseTraceID(s string) (TraceID, bool) {
	switch len(s) {
	case 16:
		lo, ok := parseHex64(s)
		return TraceID{Low: lo}, ok
	case 32:
		hi, ok1 := parseHex64(s[:16])
		lo, ok2 := parseHex64(s[16:])
		return TraceID{High: hi, Low: lo}, ok1 && ok2
	}
	return TraceID{}, false
}

func hexVal(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
