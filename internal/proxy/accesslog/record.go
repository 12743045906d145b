// Package accesslog is strait-proxy's file access logger
// (envoy.access_loggers.file): Envoy's format strings (text or JSON) with
// the command operators of Istio's default formats, written to a file or
// /dev/stdout through a buffer flushed every second, as Envoy's file
// logger does. The HTTP connection manager logs one Record per request,
// tcp_proxy one per connection.
package accesslog

import (
	"net/http"
	"net/netip"
	"time"
)

// Headers looks up a header by lower-case name; several values are joined
// with ",".
type Headers interface {
	Lookup(name string) (string, bool)
}

// HTTPHeader adapts net/http's header map.
type HTTPHeader http.Header

// Lookup implements Headers.
func (h HTTPHeader) Lookup(name string) (string, bool) {
	vs := http.Header(h).Values(name)
	switch len(vs) {
	case 0:
		return "", false
	case 1:
		return vs[0], true
	}
	out := vs[0]
	for _, v := range vs[1:] {
		out += "," + v
	}
	return out, true
}

// Record is what one request (or TCP connection) leaves in the log.
// Strings may alias connection buffers: format it before they are reused.
type Record struct {
	Start    time.Time
	Duration time.Duration
	// Protocol is "HTTP/1.1", "HTTP/1.0" or "HTTP/2"; empty for TCP.
	Protocol string
	// The request's pseudo-headers: method, path (with the query) and
	// authority (Host).
	Method, Path, Authority string
	Request, Response       Headers // nil: none
	// Code is the response status (0: none was sent).
	Code int
	// Flags are Envoy's response flags ("UF", "NR", "URX,UF"...).
	Flags string
	// Details is the response code details ("via_upstream",
	// "route_not_found"...).
	Details            string
	TerminationDetails string
	TransportFailure   string
	// Body bytes received from and sent to the downstream (HTTP), or all
	// bytes (TCP).
	BytesReceived, BytesSent      int64
	UpstreamHost, UpstreamCluster string
	UpstreamLocal                 string
	DownstreamLocal               netip.AddrPort
	DownstreamRemote              netip.AddrPort
	SNI, RouteName                string
}

// header looks a header up, mapping the HTTP/2 pseudo-headers of a
// request to its fields.
func (r *Record) header(h Headers, name string, request bool) (string, bool) {
	if request && len(name) > 0 && name[0] == ':' {
		switch name {
		case ":method":
			return r.Method, r.Method != ""
		case ":path":
			return r.Path, r.Path != ""
		case ":authority":
			return r.Authority, r.Authority != ""
		}
		return "", false
	}
	if h == nil {
		return "", false
	}
	return h.Lookup(name)
}

// DetailsFor is the response code details Envoy gives a local reply with
// these flags (and "via_upstream" for none).
func DetailsFor(flags string) string {
	switch flags {
	case "":
		return "via_upstream"
	case "NR":
		return "route_not_found"
	case "NC":
		return "cluster_not_found"
	case "UH":
		return "no_healthy_upstream"
	case "UF":
		return "upstream_reset_before_response_started{connection_failure}"
	case "UC":
		return "upstream_reset_before_response_started{connection_termination}"
	case "UT":
		return "upstream_response_timeout"
	case "UO":
		return "upstream_reset_before_response_started{overflow}"
	case "FI":
		return "fault_filter_abort"
	case "DC":
		return "downstream_remote_disconnect"
	case "SI":
		return "stream_idle_timeout"
	case "DPE":
		return "http1.codec_error"
	case "URX":
		return "via_upstream"
	}
	return ""
}
