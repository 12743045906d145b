package hcm

// This file is the request body's pass through the HTTP filters that read
// it (httpfilter.BodyDecoder), the same on every codec (h1body.go,
// h2body.go): when a request has a body and a filter of the chain decodes
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

import (
	"errors"
	"io"
	"slices"

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
