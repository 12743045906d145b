package forward

// This file is the exchange for the paths that forward an http.Request
// (HTTP/2 streams and HTTP/1.1 to an HTTP/2 cluster): timeouts, retries
// with a replayable body, rewrites and header mutations, as package router
// decides them.

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"sync"
	"time"

	"golang.org/x/net/http2"

	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/route"
	"github.com/straitmesh/strait/internal/proxy/router"
)

// httpHeaders adapts http.Header to router.HeaderEditor.
type httpHeaders http.Header

func (h httpHeaders) Has(name string) bool {
	_, ok := h[http.CanonicalHeaderKey(name)]
	return ok
}
func (h httpHeaders) Del(name string)        { delete(h, http.CanonicalHeaderKey(name)) }
func (h httpHeaders) Add(name, value string) { http.Header(h).Add(name, value) }

var _ router.HeaderEditor = httpHeaders{}

// TakeOverrides reads and removes the router's x-envoy-* request headers.
func TakeOverrides(h http.Header) *router.Overrides {
	var o *router.Overrides
	for k, vv := range h {
		if len(k) < 16 || !router.IsRouterHeader(k) {
			continue
		}
		if o == nil {
			o = &router.Overrides{}
		}
		if len(vv) > 0 {
			o.Set(k, vv[0])
		}
		delete(h, k)
	}
	return o
}

// MutateRequest applies the route's rewrites and request header
// mutations for target t to out (whose URL it replaces, not edits).
func MutateRequest(out *http.Request, rt *route.Route, t *route.WeightedCluster) {
	if rt.Rewrite != nil {
		u := *out.URL
		p := u.EscapedPath()
		np := rt.Rewrite.Apply(p, rt.MatchedLen(p))
		if dec, err := url.PathUnescape(np); err == nil {
			u.Path, u.RawPath = dec, np
			if u.EscapedPath() != np {
				u.RawPath = ""
			}
		}
		out.URL = &u
	}
	if h := rt.RequestHostRewrite(t); h != "" {
		out.Host = h
	}
	e := httpHeaders(out.Header)
	t.RequestHeaders.Apply(e)
	rt.RequestHeaders.Apply(e)
}

// MutateResponse applies the response header mutations to h.
func MutateResponse(h http.Header, rt *route.Route, t *route.WeightedCluster) {
	e := httpHeaders(h)
	t.ResponseHeaders.Apply(e)
	rt.ResponseHeaders.Apply(e)
}

// Exchange is the outcome of RoundTrip.
type Exchange struct {
	Resp *http.Response
	// Fail is the local reply when Resp is nil (code 0: the client left).
	Fail Failure
	Err  error
	// LimitExceeded: the last outcome was retriable but no retry was left
	// (response flag URX).
	LimitExceeded bool
	// route is the route timeout's context (routed: started), tries the
	// per-try timeouts' (deadline.go).
	route  deadlineCtx
	routed bool
	tries  []*deadlineCtx
	// slot is the retry circuit breaker's slot of the last retry.
	slot RetrySlot
	// first is the first attempt's request: part of the exchange, where
	// a retry's is allocated (the last attempt's transport may still
	// read its own).
	first http.Request
}

// Done releases the exchange's timers and retry slot; call it once the
// response body is finished.
func (x *Exchange) Done() {
	for _, t := range x.tries {
		t.release()
	}
	if x.routed {
		x.route.release()
	}
	x.slot.Release()
}

// attempt is the request of attempt retried+1 (retried retries before
// it) with context actx: the first is x.first, a retry's is new, with
// its own URL and header, because the last attempt's transport may
// still read its request (and the HTTP/2 pool sets the URL's host).
func (x *Exchange) attempt(actx context.Context, out *http.Request, retried int) *http.Request {
	if retried == 0 {
		// WithContext is inlined: its copy stays in x.
		x.first = *out.WithContext(actx)
		return &x.first
	}
	req := out.WithContext(actx)
	u := *out.URL
	req.URL = &u
	req.Header = out.Header.Clone()
	return req
}

// RoundTrip sends out (whose context is the downstream stream's) to
// ep on cl, with the route timeout and retries of rt and the request's
// overrides ov.
func RoundTrip(out *http.Request, cl *cluster.Cluster, ep cluster.Endpoint, rt *route.Route, ov *router.Overrides, dst netip.AddrPort, src cluster.OriginalSource) *Exchange {
	x := &Exchange{}
	x.RoundTrip(out, cl, ep, rt, ov, dst, src)
	return x
}

