package hcm

// This file counts the HCM's downstream stats (http.<stat_prefix>.*):
// connections and requests received, requests in progress, responses by
// status class. The HTTP/1.1 path counts in place (h1.go); the HTTP/2 and
// net/http paths through beginStream.

import (
	"net/http"

	"github.com/straitmesh/strait/internal/proxy/stats"
)

// cxBegin counts a downstream connection that the HCM starts serving;
// cxEnd when it closes. Both do nothing without a stats store.
func (f *Filter) cxBegin() {
	if h := f.hstats; h != nil {
		h.CxTotal.Add(1)
		h.CxActive.Add(1)
	}
}

func (f *Filter) cxEnd() {
	if h := f.hstats; h != nil {
		h.CxActive.Add(-1)
		h.CxDestroy.Add(1)
	}
}

// tooLarge counts a request answered 413 for its body's size
// (downstream_rq_too_large).
func (f *Filter) tooLarge() {
	if h := f.hstats; h != nil {
		h.RqTooLarge.Add(1)
	}
}

// rqBegin counts a request received (protoMajor 1 or 2); the caller
// calls rqEnd with the status sent downstream (0: none) when it ends.
func rqBegin(h *stats.HTTPStats, protoMajor int) {
	h.RqTotal.Add(1)
	if protoMajor == 2 {
		h.RqHTTP2Total.Add(1)
	} else {
		h.RqHTTP1Total.Add(1)
	}
	h.RqActive.Add(1)
}

func rqEnd(h *stats.HTTPStats, code int) {
	h.RqActive.Add(-1)
	h.AddResponse(code)
}

// beginStream counts an HTTP/2 or net/http stream. It returns where the
// stream's status will be: logged, the access log's record's, when the
// stream is logged; else a small wrapper of w records it (the returned
// writer: cw, when not nil, else a new one). Pass that to endStream when
// the handler returns.
func (f *Filter) beginStream(w http.ResponseWriter, r *http.Request, logged *int, cw *codeWriter) (http.ResponseWriter, *int) {
	h := f.hstats
	if h == nil {
		return w, nil
	}
	rqBegin(h, r.ProtoMajor)
	if logged != nil {
		return w, logged
	}
	if cw == nil {
		cw = &codeWriter{}
	}
	*cw = codeWriter{ResponseWriter: w}
	return cw, &cw.code
}

// endStream ends a stream counted by beginStream; code is nil when it
// was not counted.
func endStream(h *stats.HTTPStats, code *int) {
	if code != nil {
		rqEnd(h, *code)
	}
}

// codeWriter records the status a stream answered (the first final one,
// as the access log does).
type codeWriter struct {
	http.ResponseWriter
	code int
}

func (cw *codeWriter) WriteHeader(code int) {
	if cw.code == 0 && code >= 200 {
		cw.code = code
	}
	cw.ResponseWriter.WriteHeader(code)
}

func (cw *codeWriter) Write(b []byte) (int, error) {
	if cw.code == 0 {
		cw.code = http.StatusOK
	}
	return cw.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the stream's Flush.
func (cw *codeWriter) Unwrap() http.ResponseWriter { return cw.ResponseWriter }

// Flush sends what was written (http.Flusher, for gRPC streams).
func (cw *codeWriter) Flush() { _ = http.NewResponseController(cw.ResponseWriter).Flush() }
