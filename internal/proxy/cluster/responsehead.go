package cluster

import (
	"errors"
	"net/http"
	"strings"
)

// An upstream response head is bounded as Envoy bounds it: at most
// MaxResponseHeaders fields (the cluster's max_headers_count, default
// 100; strait refuses others) and MaxResponseHeadBytes of names and
// values (max_response_headers_kb, default 60). The strait HTTP/1.1 codec
// applies them while it parses (package http1), the HTTP/2 pool's client
// is given them here, and CheckResponseHead applies them exactly to what
// it returns.
const (
	MaxResponseHeaders   = 100
	MaxResponseHeadBytes = 60 << 10
)

// ErrResponseHeadTooLarge is an upstream response head past the limits:
// a protocol error (Envoy answers 502 with response flag UPE).
var ErrResponseHeadTooLarge = errors.New("upstream response head too large")

// ErrMalformedResponse is an upstream HTTP/1.1 response that breaks the
// protocol (a head the codec refuses, a 101 to a request that asked for no
// upgrade, too many 1xx responses): Envoy answers 502 with response flag
// UPE.
var ErrMalformedResponse = errors.New("malformed upstream response")

// h2ResponseHeaderListSize is the SETTINGS_MAX_HEADER_LIST_SIZE the h2
// pool advertises: RFC 9113 counts 32 bytes per field on top of its name
// and value, so a head within both limits fits.
const h2ResponseHeaderListSize = MaxResponseHeadBytes + 32*(MaxResponseHeaders+1)

// CheckResponseHead returns ErrResponseHeadTooLarge for a response whose
// head is past the limits (Envoy's count and byteSize: each field's name
// and value, and the status).
func CheckResponseHead(resp *http.Response) error {
	if n, size := HeadSize(resp.Header); n > MaxResponseHeaders || size > MaxResponseHeadBytes {
		return ErrResponseHeadTooLarge
	}
	return nil
}

// HeadSize counts h as Envoy counts a header map (HeaderMap::size and
// byteSize): a field per value of a repeated name, its size the name's
// and the value's length. The hcm applies it to request heads too.
func HeadSize(h http.Header) (fields, bytes int) {
	for k, vv := range h {
		fields += len(vv)
		for _, v := range vv {
			bytes += len(k) + len(v)
		}
	}
	return fields, bytes
}

// IsResponseHeadTooLarge reports whether a round trip failed on a
// response head past the limits: ErrResponseHeadTooLarge, or x/net/http2's
// own error for it, which it does not export ("response header list
// larger than advertised limit").
func IsResponseHeadTooLarge(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrResponseHeadTooLarge) {
		return true
	}
	s := err.Error()
	return strings.Contains(s, "response header list larger than advertised limit")
}
