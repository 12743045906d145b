package hcm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"
	"unsafe"

	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"golang.org/x/net/http2"

	"github.com/straitmesh/strait/internal/proxy/accesslog"
	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/forward"
	"github.com/straitmesh/strait/internal/proxy/http1"
	h2codec "github.com/straitmesh/strait/internal/proxy/http2"
	h2server "github.com/straitmesh/strait/internal/proxy/http2/server"
	"github.com/straitmesh/strait/internal/proxy/pathnorm"
	"github.com/straitmesh/strait/internal/proxy/route"
	"github.com/straitmesh/strait/internal/proxy/tlsconf"
	"github.com/straitmesh/strait/internal/proxy/wbatch"
)

// This file is the HTTP/2 side of the HCM: downstream HTTP/2 (h2 by ALPN,
// or h2c with prior knowledge: the client starts with the connection
// preface) served by the proxy's own server connection (package
// http2/server, on x/net/http2's Framer), one handler call per stream,
// routed with the same route table and clusters as HTTP/1.1. A cluster that speaks HTTP/2
// upstream gets the stream on a multiplexed connection (cluster.h2Pool);
// others get it as an HTTP/1.1 request.

// buildCodec reads codec_type and http2_protocol_options. HTTP/2 is served
// for codec_type HTTP2 and, when the connection starts with the HTTP/2
// preface, for AUTO.
func (f *Filter) buildCodec(h *hcmv3.HttpConnectionManager) error {
	f.codec = h.GetCodecType()
	switch f.codec {
	case hcmv3.HttpConnectionManager_HTTP1:
		if h.GetHttp2ProtocolOptions() != nil {
			return errors.New("http2_protocol_options is set but codec_type is HTTP1 (use AUTO or HTTP2, or drop the options)")
		}
		return nil
	case hcmv3.HttpConnectionManager_AUTO, hcmv3.HttpConnectionManager_HTTP2:
	default:
		return fmt.Errorf("codec_type %s is not supported (want AUTO, HTTP1 or HTTP2)", f.codec)
	}
	s, err := cluster.ParseHTTP2Options("http2_protocol_options", h.GetHttp2ProtocolOptions())
	if err != nil {
		return err
	}
	// Unset options keep the HTTP/2 server's defaults (250 streams, 1 MiB
	// windows; package http2/server), not Envoy's (2^31-1 streams, 256
	// MiB windows): the handler buffers a window's worth per stream when
	// the upstream is slower than the client.
	//
	// connection_keepalive: a connection that has received no frame for
	// interval gets a PING, and is closed when nothing arrives within
	// timeout, as the upstream pool does (cluster.HTTP2Settings).
	f.h2 = &s
	return nil
}

// serveHTTP2Capable serves a connection whose filter allows HTTP/2: HTTP/2
// for codec_type HTTP2; else, on a TLS connection that negotiated a
// protocol by ALPN, HTTP/2 for "h2" and HTTP/1.1 for any other; else
// whatever the first bytes say (Envoy's determineNextProtocol in
// source/common/http/conn_manager_utility.cc). c is tracked.
func (s *Server) serveHTTP2Capable(c net.Conn, f *Filter, dst netip.AddrPort, src cluster.OriginalSource, d *Drain) {
	if f.codec == hcmv3.HttpConnectionManager_HTTP2 {
		s.serveH2(c, c, f, dst, src, d)
		return
	}
	switch negotiatedProtocol(c) {
	case "":
	case http2.NextProtoTLS:
		s.serveH2(c, c, f, dst, src, d)
		return
	default:
		s.serveH1(c, f, dst, src, d)
		return
	}
	base := http1.WrapConn(c) // keep the HTTP/1.1 path's raw I/O
	pre, isH2, err := sniffPreface(base)
	if err != nil && len(pre) == 0 {
		s.untrack(c)
		c.Close()
		return
	}
	pc := &prefixConn{Conn: base, pre: pre}
	if isH2 {
		s.serveH2(pc, c, f, dst, src, d)
		return
	}
	s.untrack(c)
	if !s.track(pc) {
		pc.Close()
		return
	}
	s.serveH1(pc, f, dst, src, d)
}

