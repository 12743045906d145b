package hcm

// This file is the request body's pass through the HTTP filters that read
// it (httpfilter.BodyDecoder), the same on every codec (the codecs' sides are
// at the end of this file): when a request has a body and a filter of the chain decodes
// it, the stream's goroutine reads the body whole before the router runs,
// each chunk through the decoders in list order as it arrives, then the
// trailers (HTTP/2), and the router sends the buffered body. That is what
// Envoy's filter manager does behind a decoder that returns
// StopIterationAndBuffer (envoy.filters.http.buffer): the body is
// buffered up to the decoder buffer limit, the limit a filter set with
// setDecoderBufferLimit or else the connection's
// per_connection_buffer_limit_bytes, and a body past it is answered 413
// "Payload Too Large" (ActiveStreamDecoderFilter::requestDataTooLarge in
// source/common/http/filter_manager.cc). A chain without body decoders
// costs nothing: the codecs stream bodies as before.
//
// The body is read under the stream's timeouts (stream_idle_timeout, the
// route's idle_timeout, request_timeout), as any request body is: a body
// that stalls is answered 408 like one streamed upstream.
//
// The codecs' sides follow the shared part: HTTP/1.1's (decodeBody on
// h1conn) and HTTP/2's (decodeBody on h2stream).

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/straitmesh/strait/internal/proxy/http1"
	"github.com/straitmesh/strait/internal/proxy/httpfilter"
)

// maxBodyDecoders bounds the filters of one chain that read the body
// (filterState.bodyOn is a bit set).
const maxBodyDecoders = 64

// bodyChunk is the most one read of a body of unknown length adds to
// the buffer at first; the buffer doubles from there, up to the limit.
const bodyChunk = 16 << 10

// payloadTooLarge is the body of Envoy's 413 (CodeUtility::toString).
const payloadTooLarge = "Payload Too Large"

// decodesBodies reports whether f's chain has a filter that reads request
// bodies.
func (f *Filter) decodesBodies() bool {
	return f.chain != nil && len(f.chain.bodies) > 0
}

// beginBody asks the chain's body decoders (those the route does not turn
// off) whether they read the request's body; ok is false when none does,
// and the body then streams as without them. limit is the request's
// buffer limit: the last decoder's that sets one, else
// httpfilter.DefaultBodyLimit.
func (st *filterState) beginBody(s httpfilter.Stream) (limit int64, ok bool) {
	ch := st.f.chain
	if ch == nil {
		return 0, false
	}
	limit = httpfilter.DefaultBodyLimit
	for i, b := range ch.bodies {
		if st.disabled(ch.names[b.at]) {
			continue
		}
		l, on := b.f.DecodesBody(s)
		if !on {
			continue
		}
		st.bodyOn |= 1 << i
		if l > 0 {
			limit = l
		}
	}
	return limit, st.bodyOn != 0
}

// bodyEnd is how reading a request body for the decoders ended.
type bodyEnd uint8

const (
	bodyWhole    bodyEnd = iota // read whole; every decoder let it through
	bodyStopped                 // a decoder answered (or reset the stream)
	bodyTooLarge                // past the limit: answer 413
	bodyFailed                  // reading it failed
)

// readBody reads a request body from src whole, passing each chunk to
// the decoders that read it (beginBody) as it arrives, then the trailers
// (trailers, nil for none, is asked once the body ended; it returns nil
// when there are none). sizeHint is the body's length when known, else
// -1; lengthEnds says the body ends with its sizeHint-th byte, with no
// trailers after (HTTP/1.1 Content-Length): that chunk then has end set,
// as Envoy's codec delivers it. Else the body's end is known only when
// src says so, and the decoders get an empty chunk with end set (as
// Envoy's HTTP/1.1 codec at a chunked body's last chunk, or its HTTP/2
// codec at an empty DATA frame with END_STREAM), or the trailers. ended
// is called when the body has been read to its end, before its end is
// decoded (a decoder that answers then leaves an HTTP/1.1 connection
// reusable). On bodyFailed err is the read's error.
func (st *filterState) readBody(s httpfilter.Stream, src io.Reader, limit, sizeHint int64, lengthEnds bool, trailers func() httpfilter.HeaderMap, ended func()) ([]byte, bodyEnd, error) {
	// One byte past the limit is enough to know the body is too large.
	most := limit + 1
	if sizeHint >= 0 && sizeHint < limit {
		most = sizeHint + 1 // room for the read that returns io.EOF
	}
	// The buffer grows with what arrives, never ahead of it by more than
	// it holds: a client's content-length alone does not make the proxy
	// allocate the limit.
	buf := make([]byte, 0, min(most, bodyChunk))
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) == most { // the hint was short (HTTP/2: the server checks it)
				most = limit + 1
			}
			buf = slices.Grow(buf, int(min(int64(max(len(buf), bodyChunk)), most-int64(len(buf)))))
		}
		n, err := src.Read(buf[len(buf):cap(buf)])
		if n > 0 {
			at := len(buf)
			buf = buf[:at+n]
			if int64(len(buf)) > limit {
				return nil, bodyTooLarge, nil
			}
			last := lengthEnds && int64(len(buf)) == sizeHint
			if last && ended != nil {
				ended()
			}
			if st.decodeData(s, buf[at:], last) {
				return nil, bodyStopped, nil
			}
			if last {
				return buf, bodyWhole, nil
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, bodyFailed, err
		}
	}
	if ended != nil {
		ended()
	}
	var tr httpfilter.HeaderMap
	if trailers != nil {
		tr = trailers()
	}
	if tr == nil && st.decodeData(s, buf[len(buf):], true) {
		return nil, bodyStopped, nil
	}
	if tr != nil && st.decodeTrailers(s, tr) {
		return nil, bodyStopped, nil
	}
	return buf, bodyWhole, nil
}

