package hcm

// The HTTP/2 path's side of the request body's pass through the filters
// that read it (body.go): the body is read from the stream (through the
// stream guard's body, so that reading it is activity for
// stream_idle_timeout and its end meets request_timeout, h2limits.go), its
// trailers passed to the decoders, and the request's body replaced by the
// buffer, which a retry sends again (forward.RoundTrip, through
// GetBody) with the trailers (forward.Trailers.ForwardRequest).

import (
	"bytes"
	"context"
	"io"
	"net/http"

	"github.com/straitmesh/strait/internal/proxy/httpfilter"
)

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
