package hcm

// net/http's header map as the filters see it (httpfilter.HeaderMap), for
// the HTTP/2 path and the HTTP/2 upstream's response on the HTTP/1.1
// path, and how a response head in that form takes the filters' fields,
// flags and encoders.

import (
	"net/http"
	"strings"

	"github.com/straitmesh/strait/internal/proxy/httpfilter"
)

// httpHeaderMap adapts http.Header to httpfilter.HeaderMap. A map is a
// pointer, so converting it to the interface allocates nothing.
type httpHeaderMap http.Header

func (h httpHeaderMap) Lookup(name string) (string, bool) {
	vv, ok := h[http.CanonicalHeaderKey(name)]
	if !ok || len(vv) == 0 {
		return "", ok
	}
	if len(vv) == 1 {
		return vv[0], true
	}
	return strings.Join(vv, ","), true
}

func (h httpHeaderMap) Range(f func(name, value string) bool) {
	for k, vv := range h {
		for _, v := range vv {
			if !f(k, v) {
				return
			}
		}
	}
}

// ByteSize is the fields' names' and values' lengths (httpfilter.ByteSizer).
func (h httpHeaderMap) ByteSize() int64 {
	var n int64
	for k, vv := range h {
		for _, v := range vv {
			n += int64(len(k) + len(v))
		}
	}
	return n
}

func (h httpHeaderMap) Set(name, value string) { http.Header(h).Set(name, value) }
func (h httpHeaderMap) Add(name, value string) { http.Header(h).Add(name, value) }
func (h httpHeaderMap) Del(name string)        { http.Header(h).Del(name) }

// encodeHTTP readies a response head in net/http form: the fields filters
// set replace the upstream's (or a local reply's), the filters' response
// flags lead the reply's own, and the encoders of the filters that ran
// see the result. s is the Stream whose state st is.
func (st *filterState) encodeHTTP(s httpfilter.Stream, status int, h http.Header) {
	for _, p := range st.addResp {
		h.Set(p.name, p.value)
	}
	if st.flags != "" {
		if local := h.Get("X-Strait-Response-Flags"); local != "" {
			h.Set("X-Strait-Response-Flags", st.flags+","+local)
		} else {
			h.Set("X-Strait-Response-Flags", st.flags)
		}
	}
	if st.hasEncoders() {
		st.encodeHeaders(s, status, httpHeaderMap(h))
	}
}

var _ httpfilter.HeaderMap = httpHeaderMap(nil)
