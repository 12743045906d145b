package hcm

// This file is the HTTP/1.1 path's access log: the record of the request
// in progress is filled where the path decides (the route and endpoint
// picked, the status line written, a local reply's flags) and logged when
// the request ends. A filter without access_log skips all of it but a few
// field stores.

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"time"

	"github.com/straitmesh/strait/internal/proxy/accesslog"
	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/fwdheaders"
	"github.com/straitmesh/strait/internal/proxy/http1"
	"github.com/straitmesh/strait/internal/proxy/tlsconf"
)

// logging reports whether requests of this connection are recorded: for
// the access log, or for the filters told when a stream ends (their
// StreamInfo is read from the record).
func (c *h1conn) logging() bool {
	return len(c.filter.AccessLog) > 0 || c.filter.chain != nil && len(c.filter.chain.completers) > 0
}

// beginLog starts the record of a request that began at start.
func (c *h1conn) beginLog(start time.Time) {
	c.rec = accesslog.Record{Start: start}
	c.client = fwdheaders.ClientAddress{}
	c.respBytes.Store(0)
}

// endLog completes the record from the request and logs it.
func (c *h1conn) endLog() {
	r := &c.rec
	req := &c.req
	r.Duration = time.Since(r.Start)
	if len(req.Method) > 0 {
		r.Method = http1.UnsafeString(req.Method)
		r.Path = http1.UnsafeString(req.Target)
		if len(req.Authority) > 0 { // absolute-form: the path and query alone
			r.Path = http1.UnsafeString(req.Path) + http1.UnsafeString(req.Query)
		}
		r.Authority = http1.UnsafeString(req.Host)
		r.Request = &req.Headers
		r.Protocol = "HTTP/1.1"
		if req.Minor == 0 {
			r.Protocol = "HTTP/1.0"
		}
		if req.Framing == http1.FramingLength {
			r.BytesReceived = req.ContentLength
		}
	}
	r.BytesSent += c.respBytes.Load()
	if r.Details == "" && r.Code != 0 {
		r.Details = accesslog.DetailsFor(r.Flags)
	}
	r.DownstreamLocal = c.dst
	if c.logConn == nil {
		c.logConn = accesslog.ConnOf(c.tracked)
	}
	r.Conn = c.logConn
	r.DownstreamRemote = c.client.Remote // fwdheaders.XFF; the peer when the request was not served
	if !r.DownstreamRemote.IsValid() {
		r.DownstreamRemote = c.remoteAddr()
	}
	c.stream.complete() // h1stream.go
	c.filter.AccessLog.Log(r)
	c.rec = accesslog.Record{} // drop the references to the buffers
}

// remoteAddr is the downstream peer's address, computed once.
func (c *h1conn) remoteAddr() netip.AddrPort {
	if !c.remote.IsValid() {
		c.remote = addrPortOf(c.tracked.RemoteAddr())
	}
	return c.remote
}

// logUpstream records the upstream connection's TLS identities (for
// istio.stats) and, for the access log, its addresses (the HTTP/1.1
// path; the others learn them through traceUpstream).
func (c *h1conn) logUpstream(uc net.Conn) {
	c.rec.UpstreamPeerPrincipal, c.rec.UpstreamLocalPrincipal = upstreamPrincipals(uc)
	if len(c.filter.AccessLog) > 0 { // only the log reads the addresses, not a Completer's StreamInfo
		c.rec.UpstreamLocal, c.rec.UpstreamRemote = accesslog.AddrPortOf(uc.LocalAddr()), accesslog.AddrPortOf(uc.RemoteAddr())
	}
}

// traceUpstream returns ctx with a trace that records in rec the
// addresses of the upstream connection a request is sent on (each
// attempt's; the last one's stay). The transports call GotConn on the
// goroutine of the round trip, before it returns.
func traceUpstream(ctx context.Context, rec *accesslog.Record) context.Context {
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(ci httptrace.GotConnInfo) {
		rec.UpstreamLocal, rec.UpstreamRemote = accesslog.AddrPortOf(ci.Conn.LocalAddr()), accesslog.AddrPortOf(ci.Conn.RemoteAddr())
		rec.UpstreamPeerPrincipal, rec.UpstreamLocalPrincipal = upstreamPrincipals(ci.Conn)
	}})
}

