package httpfilter

// The HTTP filter interface: what every filter of an HCM's http_filters
// list implements, whatever the codec (HTTP/1.1, HTTP/2, upgrades). The
// HCM builds one immutable Filter per list entry, in list order, and runs
// them on each request as Envoy's filter manager does: decoder callbacks
// (request head, body, trailers) in list order, encoder callbacks
// (response head, body, trailers) in reverse order, Complete for every
// filter once the stream ends. A filter that answers a request (a JWT 401,
// an RBAC 403, a fault abort, a CORS preflight) calls Stream.LocalReply
// and returns Stop: the filters after it and the router do not run, and
// the local reply passes the encoder callbacks of the filters before it.
//
// A Filter is shared by every stream of every connection of its HCM and
// must be safe for concurrent use; what it keeps per request lives in the
// Stream (Metadata, Scratch). The callbacks run on the stream's goroutine,
// one after the other, and must not keep the Stream or any header value
// after they return (nor a body chunk). The optional callbacks are separate interfaces
// (BodyDecoder, ResponseEncoder, …) so that a filter that does not need
// them costs nothing on that part of the exchange.

import (
	"crypto/x509"
	"net/netip"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/straitmesh/strait/internal/proxy/istiometrics"
	"github.com/straitmesh/strait/internal/proxy/stats"
)

// Status is what a filter callback tells the chain.
type Status uint8

const (
	// Continue runs the next filter.
	Continue Status = iota
	// Stop ends the chain here: the filter has answered the request with
	// Stream.LocalReply (or reset it); no later filter and no router run.
	Stop
)

// Filter is one configured HTTP filter. DecodeHeaders is the only callback
// every filter has; the others are the optional interfaces below.
type Filter interface {
	// Name is the filter's name as Envoy registers it
	// ("envoy.filters.http.rbac").
	Name() string
	// DecodeHeaders sees the request head, after path normalization and
	// the HCM's own header handling (x-forwarded-*, XFCC), before the
	// route's upstream exchange. It may edit the request headers (the
	// route is chosen again when it does: Stream.Route), write dynamic
	// metadata, or answer.
	DecodeHeaders(s Stream) Status
}

// BodyDecoder is a filter that sees the request body. When a request has
// a body and some filter of the chain decodes it (DecodesBody), the HCM
// reads the body whole before the router sends the request on, as Envoy
// does behind a filter that stops with StopIterationAndBuffer: after the
// DecodeHeaders of every filter (the router's included), each chunk read
// passes DecodeData of the decoders in list order as it arrives, end
// marking the last (a request without a body gets no call). As in
// Envoy, the last chunk is empty when the codec learns of the body's end
// after its data (an HTTP/1.1 chunked body's last chunk, an HTTP/2
// stream's END_STREAM); a body that ends with trailers (HTTP/2) gets no
// end, but DecodeTrailers. A decoder that answers (Stream.LocalReply, then Stop)
// ends the request there: the later decoders and the router do not run
// and nothing goes upstream. A body past the buffer limit is answered
// 413, as Envoy's filter manager answers a decoder buffer that overflows
// (ActiveStreamDecoderFilter::requestDataTooLarge in
// source/common/http/filter_manager.cc). The router then sends the
// buffered body with its content-length, and a retry sends it again.
//
// chunk is the HCM's buffer: a decoder must not keep it or change it
// after DecodeData returns.
type BodyDecoder interface {
	Filter
	// DecodesBody is asked once the DecodeHeaders of every filter ran, of
	// a request with a body: whether the filter reads this request's
	// body (false: no DecodeData nor DecodeTrailers for it), and the
	// buffer limit it sets, in bytes (0: it sets none). The last decoder
	// in list order that sets one decides the request's limit, as each
	// call of Envoy's setDecoderBufferLimit replaces the last; without
	// one the limit is DefaultBodyLimit.
	DecodesBody(s Stream) (limit int64, decodes bool)
	DecodeData(s Stream, chunk []byte, end bool) Status
}

// DefaultBodyLimit is the request body the HCM buffers for body decoders
// that set no limit: Envoy's default per_connection_buffer_limit_bytes,
// 1 MiB, which bounds a decoder's buffer when no filter sets another
// (strait-proxy refuses the listener field, so the default holds).
const DefaultBodyLimit = 1 << 20