// negotiatedProtocol returns the protocol c's TLS handshake agreed on by
// ALPN; "" for a connection in clear text or one without ALPN.
func negotiatedProtocol(c net.Conn) string {
	if tc := tlsconf.Terminated(c); tc != nil {
		return tc.ConnectionState().NegotiatedProtocol
	}
	return ""
}

// sniffPreface reads until the bytes read so far are the HTTP/2 client
// preface or cannot become it, and returns them.
func sniffPreface(c net.Conn) (pre []byte, isH2 bool, err error) {
	const preface = http2.ClientPreface
	bp := sniffBufPool.Get().(*[]byte)
	defer sniffBufPool.Put(bp)
	buf := (*bp)[:0]
	// The bytes are returned in a slice of their own size: a connection
	// keeps them until its reader consumed them.
	own := func() []byte { return append([]byte(nil), buf...) }
	for {
		n, err := c.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		m := min(len(buf), len(preface))
		if string(buf[:m]) != preface[:m] {
			return own(), false, nil
		}
		if len(buf) >= len(preface) {
			return own(), true, nil
		}
		if err != nil {
			return own(), false, err
		}
	}
}

var sniffBufPool = sync.Pool{New: func() any { b := make([]byte, 4<<10); return &b }}

// prefixConn is a connection whose first bytes were already read.
type prefixConn struct {
	net.Conn
	pre []byte // owned by the reading goroutine
}

// Buffered and NetConn make prefixConn an http1.BufferedConn, so that
// http1.Peek sees the socket under it (a client gone during a wait).
func (c *prefixConn) Buffered() int { return len(c.pre) }

// NetConn returns the wrapped connection.
func (c *prefixConn) NetConn() net.Conn { return c.Conn }

// RawConn lets the parker and http1.Peek reach the socket once the sniffed
// bytes are consumed.
func (c *prefixConn) RawConn() net.Conn {
	if len(c.pre) > 0 {
		return nil
	}
	return c.Conn
}

var _ http1.BufferedConn = (*prefixConn)(nil)

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.pre) > 0 {
		n := copy(p, c.pre)
		c.pre = c.pre[n:]
		if len(c.pre) == 0 {
			c.pre = nil
		}
		return n, nil
	}
	return c.Conn.Read(p)
}

// An idle HTTP/2 connection parks as an HTTP/1.1 one does (package
// http2/server's park.go, on the Server's http1.Parker): its reader
// goroutine ends and its socket waits in the parker; an h2keep is what
// the HCM keeps of it meanwhile. Only a plain TCP connection parks (the
// guard detaches only a socket it reads directly); TLS ones keep their
// goroutine while idle, as HTTP/1.1's do.

// h2keep is one downstream HTTP/2 connection for the HCM, for its whole
// life (h2server.Host). It holds the connection's state in one allocation
// (the server connection, its guard and batched writer, what its streams
// read of it): what stays of a parked connection is then mostly this.
//
// Its fields are what a parked connection keeps, so each one counts:
// the filter is conn's, the streams' handler is looked up per stream,
// and every request's context's parent is the h2keep itself (keepCtx).
type h2keep struct {
	s       *Server
	tracked net.Conn // what Server.Close closes; nil while parked
	drain   *Drain   // watches it (drainIdle, cut)
	expiry  *time.Timer
	park    h2server.Parking
	conn    conn // every stream's view of the connection
	// requests counts the streams for max_requests_per_connection (nil:
	// no limit).
	requests *connLimits
	c        h2server.Conn
	g        h2codec.Guard
	bc       wbatch.Conn
}

// keepCtx is an h2keep as every request's context's parent: a context
// that is never done and carries the connection's conn (connKey), as
// context.WithValue's would, with nothing of its own.
type keepCtx h2keep

