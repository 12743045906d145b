package tracing

import (
	"errors"
	"strings"
)

// B3 header names (openzipkin/b3-propagation), as Envoy's Zipkin tracer
// reads and writes them.
const (
	headerB3TraceID      = "x-b3-traceid"
	headerB3SpanID       = "x-b3-spanid"
	headerB3ParentSpanID = "x-b3-parentspanid"
	headerB3Sampled      = "x-b3-sampled"
	headerB3Flags        = "x-b3-flags"
	headerB3Single       = "b3"
)

// Headers is how the parsers read a request's fields (httpfilter.Headers).
type Headers interface {
	Lookup(name string) (string, bool)
}

// errInvalidContext is a trace context header that is present and
// malformed: Envoy's Zipkin tracer then traces nothing for the request
// (a NullSpan), and so does strait.
var errInvalidContext = errors.New("invalid trace context")

// ParseB3 reads the B3 context of h: the multi-header form
// (x-b3-traceid, x-b3-spanid, x-b3-parentspanid, x-b3-sampled,
// x-b3-flags) first, as Envoy's ZipkinSpanContextExtractor does, then the
// single b3 header. ok is false when h carries no ids (the returned
// context may still hold a sampling flag: "b3: 0", "x-b3-sampled: 1");
// err is set when a header is present and malformed.
func ParseB3(h Headers) (c SpanContext, ok bool, err error) {
	c.Sampled = b3Sampled(h)
	if tid, has := h.Lookup(headerB3TraceID); has {
		sid, hasSpan := h.Lookup(headerB3SpanID)
		if !hasSpan {
			return c, false, errInvalidContext
		}
		var okT, okS bool
		c.TraceID, okT = parseTraceID(tid)
		c.SpanID, okS = parseHex64(sid)
		if !okT || !okS || !c.Valid() {
			return c, false, errInvalidContext
		}
		if p, hasParent := h.Lookup(headerB3ParentSpanID); hasParent {
			var okP bool
			if c.ParentID, okP = parseHex64(p); !okP {
				return c, false, errInvalidContext
			}
		}
		if f, has := h.Lookup(headerB3Flags); has && f == "1" {
			c.Debug, c.Sampled = true, SampledYes
		}
		return c, true, nil
	}
	if v, has := h.Lookup(headerB3Single); has {
		return parseB3Single(v)
	}
	return c, false, nil
}

// b3Sampled reads x-b3-sampled: "1" or "true" is sampled, anything else
// not (Envoy's reading); absent is unset.
func b3Sampled(h Headers) Sampled {
	v, ok := h.Lookup(headerB3Sampled)
	if !ok {
		return SampledUnset
	}
	if v == "1" || v == "true" {
		return SampledYes
	}
	return SampledNo
}

// parseB3Single reads the single b3 header:
// {traceid}-{spanid}[-{sampling}[-{parentspanid}]], or a bare sampling
// state "0", "1" or "d".
func parseB3Single(v string) (SpanContext, bool, error) {
	var c SpanContext
	if len(v) == 1 {
		s, ok := b3SamplingState(v, &c)
		c.Sampled = s
		if !ok {
			return c, false, errInvalidContext
		}
		return c, false, nil
	}
	parts := strings.SplitN(v, "-", 5)
	if len(parts) < 2 || len(parts) > 4 {
		return c, false, errInvalidContext
	}
	var okT, okS bool
	c.TraceID, okT = parseTraceID(parts[0])
	if len(parts[1]) != 16 {
		return c, false, errInvalidContext
	}
	c.SpanID, okS = parseHex64(parts[1])
	if !okT || !okS || !c.Valid() {
		return c, false, errInvalidContext
	}
	if len(parts) >= 3 {
		s, ok := b3SamplingState(parts[2], &c)
		if !ok {
			return c, false, errInvalidContext
		}
		c.Sampled = s
	}
	if len(parts) == 4 {
		if len(parts[3]) != 16 {
			return c, false, errInvalidContext
		}
		var okP bool
		if c.ParentID, okP = parseHex64(parts[3]); !okP || c.ParentID == 0 {
			return c, false, errInvalidContext
		}
	}
	return c, true, nil
}

// b3SamplingState reads "0", "1" or "d" (debug, which is sampled).
func b3SamplingState(s string, c *SpanContext) (Sampled, bool) {
	switch s {
	case "0":
		return SampledNo, true
	case "1":
		return SampledYes, true
	case "d":
		c.Debug = true
		return SampledYes, true
	}
	return SampledUnset, false
}

// HeaderSetter is where injection writes (httpfilter.HeaderMap).
type HeaderSetter interface {
	Set(name, value string)
	Del(name string)
}

// InjectB3 writes c as B3 multi-headers, as Envoy's Zipkin span does for
// the upstream request: x-b3-traceid (32 hex digits for a 128-bit id),
// x-b3-spanid, x-b3-parentspanid when c has a parent, and x-b3-sampled
// "1" or "0".
func InjectB3(h HeaderSetter, c SpanContext) {
	var buf [32]byte
	h.Set(headerB3TraceID, string(c.TraceID.AppendHex(buf[:0], true)))
	h.Set(headerB3SpanID, hex64(c.SpanID))
	if c.ParentID != 0 {
		h.Set(headerB3ParentSpanID, hex64(c.ParentID))
	} else {
		h.Del(headerB3ParentSpanID)
	}
	if c.Sampled == SampledYes {
		h.Set(headerB3Sampled, "1")
	} else {
		h.Set(headerB3Sampled, "0")
	}
}
