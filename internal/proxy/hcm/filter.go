// Package hcm is the HTTP connection manager network filter: it serves
// HTTP/1.1 and HTTP/2 (h2 and h2c, h2.go) on downstream connections, routes each
// request with a route table (inline or RDS) and forwards it to a cluster,
// in HTTP/1.1 or HTTP/2 as the cluster says.
//
// The codec is behind Server.ServeConn and the cluster's upstream pool. The
// default is the purpose-built HTTP/1.1 codec in package http1 (h1.go is the
// request path on it, cluster.GetConn/PutConn its upstream pool); HTTP/2
// is package http2/server's connection. The net/http codec (strait-proxy
// --http-codec nethttp) and x/net/http2's server were removed, so that
// every limit and timeout is enforced on one path per protocol.
//
// The files, by what they hold: the HCM's config and field audit
// (filter.go, fields.go), the Server and its connections (server.go,
// drain.go, stats.go, accesslog.go), the limits and timeouts every codec
// shares (stream.go), the filter chain (chain.go), gRPC's local replies
// (grpcreply.go); the HTTP/1.1 path (h1.go: the downstream connection,
// its parking and limits; h1stream.go: its httpfilter.Stream; h1router.go,
// h1reply.go; h1response.go: its side of the upstream exchange;
// upgrade.go: which upgrades upgrade_configs allow) and the HTTP/2 path
// (h2.go: the connection, its settings and the stream's grown stack;
// h2stream.go, h2limits.go; scheme.go: the request's scheme on either).
//
// Below the HCM, each in its own package: the codecs' wire work (http1:
// the HTTP/1.1 codec and idle-connection parking; http2: the HTTP/2 frame
// guard; http2/server: the downstream HTTP/2 connection), what a request's exchange with the upstream shares across codecs
// (forward: the local replies of a failed exchange, retries, the
// http.Request round trip, mirrors, the trailer policy) with package
// router's decisions, the headers written for the next hop before routing
// (fwdheaders: x-forwarded-for and the client's address,
// x-forwarded-client-cert, x-forwarded-proto) and path normalization
// (pathnorm), which both codecs apply. The HTTP/1.1 request's own
// exchange (forward/h1: the head and body written upstream, the retry
// loop, HTTP/1.1 to an HTTP/2 cluster, upgrades and their tunnel) is
// called through h1.Exchange, and calls back through h1.Downstream.
package hcm

import (
	"fmt"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/straitmesh/strait/internal/proxy/accesslog"
	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/filters/http/registry"
	"github.com/straitmesh/strait/internal/proxy/forward"
	"github.com/straitmesh/strait/internal/proxy/fwdheaders"
	"github.com/straitmesh/strait/internal/proxy/httpfilter"
	"github.com/straitmesh/strait/internal/proxy/pathnorm"
	"github.com/straitmesh/strait/internal/proxy/route"
	"github.com/straitmesh/strait/internal/proxy/stats"
	"github.com/straitmesh/strait/internal/proxy/tracing"
)

// Name is the network filter name.
const Name = "envoy.filters.network.http_connection_manager"

const routerFilter = "envoy.filters.http.router"

// Routes is where RDS route tables come from.
type Routes interface {
	Get(name string) *route.Table
}

// Filter is one configured HCM. It is immutable; a connection keeps the
// Filter it was accepted with until it closes.
type Filter struct {
	StatPrefix string
	RDSName    string // set when routes come from RDS
	inline     *route.Table
	routes     Routes
	codec      hcmv3.HttpConnectionManager_CodecType
	h2         *cluster.HTTP2Settings // HTTP/2 connections' settings (h2.go)
	upgrades   map[string]bool        // upgrade_configs: allowed Upgrade protocols, lower case (upgrade.go)
	chain      *chain                 // the HTTP filters before the router (chain.go)
	// httpFilters is the http_filters list the chain was built from;
	// UseStats builds it again with the proxy's stats.
	httpFilters []*hcmv3.HttpFilter
	registry    *registry.Registry
	// node and direction are the proxy's bootstrap node and the
	// listener's traffic_direction, for filters that read them (Istio's
	// telemetry filters); UseNode sets them before UseStats.
	node      *corev3.Node
	direction corev3.TrafficDirection
	hstats    *stats.HTTPStats // http.<stat_prefix>.downstream_* (stats.go); nil without a store
	xfp       fwdheaders.Proto // x-forwarded-proto
	xff       fwdheaders.XFF   // the client's address and x-forwarded-for
	xfcc      fwdheaders.XFCC  // x-forwarded-client-cert
	pathNorm  pathnorm.Policy  // normalize_path, merge_slashes, path_with_escaped_slashes_action
	trailers  forward.Trailers // which trailers cross (package forward); Owns is ownsHeader
	Limits    Limits
	// AccessLog gets one record per request (access_log, built by the
	// listener with the proxy's files); nil logs nothing and costs
	// nothing.
	AccessLog accesslog.Loggers

	// tracing is the HCM's tracing (nil: none), traceFilter the filter
	// that runs it, first in the chain, once UseTracing gave it a
	// reporter (chain.go).
	tracing     *tracing.Config
	traceFilter httpfilter.Filter

	// acceptHTTP10 is http_protocol_options.accept_http_10: without it an
	// HTTP/1.0 request is answered 426, as Envoy does (errHTTP10).
	acceptHTTP10 bool

	// h2Streams is the HTTP/2 stream handler of the Server that serves
	// the filter, built once for all its connections (h2.go).
	h2Streams atomic.Pointer[h2Streams]
}

