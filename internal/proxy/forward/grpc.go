package forward

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// IsGRPC reports whether the request is gRPC (Envoy's
// Grpc::Common::hasGrpcContentType: application/grpc, optionally followed
// by "+format" or ";params"; gRPC-Web is not).
func IsGRPC(h http.Header) bool {
	return GRPCContentType(h.Get("Content-Type"))
}

// GRPCContentType reports whether a content-type is gRPC's.
func GRPCContentType(ct string) bool {
	const g = "application/grpc"
	if !strings.HasPrefix(ct, g) {
		return false
	}
	return len(ct) == len(g) || ct[len(g)] == '+' || ct[len(g)] == ';'
}

// ParseGRPCTimeout parses a grpc-timeout value: at most 8 digits and a unit
// (H, M, S, m, u, n).
func ParseGRPCTimeout(v string) (time.Duration, bool) {
	if len(v) < 2 || len(v) > 9 {
		return 0, false
	}
	n, err := strconv.ParseInt(v[:len(v)-1], 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	var unit time.Duration
	switch v[len(v)-1] {
	case 'H':
		unit = time.Hour
	case 'M':
		unit = time.Minute
	case 'S':
		unit = time.Second
	case 'm':
		unit = time.Millisecond
	case 'u':
		unit = time.Microsecond
	case 'n':
		unit = time.Nanosecond
	default:
		return 0, false
	}
	return time.Duration(n) * unit, true
}
