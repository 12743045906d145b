package hcm

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/straitmesh/strait/internal/proxy/accesslog"
	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/forward"
	"github.com/straitmesh/strait/internal/proxy/fwdheaders"
	h2server "github.com/straitmesh/strait/internal/proxy/http2/server"
)

// This file holds the HTTP/2 downstream path's per-stream limits and
// timeouts, which x/net/http2 does not have: the request head's
// max_headers_count and max_request_headers_kb (limitStreamHead, at the
// end), stream_idle_timeout (or the route's idle_timeout, also when the
// HCM's is disabled) and request_timeout for each stream. The connection's idle_timeout is http2.Server.IdleTimeout,
// its max_connection_duration and max_requests_per_connection a graceful
// GOAWAY (serveH2), and request_headers_timeout bounds an open header
// block (http2.Guard).

// errH2StreamIdle is what a stream's handler sees on writes once its stream
// idle timeout passed.
var errH2StreamIdle = errors.New("hcm: stream idle timeout")

// streamGuardKey finds a stream's guard in its request context.
type streamGuardKey struct{}

// streamGuard enforces one stream's idle timeout, as Envoy's per-stream
// idle timer does: any request body read or response write is activity;
// after idle without any, a stream whose response has not started gets
// 408 SI (gRPC: the trailers-only form), one whose response started is
// reset, and in both cases the request context is cancelled, which ends
// the upstream request. Its request timeout is Envoy's request_timeout:
// a request whose body has not ended in time is answered 408 (or reset
// once its response started) the same way.
//
// It is the handler's http.ResponseWriter. The timer answers without
// racing the handler over a header map: the handler's (hdr) is its own
// until WriteHeader copies it, or, on the HTTP/2 server, is the
// server's, which the timer replaces with a new one before it answers
// (headerResetter).
type streamGuard struct {
	// Set at creation, read-only.
	w    http.ResponseWriter
	grpc bool // the request is gRPC: a local reply takes gRPC's trailers-only form
	// ctx is the request's context, which the guard ends: the HTTP/2
	// server's stream context (http2/server.CancelStream), or, when
	// cancel is set, a context.WithCancel of it (x/net's server).
	ctx    context.Context
	cancel context.CancelFunc
	hdr    http.Header // the handler's header map
	// shared: hdr is w's own map (a headerResetter's), which the
	// response is written from, with no copy; a local reply from the
	// timer resets w's first.
	shared bool
	// body is the request body, closed when the stream expires: an
	// upstream transport blocked reading an upload that stalled (x/net's
	// pipe) returns, and with it the handler.
	body io.Closer
	// gb is the handler's request body (over body), and mem what
	// serveStream needs for the stream: part of the guard, so that a
	// stream costs fewer allocations. Only the handler touches mem.
	gb  guardedBody
	mem streamMem

	last    atomic.Int64 // unix nanoseconds of the last activity
	idle    atomic.Int64 // the timeout in nanoseconds; 0: disabled
	timer   *time.Timer  // the idle timer; set before the handler runs
	reqDone atomic.Bool  // the request body ended (request_timeout is met)

	// aborted: the timeout passed while a write held mu, blocked (most
	// likely on the client's flow-control window); the stream was reset
	// through w's Abort and the handler's writes fail from then on.
	aborted atomic.Bool

	mu      sync.Mutex // guards every call into w and the fields below
	wrote   bool       // the response (the handler's or the 408) started
	expired bool       // the timeout passed
	done    bool       // the handler returned
	reset   bool       // expired after the handler's response started
}

// streamMem is what serveStream (h2.go) keeps of a stream: its access log
// record when nothing logs it, its filters' view, the stats' status
// recorder (stats.go), the values of the headers the proxy adds to the
// upstream request and its exchange (forward.Exchange). Each is written by the
// stream's handler once (the guard is never reused), then referenced by
// the request and what keeps it.
type streamMem struct {
	unlogged accesslog.Record
	st       h2stream
	cw       codeWriter
	x        forward.Exchange
	xfp      [1]string // x-forwarded-proto (fwdheaders.Proto.ApplyHTTP)
	rid      [1]string // x-request-id (addForwardHeaders)
	ridBytes [36]byte  // rid's bytes: a UUID (tracing.AppendRequestID)
}

// exchange is where the stream's upstream exchange is kept: a new one
// without m.
func (m *streamMem) exchange() *forward.Exchange {
	if m == nil {
		return new(forward.Exchange)
	}
	return &m.x
}

// xfpVal is where the stream's x-forwarded-proto value is kept: nil (the
// value is allocated) without m.
func (m *streamMem) xfpVal() *[1]string {
	if m == nil {
		return nil
	}
	return &m.xfp
}

