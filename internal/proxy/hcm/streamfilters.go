package hcm

// The HTTP/2 and net/http paths' side of httpfilters.go: a fault delay
// waits on the stream's context (a reset or a client that leaves ends it),
// an abort or a CORS preflight is answered here, and the response of an
// actual CORS request gets its headers through filterWriter.

import (
	"net/http"
	"time"

	"github.com/straitmesh/strait/internal/proxy/httpfilter"
	"github.com/straitmesh/strait/internal/proxy/httpfilter/fault"
	"github.com/straitmesh/strait/internal/proxy/route"
)

// streamFilters runs the filters for r on rt. It returns the writer the
// rest of the request path uses (w, or a filterWriter that adds the
// filters' response headers) and whether the request was answered.
// grpcReplies says whether local replies to gRPC requests take gRPC's
// trailers-only form (HTTP/2). md is the request's dynamic metadata
// (jwtfilter.go; nil reads as empty).
func (s *Server) streamFilters(w http.ResponseWriter, r *http.Request, f *Filter, rt *route.Route, grpcReplies bool, md *httpfilter.Metadata) (http.ResponseWriter, bool) {
	p := f.filters.decide(rt, r.Method, requestHeaders(r.Header), md)
	var fr filterResponse
	if p.delay > 0 {
		t := time.NewTimer(p.delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return w, true
		}
		fr.flags = fault.FlagDelay
	}
	switch {
	case p.abort:
		flags := fault.FlagAbort
		if fr.flags != "" {
			flags = fault.FlagDelay + "," + fault.FlagAbort
		}
		switch {
		case grpcReplies && isGRPC(r.Header) && p.grpc >= 0:
			grpcLocalReply(w, uint32(p.grpc), flags, fault.AbortBody)
		case grpcReplies:
			streamLocalReply(w, r, p.status, flags, fault.AbortBody)
		default:
			localReply(w, p.status, flags, fault.AbortBody)
		}
		return w, true
	case p.preflight:
		h := w.Header()
		if fr.flags != "" {
			h.Set("X-Strait-Response-Flags", fr.flags)
		}
		p.corsPolicy.PreflightHeaders(p.corsVerdict, requestHeaders(r.Header), h.Set)
		h.Set("Content-Length", "0")
		w.WriteHeader(http.StatusOK)
		return w, true
	}
	if len(p.mirrors) > 0 {
		s.mirrorStream(p.mirrors, r) // mirror.go
	}
	fr.cors, fr.verdict = p.corsPolicy, p.corsVerdict
	if fr.cors == nil && fr.flags == "" {
		return w, false
	}
	return &filterWriter{ResponseWriter: w, fr: fr}, false
}

// requestHeaders adapts net/http's header map to httpfilter.Headers.
type requestHeaders http.Header

func (h requestHeaders) Lookup(name string) (string, bool) {
	vv, ok := h[http.CanonicalHeaderKey(name)]
	if !ok || len(vv) == 0 {
		return "", ok
	}
	if len(vv) == 1 {
		return vv[0], true
	}
	out := vv[0]
	for _, v := range vv[1:] {
		out += "," + v
	}
	return out, true
}

// filterWriter adds the filters' headers to a final response head.
type filterWriter struct {
	http.ResponseWriter
	fr    filterResponse
	wrote bool
}

func (fw *filterWriter) WriteHeader(code int) {
	if !fw.wrote && code >= 200 {
		fw.wrote = true
		fw.fr.setResponseHeaders(fw.ResponseWriter.Header())
	}
	fw.ResponseWriter.WriteHeader(code)
}

func (fw *filterWriter) Write(b []byte) (int, error) {
	if !fw.wrote {
		fw.WriteHeader(http.StatusOK)
	}
	return fw.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the stream's Flush.
func (fw *filterWriter) Unwrap() http.ResponseWriter { return fw.ResponseWriter }