func (*keepCtx) Deadline() (time.Time, bool) { return time.Time{}, false }
func (*keepCtx) Done() <-chan struct{}       { return nil }
func (*keepCtx) Err() error                  { return nil }

func (x *keepCtx) Value(key any) any {
	if _, ok := key.(connKey); ok {
		return &x.conn
	}
	return nil
}

func (*keepCtx) String() string { return "hcm HTTP/2 connection context" }

// h2Streams is the handler of a filter's HTTP/2 streams on one Server:
// the stream head limits and guard (h2limits.go) around serveStream. It
// is the same for every connection, so that no connection holds a chain
// of closures of its own.
type h2Streams struct {
	s *Server
	h http.HandlerFunc
}

// h2StreamHandler returns f's stream handler for s.
func (f *Filter) h2StreamHandler(s *Server) http.HandlerFunc {
	if h := f.h2Streams.Load(); h != nil && h.s == s {
		return h.h
	}
	lim := f.limits()
	h := &h2Streams{s: s, h: limitStreamHead(lim, guardStream(lim, s.serveStream))}
	f.h2Streams.Store(h)
	return h.h
}

// ServeHTTP serves one of the connection's streams (its handler): on a
// grown stack, counted against max_requests_per_connection (the stream
// that reaches it is served, the connection gets GOAWAY, as on x/net's
// path), through the filter's stream handler.
func (k *h2keep) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	growStack(false)
	if k.requests != nil && k.requests.beginRequest() {
		k.c.Shutdown()
	}
	k.conn.filter.h2StreamHandler(k.s)(w, r)
}

// drainIdle shuts the connection down when its drain starts: GOAWAY,
// its streams finish, it closes.
func (k *h2keep) drainIdle() { k.c.Shutdown() }

// cut closes the connection when its drain ends.
func (k *h2keep) cut() { k.c.Close() }

// Parked counts the connection as parked rather than as its net.Conn.
func (k *h2keep) Parked() {
	k.s.parking(k.tracked)
	k.tracked = nil
}

// Unparked tracks the connection as nc again (nil: it ends).
func (k *h2keep) Unparked(nc net.Conn) bool {
	if !k.s.unparked(nc) {
		return false
	}
	k.tracked = nc
	return true
}

// Ended releases what the connection held; once, when it ends.
func (k *h2keep) Ended() {
	if k.tracked != nil {
		k.s.untrack(k.tracked)
	}
	k.drain.unwatch(k)
	if k.expiry != nil {
		k.expiry.Stop()
	}
	k.conn.filter.cxEnd()
}

// serveH2 serves HTTP/2 on nc until it closes or parks; tracked is the
// connection Close closes.
func (s *Server) serveH2(nc, tracked net.Conn, f *Filter, dst netip.AddrPort, src cluster.OriginalSource, d *Drain) {
	f.cxBegin() // cxEnd in k.Ended
	k := &h2keep{s: s, tracked: tracked, drain: d}
	k.park.Parker = s.parker // k is the Host: the server connection's Handler
	k.conn = conn{remote: remoteAddrPort(nc), filter: f, dst: dst, src: src, secure: isTLS(nc), xfcc: f.xfcc.Conn(nc), authz: rbacConnection(f, nc, dst), fconn: filterConnection(f, nc, dst), logConn: logConnOf(f, nc)}
	lim := f.limits() // stream.go
	// Under the batched writes, the guard against rapid reset, empty
	// frame floods and header blocks left open sees every frame (package
	// http2), as on x/net's path. It reads a plain socket directly
	// (http1.WrapConn), which is what lets it wait without a buffer and
	// the connection park.
	k.g.Init(http1.WrapConn(nc), lim.RequestHeadersTimeout)
	k.bc.Init(&k.g)
	k.park.Socket = &k.g
	c := &k.c
	if lim.MaxRequestsPerConnection > 0 {
		k.requests = &connLimits{}
		k.requests.init(lim)
	}
	var headerList uint32
	if n := h2HeaderListSize(lim); n > 0 { // h2limits.go
		headerList = uint32(n + 320) // x/net's padding: 32 bytes for each of 10 fields
	}
	c.Init(&k.bc, h2server.Config{
		Handler:              k,
		TLS:                  &h2SchemeState,
		MaxConcurrentStreams: f.h2.MaxConcurrentStreams,
		StreamWindow:         f.h2.InitialStreamWindowSize,
		ConnWindow:           f.h2.InitialConnectionWindowSize,
		MaxHeaderListSize:    headerList,
		IdleTimeout:          lim.IdleTimeout,
		PingInterval:         f.h2.KeepaliveInterval,
		PingTimeout:          f.h2.KeepaliveTimeout,
		Log:                  s.log,
		Park:                 &k.park,
	})
	d.watch(k)
	if lim.MaxConnectionDuration > 0 {
		k.expiry = time.AfterFunc(lim.MaxConnectionDuration, c.Shutdown)
	}
	c.Serve((*keepCtx)(k)) // k.Ended once it ends
}

