package hcm

// This file is the HTTP/1.1 path's local replies: what the proxy answers
// itself (errors of the codec, routing, upstream failures and timeouts,
// with Envoy's codes and response flags), and how a failure is classified.

import (
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/forward"
	"github.com/straitmesh/strait/internal/proxy/http1"
)

// errorReply answers a request the codec could not accept or finish; the
// connection closes (gracefully) after it.
func (c *h1conn) errorReply(code int, body string) {
	c.rec.Code = code
	if code == 400 || code == 426 {
		c.rec.Flags = "DPE"
	}
	w := append(c.wbuf[:0], "HTTP/1.1 "...)
	w = strconv.AppendInt(w, int64(code), 10)
	w = append(w, ' ')
	w = append(w, reasonPhrase(code)...)
	if body != "" {
		w = append(w, "\r\ncontent-type: text/plain"...)
	}
	w = append(w, "\r\ncontent-length: "...)
	w = strconv.AppendInt(w, int64(len(body)), 10)
	w = append(w, "\r\nconnection: close\r\n\r\n"...)
	w = append(w, body...)
	c.wbuf = w
	// A failed write means the client has gone; the connection is closed
	// after this reply either way.
	_, _ = c.nc.Write(w)
	c.linger = true
}

// localReply answers without an upstream. The request body, if any, is
// read and dropped so the connection stays usable, unless it is large or
// the client waits for 100-continue.
func (c *h1conn) localReply(code int, flags, body string) bool {
	keep := !c.req.Close && !c.closing() && c.discardRequestBody()
	return c.writeLocal(code, flags, body, keep) && keep
}

func (c *h1conn) writeLocal(code int, flags, body string, keep bool) bool {
	w := c.appendLocalStatus(code)
	if flags == "UO" {
		w = append(w, "x-envoy-overloaded: true\r\n"...)
	}
	for i := range c.respExtra {
		w = http1.AppendHeader(w, c.respExtra[i].Name, c.respExtra[i].Value)
	}
	w = c.appendLocalHeaders(w, code, flags, nil) // h1stream.go
	return c.finishLocal(w, body, keep)
}

// appendLocalStatus starts a local reply in c.wbuf: its status line.
func (c *h1conn) appendLocalStatus(code int) []byte {
	c.rec.Code = code
	w := append(c.wbuf[:0], "HTTP/1.1 "...)
	w = strconv.AppendInt(w, int64(code), 10)
	w = append(w, ' ')
	w = append(w, reasonPhrase(code)...)
	return append(w, "\r\n"...)
}

// finishLocal ends a local reply whose status line and own headers are in
// w: framing, connection and body; it writes it and reports whether the
// write succeeded. A reply that does not keep the connection makes it
// close gracefully.
func (c *h1conn) finishLocal(w []byte, body string, keep bool) bool {
	if body != "" {
		w = append(w, "content-type: text/plain\r\n"...)
	}
	w = append(w, "content-length: "...)
	w = strconv.AppendInt(w, int64(len(body)), 10)
	w = append(w, "\r\n"...)
	if !keep {
		w = append(w, "connection: close\r\n"...)
	} else if c.req.Minor == 0 {
		w = append(w, "connection: keep-alive\r\n"...)
	}
	w = append(w, "\r\n"...)
	if !c.req.IsHead {
		w = append(w, body...)
		c.rec.BytesSent = int64(len(body))
	}
	c.wbuf = w
	_, err := c.nc.Write(w)
	if !keep {
		c.linger = true
	}
	return err == nil
}

func (c *h1conn) discardRequestBody() bool {
	req := &c.req
	switch req.Framing {
	case http1.FramingNone:
		return true
	case http1.FramingLength:
		if buf := c.r.Buffered(); int64(len(buf)) >= req.ContentLength {
			c.r.Discard(int(req.ContentLength))
			return true
		}
		if req.Expect100 || req.ContentLength > maxDiscardBody {
			return false
		}
		n, err := io.Copy(io.Discard, &http1.LengthReader{R: c.r, Left: req.ContentLength})
		return err == nil && n == req.ContentLength
	case http1.FramingChunked:
		if req.Expect100 && len(c.r.Buffered()) == 0 {
			return false
		}
		c.reqCh.Reset(c.r)
		n, err := io.Copy(io.Discard, io.LimitReader(&c.reqCh, maxDiscardBody))
		return err == nil && n < maxDiscardBody && c.reqCh.Done()
	}
	return false
}