// Limits are the HCM's timeouts and size limits, with Envoy's semantics;
// a zero duration disables a timeout.
type Limits struct {
	// IdleTimeout closes a connection with no request in progress
	// (common_http_protocol_options.idle_timeout, default 1 h).
	IdleTimeout time.Duration
	// MaxConnectionDuration ends a connection after this long: it closes
	// after the request in progress (common_http_protocol_options).
	MaxConnectionDuration time.Duration
	// MaxRequestsPerConnection closes a connection after this many
	// requests (common_http_protocol_options); 0 is no limit.
	MaxRequestsPerConnection uint32
	// RequestHeadersTimeout bounds receiving a request head from its first
	// byte (408).
	RequestHeadersTimeout time.Duration
	// RequestTimeout bounds receiving the whole request (408), unless the
	// response started first.
	RequestTimeout time.Duration
	// StreamIdleTimeout ends a request with no activity for this long (408
	// SI before the response starts; a reset after). Default 5 min.
	StreamIdleTimeout time.Duration
	// MaxHeadersCount bounds request header fields (431); default 100.
	MaxHeadersCount int
	// MaxRequestHeadBytes bounds a request head (431); max_request_headers_kb,
	// default 60 KiB.
	MaxRequestHeadBytes int
	// DelayedCloseTimeout is how long a connection closed after a local
	// error reply is drained before the socket closes, so the client reads
	// the reply rather than a reset (default 1 s).
	DelayedCloseTimeout time.Duration
}

// DefaultLimits returns Envoy's defaults.
func DefaultLimits() Limits {
	return Limits{
		IdleTimeout:         time.Hour,
		StreamIdleTimeout:   5 * time.Minute,
		MaxHeadersCount:     100,
		MaxRequestHeadBytes: 60 << 10,
		DelayedCloseTimeout: time.Second,
	}
}

// Build validates an HCM config and returns the filter, with the HTTP
// filters strait-proxy runs (registry.Default).
func Build(h *hcmv3.HttpConnectionManager, routes Routes) (*Filter, error) {
	return BuildWith(h, routes, registry.Default())
}

// BuildWith is Build with the HTTP filters of reg.
func BuildWith(h *hcmv3.HttpConnectionManager, routes Routes, reg *registry.Registry) (*Filter, error) {
	if err := checkHCMFields(h); err != nil { // fields.go
		return nil, err
	}
	f := &Filter{StatPrefix: h.GetStatPrefix(), routes: routes, acceptHTTP10: h.GetHttpProtocolOptions().GetAcceptHttp_10(), registry: reg}
	f.trailers.Owns = f.ownsHeader
	if err := f.buildCodec(h); err != nil {
		return nil, err
	}
	if err := f.buildUpgrades(h); err != nil {
		return nil, err
	}
	f.xfp = fwdheaders.ProtoOf(h)
	f.xff = fwdheaders.XFFOf(h)
	xfcc, err := fwdheaders.XFCCOf(h)
	if err != nil {
		return nil, err
	}
	f.xfcc = xfcc
	if f.pathNorm, err = pathnorm.PolicyOf(h); err != nil {
		return nil, err
	}
	lim, err := buildLimits(h)
	if err != nil {
		return nil, err
	}
	f.Limits = lim
	if f.tracing, err = tracing.Parse(h.GetTracing(), h.GetRequestIdExtension()); err != nil {
		return nil, err
	}
	switch rs := h.GetRouteSpecifier().(type) {
	case *hcmv3.HttpConnectionManager_Rds: // checkRDS checked its config source
		f.RDSName = rs.Rds.GetRouteConfigName()
	case *hcmv3.HttpConnectionManager_RouteConfig:
		t, err := route.CompileWith(rs.RouteConfig, reg)
		if err != nil {
			return nil, err
		}
		f.inline = t
	default:
		return nil, fmt.Errorf("route specifier %T is not supported (want rds or route_config)", rs)
	}
	filters := h.GetHttpFilters()
	if len(filters) == 0 || filters[len(filters)-1].GetName() != routerFilter {
		return nil, fmt.Errorf("http_filters must end with %s", routerFilter)
	}
	ch, err := buildChain(filters, reg, httpfilter.BuildContext{StatPrefix: "http." + f.StatPrefix + "."}) // chain.go
	if err != nil {
		return nil, err
	}
	f.chain, f.httpFilters = ch, filters
	return f, nil
}

