package hcm

// This file is the connection's side of the HTTP/1.1 request's upstream
// exchange (package forward/h1): what the exchange needs of the stream
// before it starts, the downstream response head with the HTTP filters'
// encoders applied, and the rest of h1.Downstream.

import (
	"net/http"

	"github.com/straitmesh/strait/internal/proxy/forward/h1"
	"github.com/straitmesh/strait/internal/proxy/http1"
	"github.com/straitmesh/strait/internal/proxy/httpfilter"
)

var _ h1.Downstream = (*h1conn)(nil)

// beginExchange hands the exchange what it reads of the stream: the idle
// timeout (after the route's), and whether the request is logged.
func (c *h1conn) beginExchange() {
	c.x.Idle = c.clock.idle
	c.x.Traced = c.logging() // accesslog.go
	c.x.LogAddrs = len(c.filter.AccessLog) > 0
	c.x.RespBytes = nil
	if c.x.Traced {
		c.x.RespBytes = &c.respBytes
	}
}

// AppendResponseHead writes the downstream response head for c.x.Resp
// (h1.Downstream).
func (c *h1conn) AppendResponseHead(w []byte, reqMinor int, keep bool) []byte {
	resp := &c.x.Resp
	c.rec.Code, c.rec.Response = resp.Status, &resp.Headers
	st := &c.stream
	if resp.Status >= 200 && st.hasEncoders() {
		// The encoders see the fields as they will be written (the
		// route's mutations applied), with the filters' own set.
		st.encodeUpstream(resp.Status, &resp.Headers, c.x.RespExtra) // h1stream.go
	}
	w = append(w, "HTTP/1.1 "...)
	w = http1.AppendInt(w, int64(resp.Status))
	w = append(w, ' ')
	w = append(w, resp.Reason...)
	w = append(w, "\r\n"...)
	for i := range resp.Headers {
		h := &resp.Headers[i]
		if h.Hop {
			continue
		}
		if len(h.Name) == 14 && http1.EqualFold(h.Name, "Content-Length") {
			continue
		}
		if len(st.addResp) > 0 && st.replacedByFilters(h.Name) {
			continue
		}
		w = http1.AppendHeader(w, h.Name, h.Value)
	}
	if resp.Status < 200 {
		return append(w, "\r\n"...)
	}
	for i := range c.x.RespExtra {
		w = http1.AppendHeader(w, c.x.RespExtra[i].Name, c.x.RespExtra[i].Value)
	}
	w = st.appendFilterResponseHeaders(w) // h1stream.go
	if c.x.SetCookie != "" {
		w = append(w, "set-cookie: "...)
		w = append(w, c.x.SetCookie...)
		w = append(w, "\r\n"...)
	}
	switch resp.Framing {
	case http1.FramingLength:
		w = append(w, "content-length: "...)
		w = http1.AppendInt(w, resp.ContentLength)
		w = append(w, "\r\n"...)
	case http1.FramingChunked, http1.FramingClose:
		if reqMinor == 1 {
			w = append(w, "transfer-encoding: chunked\r\n"...)
		} else {
			keep = false
		}
	case http1.FramingNone:
		if resp.ContentLength >= 0 && (!http1.NoBody(resp.Status) || resp.Status == 304) {
			// HEAD (or 304): the length the body would have had.
			w = append(w, "content-length: "...)
			w = http1.AppendInt(w, resp.ContentLength)
			w = append(w, "\r\n"...)
		}
	}
	if !keep {
		w = append(w, "connection: close\r\n"...)
	} else if reqMinor == 0 {
		w = append(w, "connection: keep-alive\r\n"...)
	}
	return append(w, "\r\n"...)
}

// LocalReply answers without an upstream (h1.Downstream).
func (c *h1conn) LocalReply(code int, flags, body string) bool {
	return c.localReply(code, flags, body)
}

// Closing reports whether the connection closes after the request
// (h1.Downstream).
func (c *h1conn) Closing() bool { return c.closing() }

// Scheme is the request's upstream :scheme (h1.Downstream).
func (c *h1conn) Scheme() string { return c.scheme() } // scheme.go

// Abandon makes the connection close without lingering (h1.Downstream).
func (c *h1conn) Abandon() { c.linger = false }

// EncodeResponse runs the filters' encoders on a response from an HTTP/2
// upstream (h1.Downstream).
func (c *h1conn) EncodeResponse(status int, h http.Header) {
	c.stream.encodeHTTP(&c.stream, status, h) // chain.go
}

// EncodeTrailers runs the filters' trailers encoders (h1.Downstream).
func (c *h1conn) EncodeTrailers(t http.Header) {
	c.stream.encodeTrailers(&c.stream, httpfilter.HTTPHeader(t)) // chain.go
}