var (
	// errHTTP10 is an HTTP/1.0 request on an HCM without
	// http_protocol_options.accept_http_10: Envoy's HTTP/1.1 codec answers
	// it 426 Upgrade Required and closes the connection
	// (ServerConnectionImpl::checkProtocolVersion in
	// source/common/http/http1/codec_impl.cc).
	errHTTP10        = errors.New("HTTP/1.0 without accept_http_10")
	errNoResponse    = errors.New("upstream closed before a response")
	errRouteTimeout  = errors.New("route timeout")
	errStreamIdle    = errors.New("stream idle timeout")
	errClientGone    = errors.New("client closed the connection")
	errSwitched      = errors.New("upstream switched protocols without an upgrade request")
	errRetryNotWrite = errors.New("request not written")
	errRetryConnect  = errors.New("connect failed")
)

// clientFailure maps an error reading the request body to a local reply.
func (c *h1conn) clientFailure(err error) forward.Failure {
	switch {
	case errors.Is(err, http1.ErrMalformed), errors.Is(err, http1.ErrLineTooLong), errors.Is(err, http1.ErrHeaderTooLarge):
		return forward.FailBadRequest
	case http1.IsTimeout(err):
		return c.clock.expired(time.Now(), false) // stream.go
	}
	return forward.FailClientGone
}

// classify maps an upstream failure before a response head to the local
// reply Envoy sends.
func classify(err error) forward.Failure {
	switch {
	case errors.Is(err, errRouteTimeout):
		return forward.FailRouteTimeout
	case errors.Is(err, errStreamIdle):
		return forward.FailStreamIdle
	case errors.Is(err, errClientGone):
		return forward.FailClientGone
	case errors.Is(err, http1.ErrMalformed), errors.Is(err, http1.ErrHeaderTooLarge),
		errors.Is(err, http1.ErrTooManyHeaders), errors.Is(err, errSwitched):
		return forward.FailProtocol
	}
	return forward.FailTerminated
}

// retryable reports whether a failure on a reused connection looks like the
// upstream having closed it while idle (EOF, reset, broken pipe).
func retryable(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, errNoResponse) || isNetError(err)
}

func isNetError(err error) bool {
	var ne *net.OpError
	return errors.As(err, &ne) && !ne.Timeout()
}

// upstreamFailed answers a request that got no response head.
func (c *h1conn) upstreamFailed(cl *cluster.Cluster, ep cluster.Endpoint, f forward.Failure, err error, bodyConsumed bool) bool {
	c.s.log.Debug("upstream request failed", "cluster", cl.Name, "endpoint", ep.Address, "error", err)
	c.rec.UpstreamHost, c.rec.Flags = ep.Address, f.Flags
	c.rec.TransportFailure = cluster.TransportFailureReason(err)
	cl.Stats.AddResponse(f.Code)
	if lf := forward.LocalFailureOf(f); lf != 0 {
		cl.ReportLocalFailure(ep, lf)
	}
	if f.Code == 0 {
		return false
	}
	keep := !c.req.Close && !c.closing() && f.Code != 408
	if !bodyConsumed && keep {
		keep = c.discardRequestBody()
	}
	return c.writeLocal(f.Code, f.Flags, f.Body, keep) && keep
}

// reasonPhrase is the reason for local replies.
func reasonPhrase(code int) string {
	switch code {
	case 200:
		return "OK"
	case 404:
		return "Not Found"
	case 503:
		return "Service Unavailable"
	}
	if t := http.StatusText(code); t != "" {
		return t
	}
	return "Status"
}