// guardStream wraps next with the stream's timeouts from lim: its idle
// timeout (which a route's idle_timeout may replace, setStreamIdle) and
// its request timeout.
func guardStream(lim *Limits, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		// The handler changes r's header as it forwards it: what decides
		// the local reply's form (gRPC or not) is read now.
		ctx := r.Context()
		g := &streamGuard{w: w, grpc: forward.IsGRPC(r.Header), ctx: ctx}
		if _, ok := w.(headerResetter); ok {
			g.hdr, g.shared = w.Header(), true
		} else {
			g.hdr = http.Header{}
		}
		// The guard is found in the request's context (setStreamIdle):
		// the HTTP/2 server's stream context carries it, and the guard
		// ends that context, with no context of its own; another
		// server's (x/net's) gets a child context that does both.
		if !h2server.SetStreamValue(ctx, streamGuardKey{}, g) {
			ctx, g.cancel = context.WithCancel(ctx)
			defer g.cancel()
			g.ctx = ctx
			r = r.WithContext(context.WithValue(ctx, streamGuardKey{}, g))
		}
		// g.body is set before the timers that read it start (their
		// goroutines see it written; the handler may not touch g.mu
		// before one fires: a body read whole for the filters, body.go).
		if r.Body != nil && r.Body != http.NoBody {
			g.body = r.Body
			g.gb = guardedBody{ReadCloser: r.Body, g: g}
			r.Body = &g.gb
		}
		g.touch()
		st := lim.startStream() // stream.go
		idle := st.idle
		g.idle.Store(int64(idle))
		g.timer = time.AfterFunc(max(idle, time.Nanosecond), g.check)
		if idle <= 0 {
			g.timer.Stop() // armed by a route's idle_timeout, if any
		}
		defer g.timer.Stop()
		// x/net gives a request that ended with its HEADERS a zero
		// ContentLength and an empty body.
		g.reqDone.Store(r.ContentLength == 0)
		if !st.request.IsZero() && !g.reqDone.Load() {
			t := time.AfterFunc(time.Until(st.request), g.requestTimeout)
			defer t.Stop()
		}
		next(g, r)
		if g.finish() {
			// The response was cut short: reset the stream, as Envoy does.
			panic(http.ErrAbortHandler)
		}
	}
}

// setStreamIdle replaces the stream idle timeout of the stream of ctx with
// a route's idle_timeout (0 disables it); it does nothing outside a guarded
// stream.
func setStreamIdle(ctx context.Context, d time.Duration) {
	g, ok := ctx.Value(streamGuardKey{}).(*streamGuard)
	if !ok {
		return
	}
	g.idle.Store(int64(d))
	g.touch()
	if d > 0 {
		g.timer.Reset(d)
	} else {
		g.timer.Stop()
	}
}

func (g *streamGuard) touch() { g.last.Store(time.Now().UnixNano()) }

// check runs when the timer fires: it re-arms while there was activity,
// else ends the stream.
func (g *streamGuard) check() {
	idle := time.Duration(g.idle.Load())
	if idle <= 0 {
		return
	}
	if quiet := time.Since(time.Unix(0, g.last.Load())); quiet < idle {
		g.timer.Reset(idle - quiet)
		return
	}
	g.expire(forward.FailStreamIdle)
}

// requestTimeout runs when request_timeout has passed: a request whose body
// has not ended gets 408, as Envoy's ActiveStream::onRequestTimeout.
func (g *streamGuard) requestTimeout() {
	if g.reqDone.Load() {
		return
	}
	g.expire(forward.FailRequestTimeout)
}

// expire ends the stream: f (stream.go) when its response has not started,
// else a reset; the request context is cancelled.
func (g *streamGuard) expire(f forward.Failure) {
	if !g.mu.TryLock() {
		g.abort()
		return
	}
	if g.done || g.expired {
		g.mu.Unlock()
		return
	}
	g.expired = true
	if !g.wrote {
		g.wrote = true
		if g.shared {
			g.w.(headerResetter).ResetHeader() // the handler may still write into hdr
		}
		if g.grpc { // as streamLocalReply
			grpcLocalReply(g.w, grpcStatusForHTTP(f.Code), f.Flags, f.Body)
		} else {
			localReply(g.w, f.Code, f.Flags, f.Body)
		}
	} else {
		g.reset = true
	}
	g.mu.Unlock()
	g.cancelCtx()
	if g.body != nil {
		g.body.Close()
	}
}

// cancelCtx ends the request's context (g.ctx).
func (g *streamGuard) cancelCtx() {
	if g.cancel != nil {
		g.cancel()
		return
	}
	h2server.CancelStream(g.ctx)
}

// headerResetter is a ResponseWriter whose header map the guard lets the
// handler write into directly (the HTTP/2 server's): ResetHeader, before
// the response started, gives the writer a new map, which the guard's
// local reply fills while the handler still holds the old one.
type headerResetter interface{ ResetHeader() }

// streamAborter is a ResponseWriter that can reset its stream from
// another goroutine, waking a write blocked on flow control (the HTTP/2
// server's; x/net's cannot, and there a blocked write waits for the client
// or the connection's end).
type streamAborter interface{ Abort() }

// abort ends a stream whose timeout passed while a write held mu: the
// write has made no progress for the whole timeout (check re-arms while
// there is activity, and a write is activity when it starts), which is a
// client that does not open its window. Envoy counts that wait as idle
// and resets the stream; so does this, without the lock the write holds.
func (g *streamGuard) abort() {
	if !g.aborted.CompareAndSwap(false, true) {
		return
	}
	g.cancelCtx()
	if g.body != nil {
		g.body.Close()
	}
	if a, ok := g.w.(streamAborter); ok {
		a.Abort()
	}
}

