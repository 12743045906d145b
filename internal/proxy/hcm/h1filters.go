package hcm

// The HTTP/1.1 path's side of httpfilters.go: a fault delay waits here
// (watching that the client is still there), an abort or a CORS preflight
// is answered here, and an actual CORS request's response headers and the
// delay's flag are added to the response head (appendResponseHead,
// forwardH2).

import (
	"net/http"
	"strconv"
	"time"

	"github.com/straitmesh/strait/internal/proxy/http1"
	"github.com/straitmesh/strait/internal/proxy/httpfilter/cors"
	"github.com/straitmesh/strait/internal/proxy/httpfilter/fault"
	"github.com/straitmesh/strait/internal/proxy/route"
)

// filterResponse is what the filters add to the response of the request in
// progress; reset for every request.
type filterResponse struct {
	cors    *cors.Policy // nil: no CORS headers
	verdict cors.Verdict
	flags   string // response flags (DI after a delay)
}

// delayPoll is how often a fault delay checks that its client is still
// there, so that a client that leaves ends the delay (Envoy resets the
// stream, whose timer goes with it).
const delayPoll = 100 * time.Millisecond

// runFilters acts on the filters' plan for c.req on rt. done reports that
// the request was answered (or the client left); keep then says whether
// the connection can carry another request.
func (c *h1conn) runFilters(rt *route.Route) (done, keep bool) {
	req := &c.req
	p := c.filter.filters.decide(rt, http1.UnsafeString(req.Method), &req.Headers, &c.meta)
	if p.delay > 0 {
		if !c.faultDelay(p.delay) {
			return true, false
		}
		c.fresp.flags = fault.FlagDelay
	}
	switch {
	case p.abort:
		flags := fault.FlagAbort
		if c.fresp.flags != "" {
			flags = fault.FlagDelay + "," + fault.FlagAbort
		}
		if ct, _ := req.Headers.Lookup("content-type"); p.grpc >= 0 && grpcContentType(ct) {
			return true, c.filterReply(200, flags, "", func(set func(string, string)) {
				set("content-type", "application/grpc")
				set("grpc-status", strconv.Itoa(p.grpc))
				set("grpc-message", grpcPercentEncode(fault.AbortBody))
			})
		}
		return true, c.filterReply(p.status, flags, fault.AbortBody, nil)
	case p.preflight:
		return true, c.filterReply(200, c.fresp.flags, "", func(set func(string, string)) {
			p.corsPolicy.PreflightHeaders(p.corsVerdict, &req.Headers, set)
		})
	}
	c.fresp.cors, c.fresp.verdict = p.corsPolicy, p.corsVerdict
	if len(p.mirrors) > 0 {
		c.s.mirrorH1(p.mirrors, req, c.r.Buffered(), c.forwardedProto(), c.rreq.Scheme) // mirror.go
	}
	return false, false
}

// faultDelay holds the request for d, and reports false if the client
// went away meanwhile.
func (c *h1conn) faultDelay(d time.Duration) bool {
	end := time.Now().Add(d)
	for {
		left := time.Until(end)
		if left <= 0 {
			return true
		}
		time.Sleep(min(left, delayPoll))
		if http1.Peek(c.nc) == http1.PeekClosed {
			return false
		}
	}
}

// filterReply is a local reply with the filter's headers (set by hdrs),
// keeping the connection when its request body can be skipped, as
// localReply does.
func (c *h1conn) filterReply(code int, flags, body string, hdrs func(set func(name, value string))) bool {
	keep := !c.req.Close && !c.closing() && c.discardRequestBody()
	w := c.appendLocalStatus(code) // h1reply.go
	c.rec.Flags = flags
	if flags != "" {
		w = append(w, "x-strait-response-flags: "...)
		w = append(w, flags...)
		w = append(w, "\r\n"...)
	}
	if hdrs != nil {
		hdrs(func(name, value string) {
			w = append(w, name...)
			w = append(w, ": "...)
			w = append(w, value...)
			w = append(w, "\r\n"...)
		})
	}
	return c.finishLocal(w, body, keep) && keep
}

// skipResponseHeader reports whether an upstream response header is
// replaced by the filters' own.
func (r *filterResponse) skipResponseHeader(name []byte) bool {
	return r.cors != nil && r.cors.Replaces(r.verdict, name)
}

// appendResponseHeaders appends the filters' response headers.
func (r *filterResponse) appendResponseHeaders(w []byte) []byte {
	if r.cors != nil {
		w = r.cors.AppendResponseHeaders(w, r.verdict)
	}
	if r.flags != "" {
		w = append(w, "x-strait-response-flags: "...)
		w = append(w, r.flags...)
		w = append(w, "\r\n"...)
	}
	return w
}

// appendLocalReplyHeaders appends a router local reply's response flags
// (after the filters' own, "DI,UH") and the CORS headers of an actual
// request from an allowed origin, as Envoy's CORS filter adds them to the
// local replies that pass through it.
func (r *filterResponse) appendLocalReplyHeaders(w []byte, flags string) []byte {
	if r.cors != nil {
		w = r.cors.AppendResponseHeaders(w, r.verdict)
	}
	if flags == "" && r.flags == "" {
		return w
	}
	w = append(w, "x-strait-response-flags: "...)
	if r.flags != "" {
		w = append(w, r.flags...)
		if flags != "" {
			w = append(w, ',')
		}
	}
	w = append(w, flags...)
	return append(w, "\r\n"...)
}

// setResponseHeaders puts the filters' response headers into h (the
// HTTP/2 upstream's response on the HTTP/1.1 path, and the HTTP/2 and
// net/http paths).
func (r *filterResponse) setResponseHeaders(h http.Header) {
	if r.cors != nil {
		r.cors.ResponseHeaders(r.verdict, h.Set)
	}
	if r.flags != "" {
		if local := h.Get("X-Strait-Response-Flags"); local != "" {
			h.Set("X-Strait-Response-Flags", r.flags+","+local) // a local reply's own
		} else {
			h.Set("X-Strait-Response-Flags", r.flags)
		}
	}
}
