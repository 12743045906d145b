package h1

// This file is the HTTP/1.1 request's exchange with an HTTP/1.1 upstream:
// sending the request (with its body copied by its own goroutine), the
// router's attempts and retries, reading the response head and copying
// the body back.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/forward"
	"github.com/straitmesh/strait/internal/proxy/http1"
	"github.com/straitmesh/strait/internal/proxy/route"
	"github.com/straitmesh/strait/internal/proxy/router"
)

// Forward sends the request to ep on cl and relays the response, retrying
// as the route's retry policy (and the request's x-envoy-* headers, ov)
// allow. It reports whether the downstream connection can carry another
// request.
func (x *Exchange) Forward(cl *cluster.Cluster, ep cluster.Endpoint, rt *route.Route, tgt *route.WeightedCluster, ov *router.Overrides) bool {
	req := x.Req
	isHead, reqClose, reqMinor := req.IsHead, req.Close, req.Minor
	retry, timeout := router.NewRetry(rt.Retry, ov, rt.Timeout)
	var slot forward.RetrySlot // max_retries
	defer slot.Release()

	w := x.appendRequestHead((*x.Wbuf)[:0], ep)
	// x-envoy-attempt-count is the head's last field; a retry rewrites its
	// value in place (attemptAt..attemptEnd).
	attemptAt, attemptEnd := 0, 0
	if rt.IncludeAttemptCount {
		w = append(w[:len(w)-2], attemptCountField...)
		attemptAt = len(w)
		w = append(w, "1\r\n\r\n"...)
		attemptEnd = attemptAt + 1
	}
	// A body already in the buffer goes in the same write as the head, and
	// stays replayable; so does one read whole because a retry may need
	// it, or because the HTTP filters read it (x.Body). Anything else is
	// streamed by a second goroutine, and can't be sent again once some
	// of it left.
	streamBody := false
	switch req.Framing {
	case http1.FramingLength:
		if x.Body != nil {
			w = append(w, x.Body...)
		} else if buf := x.R.Buffered(); int64(len(buf)) >= req.ContentLength {
			w = append(w, buf[:req.ContentLength]...)
			x.R.Discard(int(req.ContentLength))
		} else if retry.Enabled() && req.ContentLength <= forward.RetryBufferLimit {
			if req.Expect100 && reqMinor == 1 {
				// The client waits for this before sending the body.
				if _, err := x.NC.Write(continue100); err != nil {
					return false
				}
			}
			n := len(w)
			w = slices.Grow(w, int(req.ContentLength))[:n+int(req.ContentLength)]
			if _, err := io.ReadFull(&http1.LengthReader{R: x.R, Left: req.ContentLength}, w[n:]); err != nil {
				*x.Wbuf = w
				f := x.D.ClientFailure(err)
				cl.Stats.AddResponse(f.Code)
				if f.Code != 0 {
					x.D.WriteLocal(f.Code, f.Flags, f.Body, false)
				}
				return false
			}
		} else {
			streamBody = true
		}
	case http1.FramingChunked:
		streamBody = true
	}
	*x.Wbuf = w

	ctx := context.Background()
	// The route timeout runs from here until the response is complete,
	// across retries; a per-try timeout bounds each attempt.
	routeExpiry := http1.Deadline(timeout)
	var (
		uc    *cluster.UpstreamConn
		bc    *bodyCopy
		tried []string
		err   error
	)
	retryFlags := func(f forward.Failure) forward.Failure {
		if retry.LimitExceeded {
			f.Flags += ",URX"
		}
		return f
	}
	for {
		tried = append(tried, ep.Address)
		if attemptEnd > 0 && retry.Retried > 0 {
			w, attemptEnd = setAttemptCount(w, attemptAt, attemptEnd, retry.Retried+1)
			*x.Wbuf = w
		}
		attemptExpiry := routeExpiry
		if pt := retry.PerTryTimeout(); pt > 0 {
			if e := time.Now().Add(pt); routeExpiry.IsZero() || e.Before(routeExpiry) {
				attemptExpiry = e
			}
		}
		// Once bytes of a streamed body left, the request can't be sent
		// again; before that (a connect failure) it can.
		if uc, err = getConn(ctx, cl, ep, streamBody); err != nil {
			f := forward.ConnectFailure(err) // UO when a circuit breaker is open: not retried
			if f.Flags != "UO" && retry.OnFailure(router.FailConnect, false, bc == nil) && slot.Admit(cl) && forward.BackOff(&retry, routeExpiry) {
				forward.ReportRetriedFailure(cl, ep, f)
				ep = x.retryEndpoint(cl, &retry, tried, ep)
				continue
			}
			forward.CountRetryOutcome(cl, &retry, false)
			return x.D.UpstreamFailed(cl, ep, retryFlags(f), err, !streamBody)
		}
		x.logUpstream(uc)
		var n int
		var got bool
		for attempt := 0; ; attempt++ {
			uc.Exchange()
			uc.D.SetWriteTimeouts(x.Idle, attemptExpiry)
			uc.D.SetReadTimeouts(x.Idle, attemptExpiry)
			n, err = uc.Write(w)
			if err == nil && streamBody {
				if req.Expect100 && reqMinor == 1 {
					// The client waits for this before sending the body; the
					// upstream's own 100 is dropped (Envoy's proxy_100_continue
					// false).
					if _, err := x.NC.Write(continue100); err != nil {
						uc.Close()
						return false
					}
				}
				bc = x.startBodyCopy(uc)
			}
			got = false
			if err == nil {
				got, err = x.readResponseHead(uc, isHead, reqMinor, bc, attemptExpiry)
			} else if n == 0 {
				err = fmt.Errorf("%w: %w", errRetryNotWrite, err)
			}
			if err == nil {
				break
			}
			uc.Close()
			if bc != nil {
				return x.bodyAborted(cl, ep, bc, err)
			}
			// Once more on a new connection only if this one was reused (the
			// upstream may have closed it while idle), no response byte came,
			// and sending the request again is safe: it is idempotent, or it
			// never left.
			safe := n == 0 || http1.Idempotent(http1.UnsafeString(req.Method)) && !streamBody
			if !uc.Reused || attempt > 0 || got || !safe || !http1.StaleConn(err) {
				break
			}
			if uc, err = cl.ReplaceConn(ctx, ep, uc); err != nil {
				err = fmt.Errorf("%w: %w", errRetryConnect, err)
				break
			}
			x.logUpstream(uc)
		}
		if err != nil {
			f := classify(err)
			kind := router.FailReset
			switch {
			case errors.Is(err, errRetryConnect):
				f, kind = forward.ConnectFailure(err), router.FailConnect
			case errors.Is(err, errRouteTimeout):
				if !attemptExpiry.Equal(routeExpiry) && time.Now().Before(routeExpiry) || routeExpiry.IsZero() {
					kind = router.FailPerTryTimeout
					cl.Stats.Router.PerTryTimeout.Add(1)
				} else {
					kind = 0 // the route's own timeout: no retry
					cl.Stats.Router.Timeout.Add(1)
				}
			case f.Code == 0, f.Code == 408:
				kind = 0 // the client left or was too slow
			}
			if kind != 0 && !streamBody && retry.OnFailure(kind, n > 0, true) && slot.Admit(cl) && forward.BackOff(&retry, routeExpiry) {
				forward.ReportRetriedFailure(cl, ep, f)
				ep = x.retryEndpoint(cl, &retry, tried, ep)
				continue
			}
			forward.CountRetryOutcome(cl, &retry, false)
			return x.D.UpstreamFailed(cl, ep, retryFlags(f), err, !streamBody)
		}
		if retry.Active() && bc == nil {
			status := x.Resp.Status
			grpc := -1
			if status == 200 {
				grpc = grpcStatusOf(x.Resp.Headers.Get("Grpc-Status"))
			}
			if retry.OnStatus(status, grpc, true) && slot.Admit(cl) && forward.BackOff(&retry, routeExpiry) {
				cl.Stats.AddResponse(status)
				cl.ReportStatus(ep, status)
				// As Envoy's router (Filter::onUpstreamHeaders), the
				// attempt is reset unless its response ended with its
				// head and the whole request was sent (here it was: no
				// body streams): then the exchange is complete and the
				// connection goes back to the pool; else the response is
				// dropped with its connection. The downstream connection
				// is not touched either way.
				if endsWithHead(&x.Resp) && !x.Resp.Close {
					cl.PutConn(uc)
				} else {
					uc.Close()
				}
				ep = x.retryEndpoint(cl, &retry, tried, ep)
				continue
			}
		}
		break
	}
	forward.CountRetryOutcome(cl, &retry, true)
	x.mutateResponse(rt, tgt)
	if retry.LimitExceeded {
		x.RespExtra = append(x.RespExtra, http1.Header{Name: []byte("x-strait-response-flags"), Value: []byte("URX")})
		x.Rec.Flags = "URX"
	}
	x.Rec.UpstreamHost = ep.Address

	resp := &x.Resp
	cl.Stats.AddResponse(resp.Status)
	cl.ReportStatus(ep, resp.Status)
	bodyDone := bc == nil
	if bc != nil {
		// The upstream usually answers after reading the whole body, so the
		// copier is done or about to be; if it isn't soon, the upstream
		// answered early and the rest of the body won't be read.
		t := time.NewTimer(bodyFinishWait)
		select {
		case err := <-bc.done:
			x.Rec.BytesReceived = bc.progress.Load() // a chunked body; endLog has the length of another
			bodyDone, bc = err == nil, nil
		case <-t.C:
		}
		t.Stop()
	}
	keep := !reqClose && bodyDone && !x.D.Closing()
	// An upstream connection is reusable only if both messages were
	// complete: a request body cut short leaves the upstream waiting for
	// the rest.
	upKeep := bodyDone && !resp.Close && resp.Framing != http1.FramingClose
	// Chunked and close-delimited bodies go downstream chunked, or
	// close-delimited to an HTTP/1.0 client.
	unsized := resp.Framing == http1.FramingChunked || resp.Framing == http1.FramingClose
	downChunked := unsized && reqMinor == 1
	if unsized && reqMinor == 0 {
		keep = false
	}

	// Response head, then as much body as is buffered, in one write.
	w = x.D.AppendResponseHead((*x.Wbuf)[:0], reqMinor, keep)
	complete := false
	switch resp.Framing {
	case http1.FramingNone:
		complete = true
	case http1.FramingLength:
		if buf := uc.R.Buffered(); int64(len(buf)) >= resp.ContentLength {
			w = append(w, buf[:resp.ContentLength]...)
			uc.R.Discard(int(resp.ContentLength))
			complete = true
			x.Rec.BytesSent = resp.ContentLength
		}
	}
	*x.Wbuf = w
	_, err = x.NC.Write(w)
	if err == nil && !complete {
		err = x.copyResponseBody(uc, downChunked)
	}
	if bc != nil {
		// The response is complete but the request body isn't: the client
		// or the upstream stopped early. Neither connection can be reused.
		x.NC.Close()
		uc.Close()
		// The copier's error is moot: both connections are closed.
		_ = <-bc.done
		return false
	}
	if err != nil {
		// Mid-body failure: abort so the client sees a truncated response.
		uc.Close()
		return false
	}
	if upKeep {
		cl.PutConn(uc)
	} else {
		uc.Close()
	}
	return keep
}