// TrailersDecoder is a BodyDecoder that sees the request trailers, after
// the body's last DecodeData (HTTP/2 only: HTTP/1.1 trailers are dropped
// by the codec, forward/trailers.go). It is called only on requests whose
// body it decodes.
type TrailersDecoder interface {
	BodyDecoder
	DecodeTrailers(s Stream, trailers HeaderMap) Status
}

// ResponseEncoder is a filter that sees the response head, upstream's or a
// local reply's, before it is written downstream (in reverse list order).
// It may edit the headers; it cannot answer any more.
type ResponseEncoder interface {
	EncodeHeaders(s Stream, status int, headers HeaderMap)
}

// TrailersEncoder is a filter that sees the response trailers.
type TrailersEncoder interface {
	EncodeTrailers(s Stream, trailers HeaderMap)
}

// Completer is a filter told when the stream has ended, answered, reset or
// failed, with what happened (stats, access logs, traces).
type Completer interface {
	Complete(s Stream, info *StreamInfo)
}

// Terminal is a filter that ends the chain by sending the request on: the
// router. As Envoy checks (FilterChainUtility), the last entry of
// http_filters must be a terminal filter and no other entry may be one.
type Terminal interface {
	Filter
	Terminal()
}

// HeaderMap is a read-write view of a header block. Names are
// case-insensitive; pseudo-headers are not in it (Stream has them).
type HeaderMap interface {
	Headers
	// Range calls f for each field in order until it returns false.
	Range(f func(name, value string) bool)
	Set(name, value string)
	Add(name, value string)
	Del(name string)
}

// ByteSizer is a HeaderMap that counts its own size as Envoy's
// HeaderMap::byteSize does (the names' and values' lengths) without a
// callback per field; istio.stats uses it when the codec's map has it.
type ByteSizer interface {
	ByteSize() int64
}

// StaticSetter is a HeaderMap that can set a field whose name and value
// are never modified and outlive the stream (a filter's own, made when
// it was built) without copying them: istio.metadata_exchange's
// ~300-byte peer metadata, set on every request or response.
type StaticSetter interface {
	SetStatic(name, value string)
}

// SetStatic sets name to value in h (replacing its fields of that
// name), without copying them when h is a StaticSetter. name and value
// must never change and must outlive the stream.
func SetStatic(h HeaderMap, name, value string) {
	if s, ok := h.(StaticSetter); ok {
		s.SetStatic(name, value)
		return
	}
	h.Set(name, value)
}

// Stream is one request as its filters see it. The HCM implements it once
// for every codec; an implementation is reused for the next request of a
// connection, so a filter must not keep it.
type Stream interface {
	// The request's pseudo-headers, after path normalization: Method,
	// Host (:authority or Host), Path (without the query) and Query
	// (without its '?', empty when none); Scheme is the scheme the
	// request arrived with.
	Method() string
	Host() string
	Path() string
	Query() string
	Scheme() string
	// Protocol is "HTTP/1.1" or "HTTP/2" (the downstream codec).
	Protocol() string
	// RequestHeaders are the request's headers, as the upstream will get
	// them (hop-by-hop fields excluded).
	RequestHeaders() HeaderMap
	// Route is the route the request matches now, nil when none does;
	// it is chosen on the first call and again after a filter edited
	// the request headers or called ClearRoute.
	Route() Route
	ClearRoute()
	// Connection describes the downstream connection (addresses, TLS).
	Connection() *Connection
	// RemoteAddr is the downstream client's address as the HCM's
	// use_remote_address / xff_num_trusted_hops settings read it.
	RemoteAddr() netip.Addr
	// Metadata is the request's dynamic metadata (never nil).
	Metadata() *Metadata
	// Wait blocks for d, or until the stream is reset or its client
	// goes away (false).
	Wait(d time.Duration) bool
	// LocalReply answers the request with status and body (text/plain),
	// in gRPC's trailers-only form when the request is gRPC and
	// grpcStatus >= 0 (-1: map status as Envoy does). flags are Envoy's
	// response flags for the access log ("" none); headers, if not nil,
	// adds response fields. The filter returns Stop after it.
	LocalReply(status int, grpcStatus int, body, flags string, headers func(set func(name, value string)))
	// AddResponseHeader adds a field to the response that will be
	// written, upstream's or a local reply's.
	AddResponseHeader(name, value string)
	// AddResponseFlag records one of Envoy's response flags ("DI") for
	// the request: it leads the flags of the response written, upstream's
	// or a local reply's ("DI,UF"), and the access log's.
	AddResponseFlag(flag string)
	// Scratch is per-stream storage for one filter, indexed by the
	// filter's position in the chain (Chain gives it), reset between
	// requests.
	Scratch(i int) *any
}

