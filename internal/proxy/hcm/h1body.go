package hcm

// The HTTP/1.1 path's side of the request body's pass through the filters
// that read it (body.go): the body is read from the connection, framed by
// Content-Length or chunked, and handed to the exchange (package
// forward/h1) as the request's whole body, sent upstream with its
// content-length. A chunked body's trailer section is dropped, as
// HTTP/1.1 trailers always are (forward/trailers.go): the decoders get no
// DecodeTrailers on HTTP/1.1.

import (
	"io"
	"time"

	"github.com/straitmesh/strait/internal/proxy/http1"
)

// What the connection did with the request body in progress, for a
// local reply that wants to keep the connection (discardRequestBody).
const (
	bodyUnread   = iota // the body, if any, is still on the connection
	bodyReading         // the decoders' read of it began and has not ended
	bodyBuffered        // it was read to its end (c.x.Body once decoded)
)

var continue100 = []byte("HTTP/1.1 100 Continue\r\n\r\n")

// decodeBody reads the request body for the filters that read it, before
// the router runs. It reports whether the request was answered (by a
// decoder, 413 past the limit, or a failed read: 400, 408, or nothing
// when the client left), and then whether the connection can carry
// another request: after a reply it does only if the body was read to its
// end, as Envoy's HTTP/1.1 connection closes after a response that
// completes before its request. Else the request becomes one of
// Content-Length framing whose body is c.x.Body.
func (c *h1conn) decodeBody() (done, keep bool) {
	st := &c.stream
	limit, ok := st.beginBody(st)
	if !ok {
		return false, false
	}
	req := &c.req
	if rt := st.route(); rt != nil && c.clock.routed(rt) { // stream.go
		c.nc.SetReadTimeouts(c.clock.idle, c.clock.request)
		c.nc.SetWriteTimeouts(c.clock.idle, time.Time{})
	}
	if req.Expect100 && req.Minor == 1 {
		// As Envoy's HCM (proxy_100_continue false): the client is told to
		// send its body here, and the upstream never sees the Expect.
		if _, err := c.nc.Write(continue100); err != nil {
			return true, false
		}
	}
	var src io.Reader
	hint := int64(-1)
	if req.Framing == http1.FramingChunked {
		c.x.ReqCh.Reset(c.r)
		src = &c.x.ReqCh
	} else {
		src = &http1.LengthReader{R: c.r, Left: req.ContentLength}
		hint = req.ContentLength
	}
	c.body = bodyReading
	body, end, err := st.readBody(st, src, limit, hint, hint >= 0, nil, func() { c.body = bodyBuffered })
	switch end {
	case bodyStopped:
		return true, st.replied && st.keep
	case bodyTooLarge:
		st.f.tooLarge()
		return true, c.localReply(413, "", payloadTooLarge) // h1reply.go
	case bodyFailed:
		f := c.ClientFailure(err)
		if f.Code != 0 {
			c.WriteLocal(f.Code, f.Flags, f.Body, false)
		}
		return true, false
	}
	c.x.Body = body
	req.ContentLength = int64(len(body))
	req.Framing = http1.FramingLength
	if len(body) == 0 {
		req.Framing = http1.FramingNone
	}
	return false, false
}
