package hcm

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"sync"
)

// This file holds what the HTTP/2 stream handlers (h2.go, net/http's
// ResponseWriter from x/net/http2) share with the rest of the HCM: Envoy's
// local reply bodies and the local reply itself, hop-by-hop header removal,
// x-request-id generation, and copying a response body to the stream.

// Envoy's local reply bodies.
const (
	bodyNoHealthy     = "no healthy upstream"
	bodyConnectFailed = "upstream connect error or disconnect/reset before headers. reset reason: connection failure"
)

// hopHeaders are removed in both directions (RFC 9110 §7.6.1), with
// HTTP2-Settings, connection-specific too (RFC 9113 §3.2.1): an h2c upgrade
// request is served as HTTP/1.1, as Envoy's HTTP/1 codec does.
var hopHeaders = []string{
	"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
	"Http2-Settings",
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func localReply(w http.ResponseWriter, code int, flags, body string) {
	h := w.Header()
	if flags != "" {
		h.Set("X-Strait-Response-Flags", flags)
		if flags == "UO" {
			h.Set("X-Envoy-Overloaded", "true")
		}
	}
	if body != "" {
		h.Set("Content-Type", "text/plain")
	}
	w.WriteHeader(code)
	_, _ = io.WriteString(w, body) // a client gone is the stream's end, not an error here
}

func removeHop(h http.Header) {
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

func newRequestID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var out [36]byte
	hex.Encode(out[0:8], b[0:4])
	out[8] = '-'
	hex.Encode(out[9:13], b[4:6])
	out[13] = '-'
	hex.Encode(out[14:18], b[6:8])
	out[18] = '-'
	hex.Encode(out[19:23], b[8:10])
	out[23] = '-'
	hex.Encode(out[24:], b[10:])
	return string(out[:])
}

// writerOnly hides ResponseWriter's ReadFrom so CopyBuffer uses our buffer.
type writerOnly struct{ io.Writer }

func copyFlushing(w http.ResponseWriter, r io.Reader, buf []byte) error {
	rc := http.NewResponseController(w)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return werr
			}
			if ferr := rc.Flush(); ferr != nil {
				return ferr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// addForwardHeaders completes an upstream request made from r on the
// HTTP/2 path: x-request-id unless present, no Go
// default User-Agent, and no body for an empty one. x-forwarded-proto is
// already on r (setForwardedProto).
func addForwardHeaders(out, r *http.Request) {
	h := out.Header
	if _, ok := h["X-Request-Id"]; !ok {
		h["X-Request-Id"] = []string{newRequestID()}
	}
	if _, ok := h["User-Agent"]; !ok {
		h["User-Agent"] = nil // don't let the client add Go's default
	}
	if r.ContentLength == 0 {
		out.Body = nil
	}
}