// remoteAddrPort is nc's peer address (the zero AddrPort for one that is
// not an IP address), kept inline: a parked connection keeps no
// *net.TCPAddr.
func remoteAddrPort(nc net.Conn) netip.AddrPort {
	if a := nc.RemoteAddr(); a != nil {
		return addrPortOf(a)
	}
	return netip.AddrPort{}
}

// h2SchemeState is every HTTP/2 request's Request.TLS when its :scheme is
// https: Request.TLS != nil means :scheme https and nothing else
// (scheme.go). Shared, read-only.
var h2SchemeState = schemeState()

// serveStream routes and forwards one HTTP/2 stream.
func (s *Server) serveStream(w http.ResponseWriter, r *http.Request) {
	c, ok := r.Context().Value(connKey{}).(*conn)
	if !ok {
		streamLocalReply(w, r, http.StatusInternalServerError, "", errNoConn.Error())
		return
	}
	// What a stream needs of its own comes with its guard (h2limits.go):
	// one allocation for all.
	mem, guarded := w.(*streamGuard)
	var unlogged *accesslog.Record // written to, never logged, when the filter has no access log
	if guarded {
		unlogged = &mem.mem.unlogged
	} else {
		unlogged = &accesslog.Record{}
	}
	rec := unlogged
	if len(c.filter.AccessLog) > 0 {
		var done func()
		w, r, rec, done = startStreamLog(w, r, c) // accesslog.go
		defer done()
	} else if c.filter.chain != nil && len(c.filter.chain.completers) > 0 {
		r = r.WithContext(accesslog.TraceUpstream(r.Context(), rec)) // the upstream's principals, for istio.stats
	}
	var code *int // the status, for the downstream stats (stats.go)
	if rec != unlogged {
		w, code = c.filter.beginStream(w, r, &rec.Code, nil)
	} else {
		var cw *codeWriter
		if guarded {
			cw = &mem.mem.cw
		}
		w, code = c.filter.beginStream(w, r, nil, cw)
	}
	defer endStream(c.filter.hstats, code)
	if rejectFragment(w, r) {
		return
	}
	var m *streamMem // nil: allocate
	if guarded {
		m = &mem.mem
	}
	c.filter.xfp.ApplyHTTP(r, c.secure, m.xfpVal())
	client := c.filter.xff.ApplyHTTP(r, s.local)
	c.filter.xfcc.ApplyHTTP(r, c.xfcc)
	// The request's :scheme: what routes match, and an HTTP/2 upstream's
	// (and a shadow's) :scheme.
	r.URL.Scheme = streamScheme(r, c) // scheme.go
	rec.DownstreamRemote = client.Remote
	path := r.URL.Path
	if r.URL.RawPath != "" {
		path = r.URL.RawPath
	}
	if c.filter.pathNorm.Active() {
		var done bool
		if path, done = normalizeStreamPath(&c.filter.pathNorm, w, r, path); done {
			return
		}
	}
	var st *h2stream
	if guarded {
		st = &mem.mem.st
		st.init(w, r, c, client, true) // h2stream.go
	} else {
		st = newH2Stream(w, r, c, client, true)
	}
	defer st.complete(rec)
	w = st.writer()
	rt, done := st.decodeAndRoute(r.Context(), s, path)
	if done {
		return
	}
	rec.RouteName = rt.Name
	if rt.HasIdleTimeout {
		setStreamIdle(r.Context(), rt.IdleTimeout) // h2limits.go
	}
	if localRouteReply(w, r, rt, path) {
		return
	}
	tgt := rt.Pick()
	cl := s.clusters.Get(tgt.Name)
	if cl == nil {
		streamLocalReply(w, r, http.StatusServiceUnavailable, "NC", "")
		return
	}
	rec.UpstreamCluster, rec.UpstreamStatName = tgt.Name, cl.Stats.Name
	if cl.HasIstioService {
		rec.UpstreamService = &cl.IstioService
	}
	hash, hasHash, setCookie := forward.RequestHashHTTP(rt, r, client.Remote)
	ep, err := cl.PickRequest(c.dst, hash, hasHash)
	if err != nil {
		f := forward.PickFailure(err)
		streamLocalReply(w, r, f.Code, f.Flags, f.Body)
		return
	}
	defer cl.Finish(ep)
	rec.UpstreamHost = ep.Address
	if setCookie != "" {
		w.Header().Add("Set-Cookie", setCookie)
	}
	ep.Source = c.src
	if cl.ProxyProtocol() { // as forward.Downstream
		ep.Downstream = cluster.Downstream{Src: c.remote, Dst: c.dst}
	}
	s.forwardStream(w, r, c, m, cl, ep, rt, tgt)
}

