package client

import (
	"errors"
	"io"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"

	"golang.org/x/net/http2"

	"github.com/straitmesh/strait/internal/proxy/http2/wire"
)

// connHeaders are the connection-specific fields a response must not
// carry in HTTP/2; they are dropped.
var connHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "Upgrade"}

// errBodyClosed is what a read of a closed response body returns.
var errBodyClosed = errors.New("http2 client: read on closed response body")

// onHeaders takes a response head or trailers for their stream.
func (c *Conn) onHeaders(f *http2.MetaHeadersFrame) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, err := c.lookupLocked(f.StreamID, "HEADERS")
	if s == nil {
		return err
	}
	protocolError := func(why string) error {
		c.resetLocked(s, http2.ErrCodeProtocol, http2.StreamError{StreamID: s.id, Code: http2.ErrCodeProtocol, Cause: errors.New(why)})
		return nil
	}
	switch {
	case f.Truncated:
		c.resetLocked(s, http2.ErrCodeProtocol, ErrHeaderListTooLarge)
		return nil
	case s.recvDone:
		return protocolError("HEADERS after END_STREAM")
	case s.resp != nil:
		return c.onTrailers(s, f, protocolError)
	}
	status := f.PseudoValue("status")
	code, err := strconv.Atoi(status)
	if err != nil || len(status) != 3 || code < 100 {
		return protocolError("malformed :status")
	}
	if len(f.PseudoFields()) != 1 {
		return protocolError("request pseudo-header in a response")
	}
	if code < 200 {
		if code == http.StatusSwitchingProtocols || f.StreamEnded() {
			return protocolError("1xx response ends its stream or switches protocols")
		}
		return nil // an interim response (100, 103): the final one follows
	}
	regular := f.RegularFields()
	h := make(http.Header, len(regular))
	vals := s.values(len(regular)) // one backing array for the values
	var trailer http.Header
	for i, hf := range regular {
		key := c.canon.Canonical(hf.Name)
		if key == "Trailer" {
			if trailer == nil {
				trailer = http.Header{}
			}
			for _, t := range strings.Split(hf.Value, ",") {
				if t = textproto.TrimString(t); t != "" {
					trailer[http.CanonicalHeaderKey(t)] = nil
				}
			}
			continue
		}
		vals[i] = hf.Value
		if old := h[key]; old != nil {
			h[key] = append(old, hf.Value)
		} else {
			h[key] = vals[i : i+1 : i+1]
		}
	}
	resp := &s.respv
	*resp = http.Response{
		Status:        statusLine(code, status),
		StatusCode:    code,
		Proto:         "HTTP/2.0",
		ProtoMajor:    2,
		Header:        h,
		Trailer:       trailer,
		ContentLength: -1,
	}
	// Fields that are malformed in HTTP/2 (RFC 9113 §8.2.2) don't cross.
	for _, k := range connHeaders {
		delete(h, k)
	}
	if cl := h["Content-Length"]; len(cl) > 0 {
		// Repeats of one value may collapse into it (RFC 9110 §8.6).
		for _, v := range cl[1:] {
			if v != cl[0] {
				return protocolError("conflicting content-length")
			}
		}
		n, err := strconv.ParseUint(cl[0], 10, 63)
		if err != nil {
			return protocolError("malformed content-length")
		}
		h["Content-Length"] = cl[:1]
		resp.ContentLength = int64(n)
	} else if f.StreamEnded() && !s.head {
		resp.ContentLength = 0
	}
	// A response to HEAD, a 204 and a 304 have no content whatever their
	// content-length says (RFC 9110 §6.4.1).
	s.noContent = s.head || code == http.StatusNoContent || code == http.StatusNotModified
	s.body.s = s
	resp.Body = &s.body
	s.resp = resp
	if f.StreamEnded() {
		s.endRecvLocked()
	}
	s.cond.Broadcast()
	return nil
}

// statusLines are Response.Status for the codes net/http has a text for.
var statusLines = func() (l [600]string) {
	for code := range l {
		if t := http.StatusText(code); t != "" {
			l[code] = strconv.Itoa(code) + " " + t
		}
	}
	return l
}()

// statusLine is Response.Status for code, whose text is status.
func statusLine(code int, status string) string {
	if code >= 0 && code < len(statusLines) && statusLines[code] != "" {
		return statusLines[code]
	}
	return status + " " + http.StatusText(code)
}

// onTrailers takes the trailers of s's response (c.mu held).
func (c *Conn) onTrailers(s *stream, f *http2.MetaHeadersFrame, protocolError func(string) error) error {
	if !f.StreamEnded() {
		return protocolError("trailers without END_STREAM")
	}
	if len(f.PseudoFields()) != 0 {
		return protocolError("pseudo-header in trailers")
	}
	regular := f.RegularFields()
	t := make(http.Header, len(regular))
	vals := s.values(len(regular)) // one backing array for the values
	for i, hf := range regular {
		key := c.canon.Canonical(hf.Name)
		vals[i] = hf.Value
		if old := t[key]; old != nil {
			t[key] = append(old, hf.Value)
		} else {
			t[key] = vals[i : i+1 : i+1]
		}
	}
	s.trailer = t
	s.endRecvLocked()
	return nil
}

// body is a response body: the stream's received bytes, read by the
// caller; what it reads is given back to the peer's send windows.
type body struct{ s *stream }

func (b *body) Read(p []byte) (int, error) {
	s := b.s
	c := s.c
	c.mu.Lock()
	for s.off == len(s.buf) && !s.recvDone && s.err == nil && !s.closed {
		s.cond.Wait()
	}
	switch {
	case s.closed:
		c.mu.Unlock()
		return 0, errBodyClosed
	case s.off < len(s.buf):
		n := copy(p, s.buf[s.off:])
		s.off += n
		if s.off == len(s.buf) {
			// Drained: the buffer goes back until more DATA comes.
			wire.PutBodyBuf(s.buf)
			s.buf, s.off = nil, 0
		}
		connInc := c.returnConnWindowLocked(uint32(n))
		var streamInc uint32
		if !s.recvDone && s.err == nil {
			streamInc = s.recvWin.Return(uint32(n))
		}
		id := s.id
		c.mu.Unlock()
		c.sendWindowUpdates(connInc, id, streamInc)
		return n, nil
	case s.recvDone:
		if s.trailer != nil {
			if s.resp.Trailer == nil {
				s.resp.Trailer = s.trailer // the stream's, no one else's
			} else {
				for k, v := range s.trailer {
					s.resp.Trailer[k] = v
				}
			}
			s.trailer = nil
		}
		stop := s.stopCtx
		s.stopCtx = nil
		c.mu.Unlock()
		if stop != nil {
			stop()
		}
		return 0, io.EOF
	}
	err := s.err
	c.mu.Unlock()
	return 0, err
}

// Close resets the stream if its response did not end, and gives back
// the window of what was not read.
func (b *body) Close() error {
	s := b.s
	c := s.c
	c.mu.Lock()
	if s.closed {
		c.mu.Unlock()
		return nil
	}
	s.closed = true
	if c.streams[s.id] == s && !s.recvDone {
		c.resetLocked(s, http2.ErrCodeCancel, errBodyClosed)
	}
	connInc := c.returnConnWindowLocked(uint32(len(s.buf) - s.off))
	wire.PutBodyBuf(s.buf)
	s.buf, s.off = nil, 0
	s.cond.Broadcast()
	stop := s.stopCtx
	s.stopCtx = nil
	c.mu.Unlock()
	if stop != nil {
		stop()
	}
	c.sendWindowUpdates(connInc, 0, 0)
	return nil
}
