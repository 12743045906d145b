package hcm

// The HTTP/2 (and net/http) codec's httpfilter.Stream: one per stream,
// over net/http's request and response writer. Its writer (encWriter)
// passes every response head, upstream's or a local reply's, through the
// filters' fields, flags and encoders before it is written.

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/straitmesh/strait/internal/proxy/accesslog"
	"github.com/straitmesh/strait/internal/proxy/forward"
	"github.com/straitmesh/strait/internal/proxy/fwdheaders"
	"github.com/straitmesh/strait/internal/proxy/httpfilter"
	"github.com/straitmesh/strait/internal/proxy/rbac"
	"github.com/straitmesh/strait/internal/proxy/route"
	"github.com/straitmesh/strait/internal/proxy/tracing"
)

// h2stream is one request as its filters see it. Only the stream's
// handler goroutine touches it.
type h2stream struct {
	filterState
	w           http.ResponseWriter // the writer under enc
	enc         encWriter
	r           *http.Request
	c           *conn
	client      fwdheaders.ClientAddress
	grpcReplies bool // local replies to gRPC requests take gRPC's form (HTTP/2)
	meta        httpfilter.Metadata
	in          rbac.Input
	// bytesIn counts the request body read (for Completers only): the
	// transport reads it on its own goroutine.
	bytesIn atomic.Int64
	// bodyRead: the body was read whole for the filters (body.go).
	bodyRead bool
}

// newH2Stream starts the filters' view of r, answered through w.
// grpcReplies says whether local replies to gRPC requests take gRPC's
// trailers-only form (HTTP/2).
func newH2Stream(w http.ResponseWriter, r *http.Request, c *conn, client fwdheaders.ClientAddress, grpcReplies bool) *h2stream {
	st := &h2stream{}
	st.init(w, r, c, client, grpcReplies)
	return st
}

// init is newH2Stream on a zero h2stream that a larger struct holds
// (streamMem).
func (st *h2stream) init(w http.ResponseWriter, r *http.Request, c *conn, client fwdheaders.ClientAddress, grpcReplies bool) {
	st.w, st.r, st.c, st.client, st.grpcReplies = w, r, c, client, grpcReplies
	st.reset(c.filter)
	st.enc = encWriter{ResponseWriter: w, st: st}
}

// writer is where the rest of the request path writes the response.
func (st *h2stream) writer() http.ResponseWriter { return &st.enc }

func (st *h2stream) Method() string   { return st.r.Method }
func (st *h2stream) Host() string     { return st.rreq.Host }
func (st *h2stream) Path() string     { return st.rreq.Path }
func (st *h2stream) Query() string    { return st.rreq.Query }
func (st *h2stream) Scheme() string   { return st.rreq.Scheme }
func (st *h2stream) Protocol() string { return st.r.Proto }

func (st *h2stream) RequestHeaders() httpfilter.HeaderMap { return httpfilter.HTTPHeader(st.r.Header) }

func (st *h2stream) Connection() *httpfilter.Connection { return st.c.fconn }

func (st *h2stream) RemoteAddr() netip.Addr { return st.client.Remote.Addr() }

func (st *h2stream) Metadata() *httpfilter.Metadata { return &st.meta }

// Wait holds the stream for d, ending early when it is reset or its client
// leaves.
func (st *h2stream) Wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-st.r.Context().Done():
		return false
	}
}

// LocalReply answers the stream; a gRPC request gets gRPC's trailers-only
// form on HTTP/2: grpcStatus when >= 0, else status mapped as Envoy maps
// it.
func (st *h2stream) LocalReply(status, grpcStatus int, body, flags string, headers func(set func(name, value string))) {
	st.replied = true
	w, r := st.writer(), st.r
	if headers != nil {
		headers(w.Header().Set)
	}
	switch {
	case st.grpcReplies && grpcStatus >= 0 && forward.IsGRPC(r.Header):
		grpcLocalReply(w, uint32(grpcStatus), flags, body) // grpcreply.go
	case st.grpcReplies:
		streamLocalReply(w, r, status, flags, body)
	default:
		localReply(w, status, flags, body)
	}
}

// RBACInput is the RBAC engine's input (filters/http/rbac.InputSource).
func (st *h2stream) RBACInput() *rbac.Input {
	st.in = rbac.Input{Conn: st.c.authz, Request: &st.rreq, RemoteIP: st.client.Remote.Addr(), Metadata: &st.meta}
	return &st.in
}

// encodeStreamTrailers runs the trailers encoders on the response
// trailers tr about to be sent through w, when w is a stream's writer
// (encWriter) and there are trailers.
func encodeStreamTrailers(w http.ResponseWriter, tr http.Header) {
	if ew, ok := w.(*encWriter); ok && len(tr) > 0 {
		ew.st.encodeTrailers(ew.st, httpfilter.HTTPHeader(tr))
	}
}

// grpcStatus is the grpc-status the stream answered with: in the head
// (trailers-only) or its trailers; -1 when none.
func (st *h2stream) grpcStatus() int {
	h := st.enc.ResponseWriter.Header()
	v := h.Get("Grpc-Status")
	if v == "" {
		v = h.Get(http.TrailerPrefix + "Grpc-Status")
	}
	if v == "" {
		return -1
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return -1
	}
	return n
}