// forwardStream sends one stream's request to ep and relays the response,
// flushing as data arrives when its length is unknown (gRPC streams need
// every message delivered when it is sent) and passing trailers on. m,
// when not nil, holds the exchange and the added header values.
func (s *Server) forwardStream(w http.ResponseWriter, r *http.Request, c *conn, m *streamMem, cl *cluster.Cluster, ep cluster.Endpoint, rt *route.Route, tgt *route.WeightedCluster) {
	ctx := r.Context()
	grpc := forward.IsGRPC(r.Header)
	if grpc {
		// The deadline the client asked for (as Istio configures Envoy:
		// max_stream_duration.grpc_timeout_header_max without a cap).
		if d, ok := forward.ParseGRPCTimeout(r.Header.Get("Grpc-Timeout")); ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, d)
			defer cancel()
		}
	}
	// A shallow copy; r is ours until we return. It does not escape
	// (forward.RoundTrip sends copies), so it is on the stack.
	out := r.WithContext(ctx)
	out.RequestURI = ""
	out.Close = false
	h := out.Header
	te := upstreamTE(h["Te"])
	forward.RemoveHop(h)
	if te != nil {
		h["Te"] = te // gRPC servers may require it
	}
	addForwardHeaders(out, r, m)
	c.filter.trailers.ForwardRequest(out, r, forward.UpstreamWire(cl, r))
	ov := forward.TakeOverrides(h)
	forward.MutateRequest(out, rt, tgt)

	x := m.exchange()
	x.RoundTrip(out, cl, ep, rt, ov, c.dst, c.src)
	defer x.Done()
	if x.Resp == nil {
		f := x.Fail
		if f.Code == 0 {
			return // downstream reset the stream
		}
		if x.LimitExceeded {
			f.Flags += ",URX"
		}
		if grpc && forward.DeadlinePassed(ctx) {
			// The client's own deadline: DEADLINE_EXCEEDED, as Envoy
			// answers when a stream's max duration is reached (the client
			// may be about to say the same, and should see one code).
			cl.Stats.AddResponse(http.StatusGatewayTimeout)
			grpcLocalReply(w, grpcDeadlineExceeded, "UT", "upstream request timeout")
			return
		}
		s.log.Debug("upstream request failed", "cluster", cl.Name, "endpoint", ep.Address, "error", x.Err)
		logTransportFailure(r.Context(), x.Err) // accesslog.go
		cl.Stats.AddResponse(f.Code)
		streamLocalReply(w, r, f.Code, f.Flags, f.Body)
		return
	}
	resp := x.Resp
	defer resp.Body.Close()
	cl.Stats.AddResponse(resp.StatusCode) // outlier detection: forward.RoundTrip reports

	wh := w.Header()
	for k, v := range resp.Header {
		wh[k] = v
	}
	forward.RemoveHop(wh)
	forward.MutateResponse(wh, rt, tgt)
	if x.LimitExceeded {
		wh.Set("X-Strait-Response-Flags", "URX")
	}
	w.WriteHeader(resp.StatusCode)

	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	// A body of known length goes out as the handler returns, with the
	// headers and END_STREAM in as few writes as fit; anything else
	// (gRPC, streams) is flushed as it arrives.
	copy := copyFlushing
	if resp.ContentLength >= 0 {
		copy = func(w http.ResponseWriter, r io.Reader, buf []byte) error {
			_, err := io.CopyBuffer(writerOnly{w}, r, buf)
			return err
		}
	}
	if err := copy(w, resp.Body, *bp); err != nil {
		// Can't send a status any more: reset the stream so the client
		// sees the response cut short, like Envoy.
		s.log.Debug("response body failed", "cluster", cl.Name, "endpoint", ep.Address, "error", err)
		panic(http.ErrAbortHandler)
	}
	// Trailers that were not announced (gRPC never announces
	// grpc-status) are sent with the TrailerPrefix convention; which of
	// them cross is forward/trailers.go's.
	tr := c.filter.trailers.Forward(resp.Trailer, forward.WireOf(resp.ProtoMajor), forward.WireHTTP2)
	encodeStreamTrailers(w, tr) // h2stream.go
	for k, vv := range tr {
		key := trailerKey(k)
		if old, ok := wh[key]; ok {
			wh[key] = append(old, vv...)
		} else {
			wh[key] = vv // tr is this stream's, and nothing writes to its values
		}
	}
}

