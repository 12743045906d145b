package hcm

// The HTTP/1.1 path's side of the filter chain's replies and response
// heads: a fault delay waits here (watching that the client is still
// there); a filter's local reply and the router's carry the filters'
// response flags and fields and pass the encoders of the filters that ran.

import (
	"time"

	"github.com/straitmesh/strait/internal/proxy/http1"
)

// delayPoll is how often a fault delay checks that its client is still
// there, so that a client that leaves ends the delay (Envoy resets the
// stream, whose timer goes with it).
const delayPoll = 100 * time.Millisecond

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

// filterReply is a filter's local reply with its headers (set by hdrs),
// keeping the connection when its request body can be skipped, as
// localReply does.
func (c *h1conn) filterReply(code int, flags, body string, hdrs func(set func(name, value string))) bool {
	keep := !c.req.Close && !c.closing() && c.discardRequestBody()
	w := c.appendLocalStatus(code) // h1reply.go
	w = c.appendLocalHeaders(w, code, flags, hdrs)
	return c.finishLocal(w, body, keep) && keep
}

// appendLocalHeaders appends a local reply's fields: its own (hdrs), the
// filters' (AddResponseHeader, after the encoders of the filters that ran
// saw them all) and the response flags, the filters' first ("DI,FI").
func (c *h1conn) appendLocalHeaders(w []byte, code int, flags string, hdrs func(set func(name, value string))) []byte {
	st := &c.stream
	flags = st.mergeFlags(flags)
	c.rec.Flags = flags
	if flags != "" {
		w = append(w, "x-strait-response-flags: "...)
		w = append(w, flags...)
		w = append(w, "\r\n"...)
	}
	if st.hasEncoders() {
		st.encodeLocal(code, func(set func(name, value string)) {
			if hdrs != nil {
				hdrs(set)
			}
			for _, h := range st.addResp {
				set(h.name, h.value)
			}
		})
		for i := range st.local {
			w = http1.AppendHeader(w, st.local[i].Name, st.local[i].Value)
		}
		return w
	}
	if hdrs != nil {
		hdrs(func(name, value string) {
			w = append(w, name...)
			w = append(w, ": "...)
			w = append(w, value...)
			w = append(w, "\r\n"...)
		})
	}
	for _, h := range st.addResp {
		w = append(w, h.name...)
		w = append(w, ": "...)
		w = append(w, h.value...)
		w = append(w, "\r\n"...)
	}
	return w
}

// replacedByFilters reports whether an upstream response field is one a
// filter set (AddResponseHeader replaces the upstream's own).
func (st *h1stream) replacedByFilters(name []byte) bool {
	for _, h := range st.addResp {
		if http1.EqualFold(name, h.name) {
			return true
		}
	}
	return false
}

// appendFilterResponseHeaders appends the fields filters set on an
// upstream response and their response flags.
func (st *h1stream) appendFilterResponseHeaders(w []byte) []byte {
	for _, h := range st.addResp {
		w = append(w, h.name...)
		w = append(w, ": "...)
		w = append(w, h.value...)
		w = append(w, "\r\n"...)
	}
	if st.flags != "" {
		w = append(w, "x-strait-response-flags: "...)
		w = append(w, st.flags...)
		w = append(w, "\r\n"...)
	}
	return w
}