// decodeData passes a chunk to the decoders that read the body, in list
// order, and reports whether one stopped the request. While a decoder
// runs the chain counts it as the last filter that ran, so that its own
// local reply passes the encoders of the filters before it only.
func (st *filterState) decodeData(s httpfilter.Stream, chunk []byte, end bool) (stopped bool) {
	ran := st.ran
	for i, b := range st.f.chain.bodies {
		if st.bodyOn&(1<<i) == 0 {
			continue
		}
		st.ran = b.at + 1
		if b.f.DecodeData(s, chunk, end) == httpfilter.Stop {
			return true
		}
	}
	st.ran = ran
	return false
}

// decodeTrailers passes the request trailers to the decoders that read
// the body and the trailers, in list order; as decodeData.
func (st *filterState) decodeTrailers(s httpfilter.Stream, tr httpfilter.HeaderMap) (stopped bool) {
	ran := st.ran
	for i, b := range st.f.chain.bodies {
		td, ok := b.f.(httpfilter.TrailersDecoder)
		if !ok || st.bodyOn&(1<<i) == 0 {
			continue
		}
		st.ran = b.at + 1
		if td.DecodeTrailers(s, tr) == httpfilter.Stop {
			return true
		}
	}
	st.ran = ran
	return false
}

// The HTTP/1.1 path's side of the request body's pass through the filters
// that read it (above): the body is read from the connection, framed by
// Content-Length or chunked, and handed to the exchange (package
// forward/h1) as the request's whole body, sent upstream with its
// content-length. A chunked body's trailer section is dropped, as
// HTTP/1.1 trailers always are (forward/trailers.go): the decoders get no
// DecodeTrailers on HTTP/1.1.

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

// The HTTP/2 path's side of the request body's pass through the filters
// that read it (above): the body is read from the stream (through the
// stream guard's body, so that reading it is activity for
// stream_idle_timeout and its end meets request_timeout, h2limits.go), its
// trailers passed to the decoders, and the request's body replaced by the
// buffer, which a retry sends again (forward.RoundTrip, through
// GetBody) with the trailers (forward.Trailers.ForwardRequest).

// decodeBody reads the request body (whose stream's context is ctx) for
// the filters that read it, before
// the router runs; it reports whether the request was answered (by a
// decoder, or 413 past the limit) or its stream ended (a timeout the
// guard answered, the client's reset). A stream that fails while it is
// read is reset.
func (st *h2stream) decodeBody(ctx context.Context) (done bool) {
	r := st.r
	limit, ok := st.beginBody(st)
	if !ok {
		return false
	}
	if rt := st.route(); rt != nil && rt.HasIdleTimeout {
		setStreamIdle(ctx, rt.IdleTimeout) // h2limits.go
	}
	trailers := func() httpfilter.HeaderMap {
		for _, vv := range r.Trailer {
			if len(vv) > 0 {
				return httpfilter.HTTPHeader(r.Trailer)
			}
		}
		return nil
	}
	// Trailers may follow a body of any declared length: its end is
	// known when the stream says so.
	body, end, _ := st.readBody(st, r.Body, limit, r.ContentLength, false, trailers, nil)
	switch end {
	case bodyStopped:
		return true
	case bodyTooLarge:
		st.f.tooLarge()
		st.routerReply(http.StatusRequestEntityTooLarge, "", payloadTooLarge)
		return true
	case bodyFailed:
		if ctx.Err() != nil {
			return true // the guard answered (408) or the client left
		}
		panic(http.ErrAbortHandler) // reset the stream, as Envoy does
	}
	st.bytesIn.Store(int64(len(body)))
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	if len(body) > 0 || r.Trailer == nil {
		r.ContentLength = int64(len(body))
	}
	st.bodyRead = true
	return false
}