// trailerKey is k with http.TrailerPrefix, gRPC's trailers without an
// allocation.
func trailerKey(k string) string {
	switch k {
	case "Grpc-Status":
		return http.TrailerPrefix + "Grpc-Status"
	case "Grpc-Message":
		return http.TrailerPrefix + "Grpc-Message"
	case "Grpc-Status-Details-Bin":
		return http.TrailerPrefix + "Grpc-Status-Details-Bin"
	}
	return http.TrailerPrefix + k
}

// normalizeStreamPath applies the HCM's path normalization
// (package pathnorm) to a request of the HTTP/2 codec whose escaped path is path: it returns the path to route
// and sets r.URL to it for the upstream, or answers the request (400, or
// 307 for UNESCAPE_AND_REDIRECT; a gRPC request is forwarded unescaped
// instead, as Envoy does) and reports done.
func normalizeStreamPath(p *pathnorm.Policy, w http.ResponseWriter, r *http.Request, path string) (string, bool) {
	if path == "" {
		return path, false
	}
	// Apply only reads its input, and returns it when nothing changes.
	in := unsafe.Slice(unsafe.StringData(path), len(path))
	out, v := p.Apply(in)
	switch {
	case v == pathnorm.Reject:
		streamLocalReply(w, r, http.StatusBadRequest, "", "")
		return path, true
	case v == pathnorm.Redirect && !forward.IsGRPC(r.Header):
		loc := string(out)
		if r.URL.RawQuery != "" {
			loc += "?" + r.URL.RawQuery
		}
		w.Header().Set("Location", loc)
		localReply(w, http.StatusTemporaryRedirect, "", "")
		return path, true
	}
	if len(out) == len(in) && &out[0] == &in[0] {
		return path, false
	}
	s := string(out)
	pathnorm.SetURLPath(r.URL, s)
	return s, false
}