// RoundTrip is the package's RoundTrip into x, which must be a new,
// zero Exchange (a caller's storage: the HTTP/2 path keeps it with its
// stream).
func (x *Exchange) RoundTrip(out *http.Request, cl *cluster.Cluster, ep cluster.Endpoint, rt *route.Route, ov *router.Overrides, dst netip.AddrPort, src cluster.OriginalSource) {
	retry, timeout := router.NewRetry(rt.Retry, ov, rt.Timeout)
	ctx := out.Context()
	if grpcTimeout, ok := grpcRouteTimeout(out, rt); ok {
		timeout = grpcTimeout
	}
	routeCtx := ctx //nolint:contextcheck // the route's deadlineCtx is ctx's child (deadline.go), as context.WithTimeout's
	if timeout > 0 {
		x.route.start(ctx, timeout)
		x.routed = true
		routeCtx = &x.route
	}
	// A body the proxy read whole (out.GetBody: for the HTTP filters that
	// read bodies) is sent again by a retry whatever its size, from its
	// own reader per attempt; one that streams is recorded as attempts
	// read it, up to RetryBufferLimit, and is replayable while all of it
	// is.
	var rb *replayBody
	hasBody := out.Body != nil && out.Body != http.NoBody
	whole := hasBody && out.GetBody != nil
	if hasBody && !whole && retry.Enabled() {
		rb = &replayBody{src: out.Body, limit: RetryBufferLimit}
	}
	var tried []string
	for {
		tried = append(tried, ep.Address)
		actx := routeCtx //nolint:contextcheck // a per-try deadlineCtx is routeCtx's child (deadline.go)
		if pt := retry.PerTryTimeout(); pt > 0 {
			try := &deadlineCtx{}
			try.start(routeCtx, pt)
			x.tries = append(x.tries, try)
			actx = try
		}
		req := x.attempt(actx, out, retry.Retried)
		if rt.IncludeAttemptCount {
			req.Header["X-Envoy-Attempt-Count"] = []string{strconv.Itoa(retry.Retried + 1)}
		}
		if rb != nil {
			req.Body = rb.attempt()
		} else if whole && retry.Retried > 0 {
			b, err := out.GetBody()
			if err != nil {
				x.Err, x.Fail = err, FailTerminated
				CountRetryOutcome(cl, &retry, false)
				return
			}
			req.Body = b
		}
		resp, err := cl.RoundTrip(req, ep)
		replayable := rb == nil || rb.replayable()
		if err != nil {
			x.Err = err
			if ctx.Err() != nil {
				if DeadlinePassed(ctx) {
					x.Fail = Failure{504, "UT", "upstream request timeout"}
					return
				}
				x.Fail = FailClientGone
				return
			}
			if DeadlinePassed(routeCtx) {
				cl.Stats.Router.Timeout.Add(1)
				x.Fail = FailRouteTimeout
				x.LimitExceeded = retry.LimitExceeded
				CountRetryOutcome(cl, &retry, false)
				return
			}
			if errors.Is(err, cluster.ErrOverflow) {
				// A circuit breaker is open: 503 UO, not retried.
				x.Fail = Failure{503, "UO", BodyOverflow}
				x.LimitExceeded = retry.LimitExceeded
				CountRetryOutcome(cl, &retry, false)
				return
			}
			kind, f := router.FailReset, FailTerminated
			switch {
			case DeadlinePassed(actx):
				kind, f = router.FailPerTryTimeout, FailRouteTimeout
				cl.Stats.Router.PerTryTimeout.Add(1)
			case isConnectError(err):
				kind, f = router.FailConnect, FailConnect
			case isRefusedStream(err):
				kind = router.FailRefused
			case isUpstreamProtocolError(err):
				f = FailProtocol
			}
			if lf := LocalFailureOf(f); lf != 0 {
				cl.ReportLocalFailure(ep, lf) // outlier detection (failure.go)
			}
			if retry.OnFailure(kind, kind != router.FailConnect, replayable) && x.slot.Admit(cl) && BackOffCtx(routeCtx, &retry) {
				cl.Stats.Router.Retry.Add(1)
				ep = Repick(cl, &retry, dst, src, tried, ep)
				continue
			}
			x.Fail = f
			x.LimitExceeded = retry.LimitExceeded
			CountRetryOutcome(cl, &retry, false)
			return
		}
		if err := cluster.CheckResponseHead(resp); err != nil {
			// Past the response head limits, as the strait codec's
			// parser refuses it: a protocol error.
			resp.Body.Close()
			x.Err, x.Fail = err, FailProtocol
			CountRetryOutcome(cl, &retry, false)
			return
		}
		cl.ReportStatus(ep, resp.StatusCode) // outlier detection, every attempt
		if retry.Active() {
			grpc := -1
			if v := resp.Header.Get("Grpc-Status"); v != "" {
				if n, err := strconv.Atoi(v); err == nil {
					grpc = n
				}
			}
			if retry.OnStatus(resp.StatusCode, grpc, replayable) && x.slot.Admit(cl) && BackOffCtx(routeCtx, &retry) {
				cl.Stats.AddResponse(resp.StatusCode)
				resp.Body.Close()
				cl.Stats.Router.Retry.Add(1)
				ep = Repick(cl, &retry, dst, src, tried, ep)
				continue
			}
		}
		x.Resp = resp
		x.LimitExceeded = retry.LimitExceeded
		CountRetryOutcome(cl, &retry, true)
		return
	}
}