// complete tells the Completers that the stream ended; rec is its access
// log record (written to even when nothing is logged).
func (st *h2stream) complete(rec *accesslog.Record) {
	if st.f.chain == nil || len(st.f.chain.completers) == 0 {
		return
	}
	info := &st.info
	*info = httpfilter.StreamInfo{
		Status: st.enc.code, GRPCStatus: st.grpcStatus(), Flags: rec.Flags, Cluster: rec.UpstreamCluster, Service: rec.UpstreamService,
		UpstreamPeerPrincipal: rec.UpstreamPeerPrincipal, UpstreamLocalPrincipal: rec.UpstreamLocalPrincipal,
		BytesIn: st.bytesIn.Load(), BytesOut: st.enc.bytes,
	}
	if ap, err := netip.ParseAddrPort(rec.UpstreamHost); err == nil {
		info.UpstreamHost = ap
	}
	st.filterState.complete(st, info)
}

// encWriter runs the filters over the response head when it is written.
type encWriter struct {
	http.ResponseWriter
	st    *h2stream
	code  int   // the final status written, 0 before
	bytes int64 // response body bytes written
}

func (w *encWriter) WriteHeader(code int) {
	if w.code == 0 && code >= 200 {
		w.code = code
		w.st.encodeHTTP(w.st, code, w.ResponseWriter.Header()) // chain.go
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *encWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.WriteHeader(http.StatusOK)
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the stream's Flush.
func (w *encWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// streamBodyCounter counts the bytes read from a request body; the
// transport reads it on its own goroutine.
type streamBodyCounter struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *streamBodyCounter) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

var _ httpfilter.Stream = (*h2stream)(nil)

// decodeAndRoute runs the filter chain on the request (ctx is its
// context), whose path (after normalization) is path, and picks its route; done reports that the
// request was answered (by a filter, or 404 NR) or reset. The route's
// request mirrors are sent here, after the filters let it through.
func (st *h2stream) decodeAndRoute(ctx context.Context, s *Server, path string) (rt *route.Route, done bool) {
	r := st.r
	st.rreq = route.Request{Host: r.Host, Path: path, Query: r.URL.RawQuery, Method: r.Method, Scheme: r.URL.Scheme, Headers: route.HTTPHeader(r.Header)}
	if r.Method == http.MethodConnect {
		// CONNECT needs a connect_matcher route, which is not supported:
		// no route, as Envoy answers without one.
		st.rtDone = true
	}
	if st.decode(st) { // chain.go
		return nil, true
	}
	if st.f.decodesBodies() && r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 && r.Method != http.MethodConnect && st.decodeBody(ctx) { // body.go
		return nil, true
	}
	rt = st.route()
	if rt == nil {
		st.routerReply(http.StatusNotFound, "NR", "")
		return nil, true
	}
	if st.f.chain != nil && len(st.f.chain.completers) > 0 && r.Body != nil && r.Body != http.NoBody && !st.bodyRead {
		r.Body = &streamBodyCounter{ReadCloser: r.Body, n: &st.bytesIn}
	}
	if rt.Filters != nil && len(rt.Filters.Mirrors) > 0 {
		s.shadow.MirrorStream(rt.Filters.Mirrors, r)
	}
	return rt, false
}

// routerReply is a local reply of the router (after the filters).
func (st *h2stream) routerReply(code int, flags, body string) {
	if st.grpcReplies {
		streamLocalReply(st.writer(), st.r, code, flags, body)
		return
	}
	localReply(st.writer(), code, flags, body)
}

// What the HTTP/2 stream handlers (h2.go, net/http's ResponseWriter from
// x/net/http2) share with the rest of the HCM: the local
// reply, x-request-id generation, and copying a response body to the stream.

var bufPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func localReply(w http.ResponseWriter, code int, flags, body string) {
	h := w.Header()
	if flags != "" {
		h.Set("X-Strait-Response-Flags", flags)
		if flags == "UO" {
			h.Set("X-Envoy-Overloaded", "true")
		}
	}
	if body != "" {
		h.Set("Content-Type", "text/plain")
	}
	w.WriteHeader(code)
	_, _ = io.WriteString(w, body) // a client gone is the stream's end, not an error here
}

// writerOnly hides ResponseWriter's ReadFrom so CopyBuffer uses our buffer.
type writerOnly struct{ io.Writer }

func copyFlushing(w http.ResponseWriter, r io.Reader, buf []byte) error {
	rc := http.NewResponseController(w)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return werr
			}
			if ferr := rc.Flush(); ferr != nil {
				return ferr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// addForwardHeaders completes an upstream request made from r on the
// HTTP/2 path: x-request-id unless present, no Go
// default User-Agent, and no body for an empty one. x-forwarded-proto is
// already on r (fwdheaders.Proto.ApplyHTTP). The id is kept in m when m
// is not nil (no allocation).
func addForwardHeaders(out, r *http.Request, m *streamMem) {
	h := out.Header
	if _, ok := h["X-Request-Id"]; !ok {
		if m == nil {
			h["X-Request-Id"] = []string{tracing.NewRequestID()}
		} else {
			// The bytes are m's (or AppendRequestID's own when they do
			// not fit), never written again.
			b := tracing.AppendRequestID(m.ridBytes[:0])
			m.rid[0] = unsafe.String(unsafe.SliceData(b), len(b))
			h["X-Request-Id"] = m.rid[:]
		}
	}
	if _, ok := h["User-Agent"]; !ok {
		h["User-Agent"] = nil // don't let the client add Go's default
	}
	if r.ContentLength == 0 {
		out.Body = nil
	}
}