// finish runs when the handler returned; it reports whether the stream
// must be reset. Trailers the handler set after its header (with
// http.TrailerPrefix) go out now.
func (g *streamGuard) finish() (reset bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.done = true
	if g.aborted.Load() {
		return true
	}
	if g.expired {
		return g.reset
	}
	if !g.wrote || g.shared {
		// Not wrote: x/net/http2 answers 200 with whatever headers.
		// Shared: the trailers are in w's map already.
		return false
	}
	wh := g.w.Header()
	for k, vv := range g.hdr {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			wh[k] = vv
		}
	}
	return false
}

func (g *streamGuard) Header() http.Header { return g.hdr }

func (g *streamGuard) WriteHeader(code int) {
	g.touch()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.expired || g.wrote {
		return
	}
	if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
		g.copyHeader() // an informational response; the final one follows
		g.w.WriteHeader(code)
		return
	}
	g.wrote = true
	g.copyHeader()
	g.w.WriteHeader(code)
}

func (g *streamGuard) Write(p []byte) (int, error) {
	g.touch()
	g.mu.Lock()
	if !g.wrote && !g.expired {
		g.mu.Unlock()
		g.WriteHeader(http.StatusOK)
		g.mu.Lock()
	}
	defer g.mu.Unlock()
	if g.expired || g.aborted.Load() {
		return 0, errH2StreamIdle
	}
	n, err := g.w.Write(p)
	g.touch()
	return n, err
}

// Flush sends what was written (http.Flusher).
func (g *streamGuard) Flush() { _ = g.FlushError() }

// FlushError is Flush with its error (http.ResponseController).
func (g *streamGuard) FlushError() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.expired || g.aborted.Load() {
		return errH2StreamIdle
	}
	if !g.wrote {
		g.wrote = true
		g.copyHeader()
		g.w.WriteHeader(http.StatusOK)
	}
	err := http.NewResponseController(g.w).Flush()
	g.touch()
	return err
}

// copyHeader moves the handler's header into w's, unless it is w's. mu
// held.
func (g *streamGuard) copyHeader() {
	if g.shared {
		return
	}
	wh := g.w.Header()
	for k, vv := range g.hdr {
		wh[k] = vv
	}
}

// guardedBody counts request body reads as stream activity.
type guardedBody struct {
	io.ReadCloser
	g *streamGuard
}

func (b *guardedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.g.touch()
	}
	if errors.Is(err, io.EOF) {
		b.g.reqDone.Store(true)
	}
	return n, err
}

var (
	_ http.ResponseWriter = (*streamGuard)(nil)
	_ http.Flusher        = (*streamGuard)(nil)
)

// max_headers_count and max_request_headers_kb apply to the request heads
// that x/net/http2 parses (the strait codec applies them while it parses,
// h1.go), counted as Envoy counts them: a field per header line (each
// value of a repeated name), its size the name's and the value's length
// (HeaderMap::size and byteSize); on
// HTTP/2 the pseudo-headers are fields too. net/http's MaxHeaderBytes
// allows 4 KiB more than it says and x/net/http2's adds 32 bytes per
// field (RFC 9113's header list size), so they only bound the parse.

// h2HeaderListSize is the MaxHeaderBytes an HTTP/2 server is given: a
// head within lim fits, however it is counted.
func h2HeaderListSize(lim *Limits) int {
	return lim.MaxRequestHeadBytes + 32*lim.MaxHeadersCount
}

// requestHeadOverLimits reports whether r's head is past lim.
func requestHeadOverLimits(r *http.Request, lim *Limits) bool {
	n, size := 0, 0
	if r.ProtoMajor >= 2 {
		// :method, :scheme, :authority and :path (CONNECT: the first and
		// the third).
		n, size = 2, len(":method")+len(r.Method)+len(":authority")+len(r.Host)
		if r.Method != http.MethodConnect {
			n += 2
			size += len(":scheme") + len(fwdheaders.SchemeOf(r.TLS != nil)) + len(":path") + len(r.RequestURI)
		}
	} else if r.Host != "" {
		n, size = 1, len("Host")+len(r.Host) // net/http keeps Host out of the map
	}
	fields, bytes := cluster.HeadSize(r.Header)
	n, size = n+fields, size+bytes
	return n > lim.MaxHeadersCount && lim.MaxHeadersCount > 0 || size > lim.MaxRequestHeadBytes && lim.MaxRequestHeadBytes > 0
}

// limitStreamHead resets an HTTP/2 stream whose request head is past lim,
// as Envoy's HTTP/2 codec does (ConnectionImpl::saveHeader in
// source/common/http/http2/codec_impl.cc fails the header callback, and
// the stream is reset with INTERNAL_ERROR; no 431 as on HTTP/1.1).
func limitStreamHead(lim *Limits, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if requestHeadOverLimits(r, lim) {
			panic(http.ErrAbortHandler) // x/net/http2 resets the stream: INTERNAL_ERROR
		}
		next(w, r)
	}
}