// buildLimits reads the HCM's timeouts and limits. A field that asks for
// something the HTTP/1.1 path doesn't do is refused, naming the field
// (commonOptionsFields in fields.go lists the sub-fields it reads).
func buildLimits(h *hcmv3.HttpConnectionManager) (Limits, error) {
	l := DefaultLimits()
	dur := func(name string, d *durationpb.Duration, dst *time.Duration) error {
		if d == nil {
			return nil
		}
		if err := d.CheckValid(); err != nil || d.AsDuration() < 0 {
			return fmt.Errorf("%s %v is not a valid duration", name, d)
		}
		*dst = d.AsDuration()
		return nil
	}
	o := h.GetCommonHttpProtocolOptions()
	for _, f := range []struct {
		name string
		d    *durationpb.Duration
		dst  *time.Duration
	}{
		{"common_http_protocol_options.idle_timeout", o.GetIdleTimeout(), &l.IdleTimeout},
		{"common_http_protocol_options.max_connection_duration", o.GetMaxConnectionDuration(), &l.MaxConnectionDuration},
		{"request_headers_timeout", h.GetRequestHeadersTimeout(), &l.RequestHeadersTimeout},
		{"request_timeout", h.GetRequestTimeout(), &l.RequestTimeout},
		{"stream_idle_timeout", h.GetStreamIdleTimeout(), &l.StreamIdleTimeout},
		{"delayed_close_timeout", h.GetDelayedCloseTimeout(), &l.DelayedCloseTimeout},
	} {
		if err := dur(f.name, f.d, f.dst); err != nil {
			return l, err
		}
	}
	if v := o.GetMaxHeadersCount(); v != nil {
		if v.GetValue() == 0 {
			return l, fmt.Errorf("common_http_protocol_options.max_headers_count must be at least 1")
		}
		l.MaxHeadersCount = int(v.GetValue())
	}
	if v := h.GetMaxRequestHeadersKb(); v != nil {
		if v.GetValue() == 0 || v.GetValue() > 8192 {
			return l, fmt.Errorf("max_request_headers_kb %d is out of range (1 to 8192)", v.GetValue())
		}
		l.MaxRequestHeadBytes = int(v.GetValue()) << 10
	}
	if v := o.GetMaxRequestsPerConnection(); v != nil {
		l.MaxRequestsPerConnection = v.GetValue()
	}
	switch {
	case o.GetMaxStreamDuration() != nil:
		return l, fmt.Errorf("common_http_protocol_options.max_stream_duration is not supported (use a route timeout)")
	case o.GetMaxConnectionDurationJitter() != nil:
		return l, fmt.Errorf("common_http_protocol_options.max_connection_duration_jitter is not supported (remove it)")
	case o.GetHeadersWithUnderscoresAction() != corev3.HttpProtocolOptions_ALLOW:
		return l, fmt.Errorf("common_http_protocol_options.headers_with_underscores_action %s is not supported (only ALLOW)", o.GetHeadersWithUnderscoresAction())
	case o.GetMaxResponseHeadersKb() != nil && o.GetMaxResponseHeadersKb().GetValue() != 60:
		return l, fmt.Errorf("common_http_protocol_options.max_response_headers_kb %d is not supported (only the default 60)", o.GetMaxResponseHeadersKb().GetValue())
	}
	return l, nil
}

func configSourceKind(cs *corev3.ConfigSource) string {
	if cs == nil {
		return "nothing"
	}
	return fmt.Sprintf("%T", cs.GetConfigSourceSpecifier())
}

// table returns the route table to use for the next request.
func (f *Filter) table() *route.Table {
	if f.inline != nil {
		return f.inline
	}
	return f.routes.Get(f.RDSName)
}

// UseNode gives the HTTP filters the proxy's node and the listener's
// traffic_direction (httpfilter.BuildContext); they take effect when
// UseStats builds the filters again, so call it before UseStats.
func (f *Filter) UseNode(node *corev3.Node, direction corev3.TrafficDirection) {
	f.node, f.direction = node, direction
}

// UseStats gives the filter and its HTTP filters their counters in st
// (the HTTP filters are built again, with st). Call it before the Filter
// serves a connection.
func (f *Filter) UseStats(st *stats.Store) {
	if st == nil {
		return
	}
	f.hstats = st.HTTP(f.StatPrefix)
	if len(f.httpFilters) == 0 {
		return
	}
	ch, err := buildChainWith(f.httpFilters, f.registry, httpfilter.BuildContext{StatPrefix: "http." + f.StatPrefix + ".", Stats: st,
		Node: f.node, Direction: f.direction}, f.traceFilter) // chain.go
	if err != nil {
		return // built once already: cannot fail
	}
	f.chain = ch
}

// ownsHeader reports whether the chain's filters write and trust the
// request header n (any case): jwt_authn's output headers, which no
// trailer may carry (forward.Trailers).
func (f *Filter) ownsHeader(n string) bool {
	return f.chain != nil && f.chain.writesHeader(n)
}