// Route is what a filter reads of the matched route: its name, the
// cluster it sends to, and its typed_per_filter_config for this filter
// (the virtual host's merged under the route's, compiled by the filter's
// PerRouteParser; nil when neither sets one).
type Route interface {
	Name() string
	Cluster() string
	PerFilterConfig(filter string) any
	// Decorator is the route's decorator: the operation that names the
	// tracing span ("" none), and whether it is propagated upstream.
	Decorator() (operation string, propagate bool)
}

// Connection is the downstream connection as filters see it.
type Connection struct {
	// Source is the peer's address; Destination the connection's
	// (original) destination.
	Source, Destination netip.AddrPort
	// SNI is the server name of the TLS ClientHello; Secure is set when
	// the proxy terminated TLS; PeerCertificate is the client's
	// certificate (nil: none), and the rest is read from it.
	SNI             string
	Secure          bool
	PeerCertificate *x509.Certificate
	URISANs         []string
	DNSSANs         []string
	Subject         string
	// LocalURISANs are the URI SANs of the certificate the proxy
	// presented on the connection (its own SPIFFE identity), nil when it
	// terminated no TLS.
	LocalURISANs []string
}

// StreamInfo is what happened to a stream, given to Completers.
type StreamInfo struct {
	Start      time.Time
	Duration   time.Duration // until the last byte of the response
	Status     int           // the response status (0: none was sent)
	GRPCStatus int           // -1: not gRPC or no status
	Flags      string        // Envoy's response flags ("UF,URX"), "" none
	Cluster    string        // the upstream cluster, "" none
	// Service is the cluster's destination service from its
	// istio.services metadata, nil when it names none.
	Service      *istiometrics.Service
	UpstreamHost netip.AddrPort
	BytesIn      int64 // request body bytes received
	BytesOut     int64 // response body bytes sent
	// UpstreamPeerPrincipal and UpstreamLocalPrincipal are the SPIFFE
	// identities of the upstream connection's TLS peer and of the proxy
	// on it ("" unknown): a source reporter's destination_principal and
	// source_principal.
	UpstreamPeerPrincipal, UpstreamLocalPrincipal string
	// UpstreamHeaders are the response headers as upstream sent them
	// (before the encoders' edits), nil for a local reply.
	UpstreamHeaders Headers
}

// Factory builds a Filter from its entry in http_filters. typed is the
// entry's typed_config (nil when absent); a field the filter does not
// implement is an error naming it.
type Factory interface {
	// Names are the filter names and type URLs it is registered under.
	Names() []string
	Build(typed *anypb.Any, ctx BuildContext) (Filter, error)
}

// PerRouteParser is a Factory whose filter takes per-route config
// (typed_per_filter_config). Parse compiles one; Merge combines a
// virtual host's (outer) and a route's (inner) compiled configs, as the
// filter's Envoy docs say (most filters: the inner replaces the outer).
type PerRouteParser interface {
	ParsePerRoute(typed *anypb.Any) (any, error)
	MergePerRoute(outer, inner any) any
}

// DisabledConfig is the per-route config of a filter that a route's (or
// its virtual host's) typed_per_filter_config turns off with Envoy's
// envoy.config.route.v3.FilterConfig{disabled: true}: the chain skips the
// filter on that route.
type DisabledConfig struct{}

// BuildContext is what a Factory may use: where stats go and the proxy's
// node (for filters that read its metadata, as Istio's do).
type BuildContext struct {
	// StatPrefix is "http.<stat_prefix>." of the HCM; Stats the proxy's
	// store (nil: no stats).
	StatPrefix string
	Stats      *stats.Store
	// Node is the proxy's bootstrap node (id, cluster, metadata); nil
	// when unknown.
	Node *corev3.Node
	// Direction is the listener's traffic_direction (INBOUND for a
	// sidecar's inbound listeners, OUTBOUND for its outbound ones,
	// UNSPECIFIED otherwise): Istio's filters decide on it which side of
	// the exchange they are (istio.stats' reporter).
	Direction corev3.TrafficDirection
}
