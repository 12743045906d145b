package forward

import "net/http"

// hopHeaders are removed in both directions (RFC 9110 §7.6.1), with
// HTTP2-Settings, connection-specific too (RFC 9113 §3.2.1): an h2c upgrade
// request is served as HTTP/1.1, as Envoy's HTTP/1 codec does.
var hopHeaders = []string{
	"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
	"Http2-Settings",
}

// RemoveHop removes the hop-by-hop headers from h: those hopHeaders names
// and those its Connection header lists.
func RemoveHop(h http.Header) {
	if c, ok := h["Connection"]; ok {
		for _, v := range c {
			for _, f := range splitComma(v) {
				delete(h, http.CanonicalHeaderKey(f))
			}
		}
	}
	for _, k := range hopHeaders {
		delete(h, k)
	}
}

func splitComma(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			f := s[start:i]
			for len(f) > 0 && (f[0] == ' ' || f[0] == '\t') {
				f = f[1:]
			}
			for len(f) > 0 && (f[len(f)-1] == ' ' || f[len(f)-1] == '\t') {
				f = f[:len(f)-1]
			}
			if f != "" {
				out = append(out, f)
			}
			start = i + 1
		}
	}
	return out
}