// endsWithHead reports whether a response has no body after its head
// (Envoy's end_stream with the headers).
func endsWithHead(r *http1.Response) bool {
	return r.Framing == http1.FramingNone || r.Framing == http1.FramingLength && r.ContentLength == 0
}

var continue100 = []byte("HTTP/1.1 100 Continue\r\n\r\n")

// bodyAborted ends an exchange whose request body was streaming when no
// response head came: uc is closed. If the client side failed, its error
// decides (400 for bad framing, 408 for a timeout, nothing when the client
// left); else the upstream's does. Either way the connection closes, once
// the copier has ended.
func (x *Exchange) bodyAborted(cl *cluster.Cluster, ep cluster.Endpoint, bc *bodyCopy, upErr error) bool {
	if bc.downFailed.Load() {
		berr := <-bc.done
		f := x.D.ClientFailure(berr)
		x.Log.Debug("request body failed", "cluster", cl.Name, "endpoint", ep.Address, "error", berr)
		cl.Stats.AddResponse(f.Code)
		if f.Code != 0 {
			x.D.WriteLocal(f.Code, f.Flags, f.Body, false)
		}
		return false
	}
	f := classify(upErr)
	x.Log.Debug("upstream request failed", "cluster", cl.Name, "endpoint", ep.Address, "error", upErr)
	cl.Stats.AddResponse(f.Code)
	if f.Code != 0 {
		x.D.WriteLocal(f.Code, f.Flags, f.Body, false)
		x.D.Abandon() // the copier may still be reading: just close
	}
	// The copier may be blocked reading the client: closing ends it.
	x.NC.Close()
	// The upstream failure is what is reported; the copier's error is moot.
	_ = <-bc.done
	return false
}

