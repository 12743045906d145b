package hcm

// This file is the HTTP/1.1 path's local replies: what the proxy answers
// itself (errors of the codec, routing, upstream failures and timeouts,
// with Envoy's codes and response flags), and how a failure is classified.

import (
	"errors"
	"io"
	"strconv"
	"time"

	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/forward"
	"github.com/straitmesh/strait/internal/proxy/forward/h1"
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
	w = append(w, h1.ReasonPhrase(code)...)
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
	return c.WriteLocal(code, flags, body, keep) && keep
}

// WriteLocal writes a local reply as is (h1.Downstream).
func (c *h1conn) WriteLocal(code int, flags, body string, keep bool) bool {
	w := c.appendLocalStatus(code)
	if flags == "UO" {
		w = append(w, "x-envoy-overloaded: true\r\n"...)
	}
	for i := range c.x.RespExtra {
		w = http1.AppendHeader(w, c.x.RespExtra[i].Name, c.x.RespExtra[i].Value)
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
	w = append(w, h1.ReasonPhrase(code)...)
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
	switch c.body { // body.go
	case bodyReading:
		return false // part of it is gone: the connection can't be reused
	case bodyBuffered:
		return true
	}
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
		c.x.ReqCh.Reset(c.r)
		n, err := io.Copy(io.Discard, io.LimitReader(&c.x.ReqCh, maxDiscardBody))
		return err == nil && n < maxDiscardBody && c.x.ReqCh.Done()
	}
	return false
}

// errHTTP10 is an HTTP/1.0 request on an HCM without
// http_protocol_options.accept_http_10: Envoy's HTTP/1.1 codec answers it
// 426 Upgrade Required and closes the connection
// (ServerConnectionImpl::checkProtocolVersion in
// source/common/http/http1/codec_impl.cc).
var errHTTP10 = errors.New("HTTP/1.0 without accept_http_10")

// ClientFailure maps an error reading the request body to a local reply
// (h1.Downstream).
func (c *h1conn) ClientFailure(err error) forward.Failure {
	switch {
	case errors.Is(err, http1.ErrMalformed), errors.Is(err, http1.ErrLineTooLong), errors.Is(err, http1.ErrHeaderTooLarge):
		return forward.FailBadRequest
	case http1.IsTimeout(err):
		return c.clock.expired(time.Now(), false) // stream.go
	}
	return forward.FailClientGone
}

// UpstreamFailed answers a request that got no response head
// (h1.Downstream).
func (c *h1conn) UpstreamFailed(cl *cluster.Cluster, ep cluster.Endpoint, f forward.Failure, err error, bodyConsumed bool) bool {
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
	return c.WriteLocal(f.Code, f.Flags, f.Body, keep) && keep
}
