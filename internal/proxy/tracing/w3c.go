package tracing

// W3C Trace Context header names (https://www.w3.org/TR/trace-context/).
const (
	headerTraceparent = "traceparent"
	headerTracestate  = "tracestate"
)

// ParseW3C reads traceparent (and tracestate) as Envoy's OpenTelemetry
// tracer does: version-traceid-parentid-flags, lower-case hex, version
// 00 exactly 55 characters and a later version at least that long
// (fields after the flags ignored), ff refused, all-zero ids refused.
// ok is false when there is no traceparent; err when it is malformed.
func ParseW3C(h Headers) (c SpanContext, ok bool, err error) {
	v, has := h.Lookup(headerTraceparent)
	if !has {
		return c, false, nil
	}
	const n = 55 // 2+1+32+1+16+1+2
	if len(v) < n || v[2] != '-' || v[35] != '-' || v[52] != '-' {
		return c, false, errInvalidContext
	}
	ver, okV := lowerHex(v[0:2])
	if !okV || ver == 0xff || (ver == 0 && len(v) != n) || (len(v) > n && v[n] != '-') {
		return c, false, errInvalidContext
	}
	hi, ok1 := lowerHex(v[3:19])
	lo, ok2 := lowerHex(v[19:35])
	sid, ok3 := lowerHex(v[36:52])
	flags, ok4 := lowerHex(v[53:55])
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return c, false, errInvalidContext
	}
	c.TraceID, c.SpanID = TraceID{High: hi, Low: lo}, sid
	if !c.Valid() {
		return c, false, errInvalidContext
	}
	c.Sampled = SampledNo
	if flags&1 == 1 {
		c.Sampled = SampledYes
	}
	c.TraceState, _ = h.Lookup(headerTracestate)
	return c, true, nil
}

// lowerHex reads 1 to 16 lower-case hex digits (W3C allows no upper
// case).
func lowerHex(s string) (uint64, bool) {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'F' {
			return 0, false
		}
	}
	return parseHex64(s)
}

// InjectW3C writes c as traceparent (version 00, the sampled flag) and
// tracestate when c carries one.
func InjectW3C(h HeaderSetter, c SpanContext) {
	b := make([]byte, 0, 55)
	b = append(b, "00-"...)
	b = c.TraceID.AppendHex(b, false)
	b = append(b, '-')
	b = appendHex64(b, c.SpanID)
	if c.Sampled == SampledYes {
		b = append(b, "-01"...)
	} else {
		b = append(b, "-00"...)
	}
	h.Set(headerTraceparent, string(b))
	if c.TraceState != "" {
		h.Set(headerTracestate, c.TraceState)
	}
}
