package hcm

// gRPC's side of the HCM's local replies: a request is gRPC by its
// content-type, and what the proxy answers it itself (a route's 404, an
// upstream failure, a filter's 401/403/abort) takes gRPC's trailers-only
// form (HTTP 200, grpc-status and grpc-message in the head), as Envoy's
// local replies do; grpc-timeout bounds the upstream exchange.

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/straitmesh/strait/internal/proxy/forward"
)

// streamLocalReply answers without an upstream; a gRPC request gets it in
// gRPC's trailers-only form (HTTP 200, the status in grpc-status), as
// Envoy's local replies do.
func streamLocalReply(w http.ResponseWriter, r *http.Request, code int, flags, body string) {
	if !forward.IsGRPC(r.Header) {
		localReply(w, code, flags, body)
		return
	}
	grpcLocalReply(w, grpcStatusForHTTP(code), flags, body)
}

// grpcDeadlineExceeded is gRPC's DEADLINE_EXCEEDED status code.
const grpcDeadlineExceeded = 4

// grpcLocalReply answers a gRPC request in trailers-only form with status.
func grpcLocalReply(w http.ResponseWriter, status uint32, flags, body string) {
	h := w.Header()
	if flags != "" {
		h.Set("X-Strait-Response-Flags", flags)
		if flags == "UO" {
			h.Set("X-Envoy-Overloaded", "true")
		}
	}
	h.Set("Content-Type", "application/grpc")
	h.Set("Grpc-Status", strconv.Itoa(int(status)))
	if body != "" {
		h.Set("Grpc-Message", grpcPercentEncode(body))
	}
	w.WriteHeader(http.StatusOK)
}

// grpcStatusForHTTP maps an HTTP status to a gRPC status code (gRPC's
// http-grpc-status-mapping, which Envoy's Grpc::Utility::httpToGrpcStatus
// follows).
func grpcStatusForHTTP(code int) uint32 {
	switch code {
	case 200:
		return 0 // OK
	case 400:
		return 13 // INTERNAL
	case 401:
		return 16 // UNAUTHENTICATED
	case 403:
		return 7 // PERMISSION_DENIED
	case 404:
		return 12 // UNIMPLEMENTED
	case 429, 502, 503, 504:
		return 14 // UNAVAILABLE
	}
	return 2 // UNKNOWN
}

// grpcPercentEncode encodes a grpc-message value: bytes outside printable
// ASCII, and '%', become %XX.
func grpcPercentEncode(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e || c == '%' {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xf])
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}
