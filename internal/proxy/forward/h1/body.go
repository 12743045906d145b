package h1

// This file copies message bodies: the rest of a response body downstream
// (re-chunked for an HTTP/1.1 client when its length is unknown), and a
// request body upstream on its own goroutine while the response is
// awaited.

import (
	"errors"
	"io"
	"net/http"
	"sync/atomic"

	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/http1"
)

// bodyCopy is a request body being streamed upstream by its own goroutine.
type bodyCopy struct {
	done chan error
	// downFailed is set when reading the body from the client failed (bad
	// framing, the client went away, a timeout): the copier then closes the
	// upstream connection, which ends a wait for the response head, and its
	// error says what to answer.
	downFailed atomic.Bool
	progress   atomic.Int64 // body bytes sent upstream
}

// copyResponseBody streams the rest of the response body downstream,
// re-chunking it when downChunked.
func (x *Exchange) copyResponseBody(uc *cluster.UpstreamConn, downChunked bool) error {
	resp := &x.Resp
	var src io.Reader
	var lr http1.LengthReader
	switch resp.Framing {
	case http1.FramingLength:
		lr = http1.LengthReader{R: uc.R, Left: resp.ContentLength}
		src = &lr
	case http1.FramingChunked:
		x.Chunk.Reset(uc.R)
		src = &x.Chunk
	default:
		src = uc.R
	}
	// An HTTP/1.1 upstream's trailer section is dropped (package forward's Trailers).
	rerr, werr := copyBody(x.NC, src, downChunked, nil, x.RespBytes)
	if rerr != nil {
		return rerr
	}
	return werr
}

// copyBody copies src to dst, framing each read as a chunk when chunked
// (and ending with the last chunk and the fields trailer returns, which
// the caller has passed through forwardTrailers; nil: none). Bodies don't
// go through any other buffer: each read lands where it is written from.
// It returns the error reading src or the one writing dst.
func copyBody(dst io.Writer, src io.Reader, chunked bool, trailer func() http.Header, progress *atomic.Int64) (rerr, werr error) {
	bp := copyBufPool.Get().(*[]byte)
	defer copyBufPool.Put(bp)
	buf := *bp
	data := buf[http1.ChunkHeadroom : http1.ChunkHeadroom+copyBufSize]
	for {
		n, err := src.Read(data)
		if n > 0 {
			out := data[:n]
			if chunked {
				out = http1.FrameChunk(buf, n)
			}
			if _, werr := dst.Write(out); werr != nil {
				return nil, werr
			}
			if progress != nil {
				progress.Add(int64(n))
			}
		}
		if errors.Is(err, io.EOF) {
			if chunked {
				var t []byte
				if trailer != nil {
					t = appendTrailer(nil, trailer())
				}
				_, werr := dst.Write(http1.AppendLastChunk(buf[:0], t))
				return nil, werr
			}
			return nil, nil
		}
		if err != nil {
			return err, nil
		}
	}
}

// startBodyCopy streams the rest of the request body upstream on its own
// goroutine, so that the response (and 100 Continue) can be read meanwhile.
// Until done is signalled the copier owns x.R.
func (x *Exchange) startBodyCopy(uc *cluster.UpstreamConn) *bodyCopy {
	bc := &bodyCopy{done: make(chan error, 1)}
	req := x.Req
	var src io.Reader
	chunked := req.Framing == http1.FramingChunked
	if chunked {
		x.ReqCh.Reset(x.R)
		src = &x.ReqCh
	} else {
		src = &http1.LengthReader{R: x.R, Left: req.ContentLength}
	}
	go func() {
		// The client's trailer section is dropped (package forward's Trailers).
		rerr, werr := copyBody(uc, src, chunked, nil, &bc.progress)
		if rerr != nil {
			// The client side failed: abort the upstream request, which
			// also ends the response wait (the reader is not touched).
			bc.downFailed.Store(true)
			uc.D.Close()
			bc.done <- rerr
			return
		}
		bc.done <- werr
	}()
	return bc
}
