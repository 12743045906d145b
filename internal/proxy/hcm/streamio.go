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
// ResponseWriter from x/net/http2) share with the rest of the HCM: the local
// reply, x-request-id generation, and copying a response body to the stream.

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
// already on r (fwdheaders.Proto.ApplyHTTP).
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