// readResponseHead reads the final response head into x.Resp, relaying
// interim (1xx) responses downstream. got reports whether any response
// byte arrived. Without a body copier (bc, which would see the client
// leave), it checks every clientPollInterval that the client is still
// there, and gives up with errClientGone when it is not.
func (x *Exchange) readResponseHead(uc *cluster.UpstreamConn, isHead bool, reqMinor int, bc *bodyCopy, routeExpiry time.Time) (got bool, err error) {
	// The connection's own idle timeout is per read call; this wait is
	// re-entered after each poll, so it keeps its own idle expiry, which
	// progress of the request body (or an interim response) pushes back.
	var poll time.Time
	if bc == nil {
		// On a whole second, so that requests in the same second share
		// the socket deadline and it is not moved per request.
		poll = http1.CoarseNow().Truncate(clientPollInterval).Add(2 * clientPollInterval)
	}
	idleExpiry := http1.Deadline(x.Idle)
	var sent int64
	setHard := func() {
		h := routeExpiry
		for _, t := range []time.Time{poll, idleExpiry} {
			if !t.IsZero() && (h.IsZero() || t.Before(h)) {
				h = t
			}
		}
		uc.D.SetReadHard(h)
	}
	setHard()
	defer uc.D.SetReadHard(routeExpiry)
	for {
		head, err := uc.R.ReadHead(http1.DefaultMaxHeadBytes)
		if err != nil {
			got = got || len(uc.R.Buffered()) > 0
			if !http1.IsTimeout(err) {
				if errors.Is(err, io.EOF) {
					return got, http1.ErrNoResponse
				}
				return got, err
			}
			now := time.Now()
			if !routeExpiry.IsZero() && !now.Before(routeExpiry) {
				return got, errRouteTimeout
			}
			if !idleExpiry.IsZero() && !now.Before(idleExpiry) {
				if bc == nil || bc.progress.Load() == sent {
					return got, errStreamIdle
				}
				sent = bc.progress.Load()
				idleExpiry = http1.Deadline(x.Idle)
			}
			if !poll.IsZero() && !now.Before(poll) {
				if http1.Peek(x.NC) == http1.PeekClosed {
					return got, errClientGone
				}
				poll = now.Add(clientPollInterval)
			}
			setHard()
			continue
		}
		got = true
		if err := http1.ParseResponse(head, &x.Resp, isHead); err != nil {
			return got, err
		}
		if x.Resp.Status >= 200 {
			return got, nil
		}
		if x.Resp.Status == 101 {
			return got, errSwitched
		}
		if x.Resp.Status == 100 || reqMinor == 0 {
			continue // 100-continue is answered by the proxy; 1.0 clients get no 1xx
		}
		w := x.D.AppendResponseHead((*x.Wbuf)[:0], 1, true)
		*x.Wbuf = w
		if _, err := x.NC.Write(w); err != nil {
			return got, err
		}
		if !idleExpiry.IsZero() {
			idleExpiry = http1.Deadline(x.Idle)
			setHard()
		}
	}
}

// getConn is the connection an attempt goes out on. A streamed body can't
// be sent again once bytes of it left, so a pooled connection is checked
// with a Peek before it carries one: the idle watch (cluster/idlewatch)
// may not have collected a close that arrived just before, and the
// request would fail where a fresh connection serves it. Other requests
// keep the pool's verdict, and are sent again on a fresh connection when
// a reused one turns out closed. Either way the fresh connection replaces
// the pooled one (cluster.ReplaceConn): the request is counted once in
// upstream_rq_total.
func getConn(ctx context.Context, cl *cluster.Cluster, ep cluster.Endpoint, streamBody bool) (*cluster.UpstreamConn, error) {
	uc, err := cl.GetConn(ctx, ep)
	if err != nil || !streamBody || !uc.Reused || http1.Peek(uc.Conn) == http1.PeekQuiet {
		return uc, err
	}
	return cl.ReplaceConn(ctx, ep, uc)
}
