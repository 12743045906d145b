package tracing

import "math/rand/v2"

// The x-request-id of Envoy's UUID request id extension
// (envoy.extensions.request_id.uuid.v3.UuidRequestIdConfig): a UUID4
// whose version digit (position 14, '4' when fresh) carries the trace
// reason when pack_trace_reason is on, so that every hop of a request
// agrees on the sampling decision made by the first.
const (
	traceBytePosition = 14
	reasonNoTrace     = '4'
	reasonSampled     = '9'
	reasonForced      = 'a'
	reasonClient      = 'b'
	uuidLength        = 36
)

// Reason is why a request is traced (Envoy's Tracing::Reason).
type Reason uint8

// The reasons, as the request id packs them.
const (
	ReasonNone     Reason = iota
	ReasonSampling        // random_sampling
	ReasonForced          // x-envoy-force-trace
	ReasonClient          // x-client-trace-id with client_sampling
)

// Traced reports whether the reason traces the request.
func (r Reason) Traced() bool { return r != ReasonNone }

// NewRequestID returns a random UUID4 ("xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx"),
// as Envoy generates x-request-id.
func NewRequestID() string {
	var b [uuidLength]byte
	return string(AppendRequestID(b[:0]))
}

// AppendRequestID appends a random UUID4 to w, with no allocation when w
// has room: the form the HTTP/1.1 codec writes into a request head. The
// bits come from math/rand/v2's generator (ChaCha8, seeded by the
// runtime from the system's entropy), as Envoy's come from its random
// generator: an id, not a secret.
func AppendRequestID(w []byte) []byte {
	hi, lo := rand.Uint64(), rand.Uint64()
	hi = hi&^(0xf<<12) | 4<<12   // version 4
	lo = lo&^(0xc<<60) | 0x8<<60 // variant 10
	for i, s := 0, 60; s >= 0; i, s = i+1, s-4 {
		if i == 8 || i == 12 {
			w = append(w, '-')
		}
		w = append(w, hexDigits[(hi>>uint(s))&0xf])
	}
	for i, s := 0, 60; s >= 0; i, s = i+1, s-4 {
		if i == 0 || i == 4 {
			w = append(w, '-')
		}
		w = append(w, hexDigits[(lo>>uint(s))&0xf])
	}
	return w
}

// traceReason reads the reason packed in a request id (ReasonNone for
// an id that is not a UUID's length, or carries none).
func traceReason(id string) Reason {
	if len(id) != uuidLength {
		return ReasonNone
	}
	switch id[traceBytePosition] {
	case reasonSampled:
		return ReasonSampling
	case reasonForced:
		return ReasonForced
	case reasonClient:
		return ReasonClient
	}
	return ReasonNone
}

// withTraceReason returns id with r packed in it; an id that is not a
// UUID's length is returned as it is.
func withTraceReason(id string, r Reason) string {
	if len(id) != uuidLength {
		return id
	}
	var c byte
	switch r {
	case ReasonSampling:
		c = reasonSampled
	case ReasonForced:
		c = reasonForced
	case ReasonClient:
		c = reasonClient
	default:
		c = reasonNoTrace
	}
	if id[traceBytePosition] == c {
		return id
	}
	b := []byte(id)
	b[traceBytePosition] = c
	return string(b)
}

// requestIDInteger is Envoy's UUID toInteger: the first 8 hex digits of
// the id; ok is false for an id that does not start with them.
func requestIDInteger(id string) (uint64, bool) {
	if len(id) < 8 {
		return 0, false
	}
	return parseHex64(id[:8])
}