// upstreamPrincipals are the TLS identities of an upstream connection:
// its peer's and the proxy's (istio.stats reads them through
// httpfilter.StreamInfo).
func upstreamPrincipals(uc net.Conn) (peer, local string) {
	if u, ok := uc.(*cluster.UpstreamConn); ok {
		return u.PeerPrincipal, u.LocalPrincipal
	}
	return tlsconf.UpstreamPrincipals(uc)
}

// recordKey is the context key of a logged stream's record.
type recordKey struct{}

// logTransportFailure records, on a logged stream (ctx is its request's
// context), the upstream transport socket's reason for err.
func logTransportFailure(ctx context.Context, err error) {
	if rec, ok := ctx.Value(recordKey{}).(*accesslog.Record); ok {
		rec.TransportFailure = cluster.TransportFailureReason(err)
	}
}

// logConnOf describes c for the access log; nil when f logs nothing.
func logConnOf(f *Filter, c net.Conn) *accesslog.Conn {
	if len(f.AccessLog) == 0 {
		return nil
	}
	return accesslog.ConnOf(c)
}

func addrPortOf(a net.Addr) netip.AddrPort {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.AddrPort()
	}
	ap, _ := netip.ParseAddrPort(a.String())
	return ap
}

// streamLog records an HTTP/2 stream's response for
// the access log: status and body bytes, as written through it.
type streamLog struct {
	http.ResponseWriter
	rec accesslog.Record
}

func (sl *streamLog) WriteHeader(code int) {
	if sl.rec.Code == 0 && code >= 200 {
		sl.rec.Code = code
	}
	sl.ResponseWriter.WriteHeader(code)
}

func (sl *streamLog) Write(b []byte) (int, error) {
	if sl.rec.Code == 0 {
		sl.rec.Code = http.StatusOK
	}
	n, err := sl.ResponseWriter.Write(b)
	sl.rec.BytesSent += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the stream's Flush.
func (sl *streamLog) Unwrap() http.ResponseWriter { return sl.ResponseWriter }

// Flush sends what was written (http.Flusher, for gRPC streams).
func (sl *streamLog) Flush() { _ = http.NewResponseController(sl.ResponseWriter).Flush() }

// startStreamLog wraps w when the stream is logged, and r so that the
// upstream connection's addresses are recorded; the returned function
// logs it (call it when the handler returns).
func startStreamLog(w http.ResponseWriter, r *http.Request, c *conn) (http.ResponseWriter, *http.Request, *accesslog.Record, func()) {
	sl := &streamLog{ResponseWriter: w, rec: accesslog.Record{Start: time.Now()}}
	body := &countingBody{ReadCloser: r.Body}
	r.Body = body
	r = r.WithContext(context.WithValue(traceUpstream(r.Context(), &sl.rec), recordKey{}, &sl.rec))
	return sl, r, &sl.rec, func() {
		rec := &sl.rec
		rec.Duration = time.Since(rec.Start)
		rec.Protocol = "HTTP/2"
		if r.ProtoMajor == 1 {
			rec.Protocol = r.Proto
		}
		rec.Method, rec.Authority = r.Method, r.Host
		rec.Path = r.URL.RequestURI()
		rec.Request, rec.Response = accesslog.HTTPHeader(r.Header), accesslog.HTTPHeader(sl.Header())
		rec.Flags = sl.Header().Get("X-Strait-Response-Flags")
		rec.BytesReceived = body.n
		if rec.Code != 0 {
			rec.Details = accesslog.DetailsFor(rec.Flags)
		}
		rec.DownstreamLocal = c.dst
		if !rec.DownstreamRemote.IsValid() { // not served: the peer (the stream sets it, fwdheaders.XFF)
			peer, _ := netip.ParseAddrPort(r.RemoteAddr)
			rec.DownstreamRemote = netip.AddrPortFrom(peer.Addr().Unmap(), peer.Port())
		}
		rec.Conn = c.logConn
		c.filter.AccessLog.Log(rec)
	}
}

// countingBody counts a request body's bytes as the handler reads them.
type countingBody struct {
	io.ReadCloser
	n int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	return n, err
}