// grpcRouteTimeout is a gRPC request's timeout on a route with
// max_grpc_timeout: its grpc-timeout (none: infinity), capped unless the
// cap is 0.
func grpcRouteTimeout(r *http.Request, rt *route.Route) (d time.Duration, ok bool) {
	if !rt.HasMaxGRPCTimeout || !IsGRPC(r.Header) {
		return 0, false
	}
	t, has := ParseGRPCTimeout(r.Header.Get("Grpc-Timeout"))
	switch {
	case rt.MaxGRPCTimeout == 0:
		if !has {
			return 0, true
		}
		return t, true
	case !has || t > rt.MaxGRPCTimeout:
		return rt.MaxGRPCTimeout, true
	}
	return t, true
}

// isConnectError reports a failed connect: the dial, or the upstream TLS
// handshake (a connection failure to Envoy too: UF, retried on
// connect-failure).
func isConnectError(err error) bool {
	var ne *net.OpError
	var te *cluster.TransportError
	return errors.As(err, &ne) && ne.Op == "dial" || errors.As(err, &te)
}

// isUpstreamProtocolError reports an upstream response the transport
// refused as malformed: a head past the limits (x/net/http2 reports a
// header value longer than its header list limit as COMPRESSION_ERROR),
// an HTTP/2 protocol violation or an HTTP/1.1 response the codec refused
// (Envoy: 502 UPE).
func isUpstreamProtocolError(err error) bool {
	var ce http2.ConnectionError
	if errors.As(err, &ce) {
		return http2.ErrCode(ce) == http2.ErrCodeCompression || http2.ErrCode(ce) == http2.ErrCodeProtocol
	}
	return cluster.IsResponseHeadTooLarge(err) || errors.Is(err, cluster.ErrMalformedResponse)
}

func isRefusedStream(err error) bool {
	var se http2.StreamError
	return errors.As(err, &se) && se.Code == http2.ErrCodeRefusedStream
}

// replayBody records a request body as attempts read it, up to limit, so
// that a retry can send it again. Each attempt reads through its own
// reader; starting a new one detaches the previous (its reads fail), so a
// transport still reading for a failed attempt can't take bytes from the
// next one: whatever it read is recorded, and the next attempt gets it.
type replayBody struct {
	readMu sync.Mutex // held during a read of src
	src    io.ReadCloser
	limit  int

	mu       sync.Mutex // guards the fields below; never held during a read
	recorded []byte
	eof      bool
	overflow bool
	current  *replayReader
}

func (b *replayBody) attempt() io.ReadCloser {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := &replayReader{b: b}
	b.current = r
	return r
}

// replayable reports whether the whole body read so far is recorded.
func (b *replayBody) replayable() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.overflow
}

type replayReader struct {
	b   *replayBody
	pos int
}

var errDetached = errors.New("request body: a retry took over")

func (r *replayReader) Read(p []byte) (int, error) {
	b := r.b
	for {
		b.mu.Lock()
		switch {
		case b.current != r:
			b.mu.Unlock()
			return 0, errDetached
		case !b.overflow && r.pos < len(b.recorded):
			n := copy(p, b.recorded[r.pos:])
			r.pos += n
			b.mu.Unlock()
			return n, nil
		case b.eof:
			b.mu.Unlock()
			return 0, io.EOF
		}
		b.mu.Unlock()
		b.readMu.Lock()
		b.mu.Lock()
		if !b.overflow && r.pos < len(b.recorded) {
			// Another attempt's read landed meanwhile: replay it first.
			b.mu.Unlock()
			b.readMu.Unlock()
			continue
		}
		b.mu.Unlock()
		n, err := b.src.Read(p)
		b.mu.Lock()
		if n > 0 && !b.overflow {
			if len(b.recorded)+n > b.limit {
				b.overflow, b.recorded = true, nil
			} else {
				b.recorded = append(b.recorded, p[:n]...)
				r.pos = len(b.recorded)
			}
		}
		if errors.Is(err, io.EOF) {
			b.eof = true
		}
		b.mu.Unlock()
		b.readMu.Unlock()
		return n, err
	}
}

// Close detaches the reader; the downstream body is closed by its owner.
func (r *replayReader) Close() error {
	r.b.mu.Lock()
	defer r.b.mu.Unlock()
	if r.b.current == r {
		r.b.current = nil
	}
	return nil
}
