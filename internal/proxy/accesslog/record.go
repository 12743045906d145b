// Package accesslog is strait-proxy's file access logger
// (envoy.access_loggers.file): Envoy's format strings (text or JSON) with
// the command operators of Istio's default formats, written to a file or
// /dev/stdout through a buffer flushed every second, as Envoy's file
// logger does. The HTTP connection manager logs one Record per request,
// tcp_proxy one per connection.
package accesslog

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"strconv"
	"time"

	"github.com/straitmesh/strait/internal/proxy/istiometrics"
	"github.com/straitmesh/strait/internal/proxy/tlsconf"
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
// A zero field is one Envoy has no value for (it prints "-").
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
	BytesReceived, BytesSent int64
	// UpstreamHost is the endpoint picked ("ip:port").
	UpstreamHost string
	// UpstreamCluster is the cluster's name, set once the cluster is found
	// (an unknown cluster, NC, has none, as in Envoy); UpstreamStatName is
	// its observability name (alt_stat_name; empty: the name).
	UpstreamCluster, UpstreamStatName string
	// UpstreamService is the cluster's destination service from its
	// istio.services metadata, nil when it names none (istio.stats reads
	// it through httpfilter.StreamInfo).
	UpstreamService *istiometrics.Service
	// UpstreamPeerPrincipal and UpstreamLocalPrincipal are the SPIFFE
	// identities of the upstream connection's TLS peer and of the proxy
	// on it, "" when unknown (istio.stats' principals on the source
	// reporter).
	UpstreamPeerPrincipal, UpstreamLocalPrincipal string
	// UpstreamLocal and UpstreamRemote are the addresses of the upstream
	// connection the request (or TCP stream) went over; zero when none
	// was made.
	UpstreamLocal, UpstreamRemote netip.AddrPort
	// DownstreamLocal is the connection's (original) destination;
	// DownstreamRemote its peer, or for HTTP the HCM's downstream remote
	// address (port 0 when it came from x-forwarded-for).
	DownstreamLocal  netip.AddrPort
	DownstreamRemote netip.AddrPort
	// Conn is the downstream connection (nil: unknown): its socket
	// addresses, SNI and TLS state.
	Conn      *Conn
	RouteName string
}

// Conn is what the log reads of a downstream connection. Computed once
// per connection (ConnOf); read-only after.
type Conn struct {
	// DirectLocal and DirectRemote are the socket's own addresses.
	DirectLocal, DirectRemote netip.AddrPort
	// SNI is the server name the client asked for: from the TLS handshake
	// when the proxy terminated TLS, else from the tls_inspector.
	SNI string
	// TLS is the terminated TLS connection's state (nil: plaintext, or
	// TLS passed through).
	TLS *tls.ConnectionState
}

// ServerNamer is a connection that knows the SNI of a ClientHello it
// read without terminating TLS (the listener's tls_inspector).
type ServerNamer interface {
	RequestedServerName() string
}

// ConnOf describes c: its TLS state is that of the connection the proxy
// terminated under c (tlsconf.Terminated), its SNI that connection's or
// else a ServerNamer's among tlsconf.Layers(c).
func ConnOf(c net.Conn) *Conn {
	out := &Conn{DirectLocal: addrPortOf(c.LocalAddr()), DirectRemote: addrPortOf(c.RemoteAddr())}
	if tc := tlsconf.Terminated(c); tc != nil {
		st := tc.ConnectionState()
		out.TLS = &st
		out.SNI = st.ServerName
	}
	for l := range tlsconf.Layers(c) {
		if sn, ok := l.(ServerNamer); ok && out.SNI == "" {
			out.SNI = sn.RequestedServerName()
		}
	}
	return out
}

// addrPortOf is a's address and port, IPv4-mapped addresses unmapped;
// zero when a is not an IP address.
func addrPortOf(a net.Addr) netip.AddrPort {
	var ap netip.AddrPort
	switch a := a.(type) {
	case nil:
		return ap
	case *net.TCPAddr:
		ap = a.AddrPort()
	default:
		ap, _ = netip.ParseAddrPort(a.String())
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// AddrPortOf is addrPortOf for the proxy's filters (the upstream
// connection's addresses).
func AddrPortOf(a net.Addr) netip.AddrPort { return addrPortOf(a) }

// TraceUpstream returns ctx with a trace that records in rec the
// addresses and TLS identities (for istio.stats) of the upstream
// connection a request is sent on (each attempt's; the last one's stay).
// The transports call GotConn on the goroutine of the round trip, before
// it returns.
func TraceUpstream(ctx context.Context, rec *Record) context.Context {
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(ci httptrace.GotConnInfo) {
		rec.UpstreamLocal, rec.UpstreamRemote = AddrPortOf(ci.Conn.LocalAddr()), AddrPortOf(ci.Conn.RemoteAddr())
		rec.UpstreamPeerPrincipal, rec.UpstreamLocalPrincipal = tlsconf.UpstreamPrincipals(ci.Conn)
	}})
}

// header looks a header up, mapping the pseudo-headers to the record's
// fields: a request's :method, :path and :authority, a response's
// :status. A header present with an empty value is found (Envoy prints
// it empty, not "-").
func (r *Record) header(h Headers, name string, request bool) (string, bool) {
	if len(name) > 0 && name[0] == ':' {
		switch {
		case request && name == ":method":
			return r.Method, r.Method != ""
		case request && name == ":path":
			return r.Path, r.Path != ""
		case request && name == ":authority":
			return r.Authority, r.Authority != ""
		case !request && name == ":status" && r.Code != 0:
			return strconv.Itoa(r.Code), true
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
