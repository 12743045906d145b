package httpfilter

import (
	"net/http"
	"strings"
)

// HTTPHeader is net/http's header map as the filters see it, for the
// HTTP/2 codec and an HTTP/2 upstream's response on the HTTP/1.1 path. A
// map is a pointer, so converting it to the interface allocates nothing.
type HTTPHeader http.Header

// Lookup is the field's values joined with ",", as Envoy reads a
// repeated header.
func (h HTTPHeader) Lookup(name string) (string, bool) {
	vv, ok := h[http.CanonicalHeaderKey(name)]
	if !ok || len(vv) == 0 {
		return "", ok
	}
	if len(vv) == 1 {
		return vv[0], true
	}
	return strings.Join(vv, ","), true
}

// Range calls f with each field line until it returns false.
func (h HTTPHeader) Range(f func(name, value string) bool) {
	for k, vv := range h {
		for _, v := range vv {
			if !f(k, v) {
				return
			}
		}
	}
}

// ByteSize is the fields' names' and values' lengths (ByteSizer).
func (h HTTPHeader) ByteSize() int64 {
	var n int64
	for k, vv := range h {
		for _, v := range vv {
			n += int64(len(k) + len(v))
		}
	}
	return n
}

// Set replaces the field's values with value.
func (h HTTPHeader) Set(name, value string) { http.Header(h).Set(name, value) }

// Add adds a value to the field.
func (h HTTPHeader) Add(name, value string) { http.Header(h).Add(name, value) }

// Del removes the field.
func (h HTTPHeader) Del(name string) { http.Header(h).Del(name) }

var (
	_ HeaderMap = HTTPHeader(nil)
	_ ByteSizer = HTTPHeader(nil)
)