// rejectFragment answers 400 to a request of the HTTP/2 codec whose
// target has a fragment (pathnorm.HasFragment) and reports done.
func rejectFragment(w http.ResponseWriter, r *http.Request) bool {
	if !pathnorm.HasFragment(r.RequestURI) {
		return false
	}
	streamLocalReply(w, r, http.StatusBadRequest, "", "")
	return true
}

// localRouteReply answers a redirect or direct_response route; it reports
// false for a route that forwards.
func localRouteReply(w http.ResponseWriter, r *http.Request, rt *route.Route, path string) bool {
	switch {
	case rt.Redirect != nil:
		scheme := r.Header.Get("X-Forwarded-Proto")
		if scheme == "" {
			scheme = "http"
		}
		q := ""
		if r.URL.RawQuery != "" || r.URL.ForceQuery {
			q = "?" + r.URL.RawQuery
		}
		w.Header().Set("Location", rt.Redirect.Location(scheme, r.Host, path, q, rt.MatchedLen(path)))
		forward.MutateResponse(w.Header(), rt, &route.WeightedCluster{})
		w.WriteHeader(rt.Redirect.Code)
		return true
	case rt.Direct != nil:
		forward.MutateResponse(w.Header(), rt, &route.WeightedCluster{})
		streamLocalReply(w, r, rt.Direct.Status, "", rt.Direct.Body)
		return true
	}
	return false
}

// upstreamTE is the TE an upstream request gets for the client's te: a
// single "trailers" when te asks for trailers (teTrailers), else nil. A
// te that is exactly that (gRPC's) is returned itself, with no
// allocation: RemoveHop deletes keys and leaves their values alone.
func upstreamTE(te []string) []string {
	if !teTrailers(te) {
		return nil
	}
	if len(te) == 1 && te[0] == "trailers" {
		return te
	}
	return []string{"trailers"}
}

// teTrailers reports whether a TE header asks for trailers, the only TE
// value that HTTP/2 allows (RFC 9113 §8.2.2).
func teTrailers(vv []string) bool {
	for _, v := range vv {
		for rest, more := v, true; more; {
			var f string
			f, rest, more = strings.Cut(rest, ",")
			if name, _, _ := strings.Cut(f, ";"); strings.EqualFold(strings.TrimSpace(name), "trailers") {
				return true
			}
		}
	}
	return false
}

// The server serves each stream on a goroutine of its own, whose stack
// starts small (the runtime's average) and is copied to a larger one when
// the request path goes deeper (routing, the filters, the upstream round
// trip): runtime.newstack/copystack, which walks and adjusts every frame
// on the stack, took 4% of a gRPC hop's CPU and 9% of an HTTP/2-to-HTTP/1.1
// hop's (bench/http), paid on every stream. Growing the stack once at the
// top of the handler, while it holds a handful of frames, costs a copy of
// those. (A pool of workers
// that keep their grown stacks, as grpc-go's server has, measured no
// better: the hand-off to the worker costs what the copy did.)

// streamStackFrame is the stack frame growStack makes room for: with the
// frames above it, the stream's stack grows to 16 KiB, what the request
// path reaches (BenchmarkProxyGRPCUnary's profile shows no newstack under
// serveStream with it).
const streamStackFrame = 10 << 10

// withGrownStack runs h on a stack that has grown to what the request path
// needs before h goes deep.
func withGrownStack(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		growStack(false)
		h(w, r)
	}
}

// growStack has a frame of streamStackFrame bytes, which the runtime makes
// room for (its prologue checks the whole frame) by growing the
// goroutine's stack. The frame is never written: the array lives in a
// branch that callers never take (use false), so it is not cleared.
//
//go:noinline
func growStack(use bool) {
	if use {
		var b [streamStackFrame]byte
		keepFrame(b[:])
	}
}

// keepFrame keeps growStack's frame from being optimized away.
//
//go:noinline
func keepFrame(b []byte) { b[0] = 1 }
