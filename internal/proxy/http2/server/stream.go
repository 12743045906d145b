package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"

	"github.com/straitmesh/strait/internal/proxy/http2/wire"
	"github.com/straitmesh/strait/internal/proxy/wbatch"
)

// stream is one request and its response. id and c are set at creation;
// the fields under them are guarded by c.mu; rw is the handler's.
type stream struct {
	c  *Conn
	id uint32

	cond       sync.Cond // L is &c.mu: body bytes, the body's end or an error arrived
	sendWin    wire.SendWindow
	recvWin    wire.RecvWindow // what the client may still send, and what the handler read and we owe it back
	buf        []byte          // request body bytes received, not yet read
	off        int
	received   int64
	declLen    int64              // the request's content-length; -1: none
	trailer    http.Header        // request trailers received
	reqTrailer http.Header        // the request's Trailer map (declared names)
	recvDone   bool               // END_STREAM received (and the body checked)
	bodyClosed bool               // the handler closed the request body
	headOut    bool               // the response head was written (set under wmu too)
	err        error              // the stream failed (reset, connection gone)
	cancel     context.CancelFunc // the request context's, when it is not ctx
	ctx        streamCtx          // the request's context, under a parent that is never done

	rw   responseWriter
	body requestBody  // the request's Body, when it has one
	url  url.URL      // the request's URL, when parsePlainPath could parse it
	req  http.Request // the handler's request: part of the stream, one allocation less
}

// failLocked records err as the stream's failure (the first one wins),
// cancels its context and wakes whoever waits on it (c.mu held).
func (s *stream) failLocked(err error) {
	if s.err == nil {
		s.err = err
	}
	s.endCtx()
	s.cond.Broadcast()
	s.c.wakeSendersLocked()
}

// endCtx ends the stream's request context.
func (s *stream) endCtx() {
	if s.cancel != nil {
		s.cancel()
	} else {
		s.ctx.cancel()
	}
}

// endRecvLocked notes END_STREAM (c.mu held).
func (s *stream) endRecvLocked() {
	s.recvDone = true
	s.cond.Broadcast()
}

// connectionSpecific are the fields that make a request malformed in
// HTTP/2 (RFC 9113 §8.2.2; te is checked on its own).
var connectionSpecific = map[string]bool{
	"connection": true, "proxy-connection": true, "keep-alive": true,
	"transfer-encoding": true, "upgrade": true,
}

// onHeaders opens a stream, or takes a request's trailers.
func (c *Conn) onHeaders(ctx context.Context, f *http2.MetaHeadersFrame) error {
	id := f.StreamID
	if id%2 != 1 {
		return fmt.Errorf("HEADERS on even stream %d: %w", id, http2.ConnectionError(http2.ErrCodeProtocol))
	}
	c.mu.Lock()
	if s := c.streams[id]; s != nil {
		return c.onTrailers(s, f) // unlocks
	}
	if id <= c.maxClientID {
		c.mu.Unlock()
		return fmt.Errorf("HEADERS on closed stream %d: %w", id, http2.ConnectionError(http2.ErrCodeProtocol))
	}
	c.maxClientID = id
	c.opened++
	if c.shutdown && c.goAwayFinal {
		c.mu.Unlock()
		return nil
	}
	if uint32(len(c.streams)) >= c.cfg.MaxConcurrentStreams {
		c.mu.Unlock()
		c.resetStream(id, http2.ErrCodeRefusedStream)
		return nil
	}
	c.mu.Unlock()
	if f.HasPriority() && f.Priority.StreamDep == id {
		c.resetStream(id, http2.ErrCodeProtocol)
		return nil
	}
	if f.Truncated {
		c.headListTooLong(id, f.StreamEnded())
		return nil
	}
	s := &stream{c: c, id: id, declLen: -1}
	s.cond.L = &c.mu
	req, ok := c.newRequest(ctx, s, f)
	if !ok {
		c.resetStream(id, http2.ErrCodeProtocol)
		return nil
	}
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return nil
	}
	s.sendWin = wire.NewSendWindow(c.peerInitWin)
	s.recvWin = wire.NewRecvWindow(c.cfg.StreamWindow, c.cfg.StreamWindow/4)
	s.recvDone = f.StreamEnded()
	if c.streams == nil {
		c.streams = map[uint32]*stream{} // dropped while parked
	}
	c.streams[id] = s
	c.mu.Unlock()
	s.rw = responseWriter{s: s, req: req}
	go s.run(req)
	return nil
}

// onTrailers takes the request trailers of s (mu held; it unlocks).
func (c *Conn) onTrailers(s *stream, f *http2.MetaHeadersFrame) error {
	if s.recvDone {
		c.mu.Unlock()
		c.resetStream(s.id, http2.ErrCodeStreamClosed)
		return nil
	}
	if !f.StreamEnded() || len(f.PseudoFields()) > 0 || f.Truncated {
		c.mu.Unlock()
		c.resetStream(s.id, http2.ErrCodeProtocol)
		return nil
	}
	for _, hf := range f.RegularFields() {
		key := c.canon.Canonical(hf.Name)
		if !httpguts.ValidTrailerHeader(key) {
			c.mu.Unlock()
			c.resetStream(s.id, http2.ErrCodeProtocol)
			return nil
		}
		if s.trailer == nil {
			s.trailer = http.Header{}
		}
		s.trailer[key] = append(s.trailer[key], hf.Value)
	}
	if s.declLen >= 0 && s.received != s.declLen {
		c.mu.Unlock()
		c.resetStream(s.id, http2.ErrCodeProtocol)
		return nil
	}
	s.endRecvLocked()
	c.mu.Unlock()
	return nil
}

// headListTooLong answers a request whose head was past our
// MAX_HEADER_LIST_SIZE with 431, as x/net/http2's server does.
func (c *Conn) headListTooLong(id uint32, ended bool) {
	const body = "<h1>HTTP Error 431</h1><p>Request Header Field(s) Too Large</p>"
	c.wmu.Lock()
	c.wr.hbuf.Reset()
	c.writeField(":status", "431", false)
	c.writeField("content-type", "text/html; charset=utf-8", false)
	c.writeField("content-length", strconv.Itoa(len(body)), false)
	c.writeField("date", c.dateHeader(), false)
	c.mu.Lock()
	win := min(c.connSendWin.Avail(), c.peerInitWin)
	fits := win >= int32(len(body))
	if fits {
		c.connSendWin.Spend(int32(len(body)))
	}
	c.mu.Unlock()
	err := c.writeHeaderBlock(id, !fits)
	if fits {
		_ = c.wr.wfr.WriteData(id, true, []byte(body))
	}
	if !ended {
		_ = c.wr.wfr.WriteRSTStream(id, http2.ErrCodeNo)
	}
	if err == nil {
		err = c.appendLocked()
	}
	c.wr.wbuf.Reset()
	c.wmu.Unlock()
	if errors.Is(err, wbatch.ErrBacklog) {
		c.nc.Close()
	}
}

// newRequest builds the request of s from its HEADERS; false: the request
// is malformed (the stream gets PROTOCOL_ERROR).
func (c *Conn) newRequest(ctx context.Context, s *stream, f *http2.MetaHeadersFrame) (*http.Request, bool) { //nolint:contextcheck // the request's context is the stream's own (streamctx.go), whose values are ctx's
	var method, scheme, authority, path string
	for _, hf := range f.PseudoFields() {
		switch hf.Name {
		case ":method":
			method = hf.Value
		case ":scheme":
			scheme = hf.Value
		case ":authority":
			authority = hf.Value
		case ":path":
			path = hf.Value
		default: // :protocol (extended CONNECT is not offered), :status, unknown
			return nil, false
		}
	}
	if method == http.MethodConnect {
		if path != "" || scheme != "" || authority == "" {
			return nil, false
		}
	} else if method == "" || path == "" || (scheme != "https" && scheme != "http") {
		return nil, false
	}
	regular := f.RegularFields()
	h := make(http.Header, len(regular))
	vals := make([]string, len(regular)) // one backing array for the values
	for i, hf := range regular {
		if connectionSpecific[hf.Name] || hf.Name == "te" && hf.Value != "trailers" {
			return nil, false
		}
		key := c.canon.Canonical(hf.Name)
		vals[i] = hf.Value
		if old := h[key]; old != nil {
			h[key] = append(old, hf.Value)
		} else {
			h[key] = vals[i : i+1 : i+1]
		}
	}
	needsContinue := false
	if ex := h["Expect"]; ex != nil {
		needsContinue = httpguts.HeaderValuesContainsToken(ex, "100-continue")
		if needsContinue {
			delete(h, "Expect")
		}
	}
	if cookies := h["Cookie"]; len(cookies) > 1 {
		h["Cookie"] = []string{strings.Join(cookies, "; ")}
	}
	var trailer http.Header
	if tv, ok := h["Trailer"]; ok {
		for _, v := range tv {
			for _, key := range strings.Split(v, ",") {
				key = textproto.CanonicalMIMEHeaderKey(textproto.TrimString(key))
				switch key {
				case "Transfer-Encoding", "Trailer", "Content-Length", "":
				default:
					if trailer == nil {
						trailer = http.Header{}
					}
					trailer[key] = nil
				}
			}
		}
		delete(h, "Trailer")
	}
	if host, ok := h["Host"]; ok {
		if len(host) > 1 || authority != "" && host[0] != authority {
			return nil, false
		}
		authority = host[0]
		delete(h, "Host")
	}
	if strings.IndexByte(authority, '@') >= 0 || authority != "" && !httpguts.ValidHostHeader(authority) {
		return nil, false
	}
	var u *url.URL
	requestURI := path
	if method == http.MethodConnect {
		u = &url.URL{Host: authority}
		requestURI = authority
	} else {
		if path[0] != '/' && path != "*" {
			return nil, false
		}
		if parsePlainPath(&s.url, path) {
			u = &s.url
		} else {
			var err error
			if u, err = url.ParseRequestURI(path); err != nil {
				return nil, false
			}
		}
	}
	contentLength := int64(0)
	if cl, ok := h["Content-Length"]; ok {
		for _, v := range cl[1:] {
			if v != cl[0] {
				return nil, false
			}
		}
		n, err := strconv.ParseUint(cl[0], 10, 63)
		if err != nil {
			return nil, false
		}
		h["Content-Length"] = cl[:1]
		contentLength = int64(n)
		if f.StreamEnded() && n != 0 {
			return nil, false
		}
		s.declLen = contentLength
	} else if !f.StreamEnded() {
		contentLength = -1
	}
	if ctx.Done() == nil {
		s.ctx.parent = ctx
		ctx = &s.ctx
	} else {
		ctx, s.cancel = context.WithCancel(ctx)
	}
	req := http.Request{
		Method:        method,
		URL:           u,
		Proto:         "HTTP/2.0",
		ProtoMajor:    2,
		Header:        h,
		ContentLength: contentLength,
		Host:          authority,
		RemoteAddr:    c.remote,
		RequestURI:    requestURI,
		Trailer:       trailer,
		Body:          http.NoBody,
	}
	if scheme == "https" {
		req.TLS = c.cfg.TLS
	}
	if !f.StreamEnded() {
		s.body = requestBody{s: s, needsContinue: needsContinue}
		req.Body = &s.body
	}
	s.reqTrailer = trailer
	s.req = *req.WithContext(ctx) // req and its copy stay on the stack
	return &s.req, true
}

// parsePlainPath parses path into u as url.ParseRequestURI would, when
// path is a plain one: a '/', then letters, digits, "-._~/", then maybe a
// query of printable ASCII, which parsing leaves as it is. false: path is
// not plain (u is untouched), ParseRequestURI's to parse.
func parsePlainPath(u *url.URL, path string) bool {
	if path == "" || path[0] != '/' {
		return false
	}
	q := len(path)
	for i := 1; i < len(path); i++ {
		c := path[i]
		if c == '?' {
			q = i
			break
		}
		if !plainPathByte[c] {
			return false
		}
	}
	for i := q + 1; i < len(path); i++ {
		if c := path[i]; c <= ' ' || c >= 0x7f {
			return false
		}
	}
	*u = url.URL{Path: path[:q]}
	switch {
	case q == len(path)-1:
		u.ForceQuery = true // "/p?": an empty query
	case q < len(path):
		u.RawQuery = path[q+1:]
	}
	return true
}

// plainPathByte are the bytes a path keeps as they are in URL.Path, with
// no RawPath (unreserved characters and '/').
var plainPathByte = func() (t [256]bool) {
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for _, c := range "-._~/" {
		t[c] = true
	}
	return t
}()

// run serves the stream on its goroutine and ends it.
func (s *stream) run(req *http.Request) {
	c := s.c
	defer func() {
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler { //nolint:errorlint // a panic value, not a wrapped error
				c.cfg.Log.Error("panic serving HTTP/2 stream", "remote", c.remote, "panic", v)
			}
			s.abort()
		}
		s.endCtx()
		if b, ok := req.Body.(*requestBody); ok {
			b.release()
		}
	}()
	c.cfg.Handler.ServeHTTP(&s.rw, req)
	s.rw.finish()
}

// abort resets the stream after a handler's panic (its response, if any,
// is cut short), as x/net does (INTERNAL_ERROR).
func (s *stream) abort() {
	c := s.c
	c.mu.Lock()
	live := c.streams[s.id] == s
	c.mu.Unlock()
	if live {
		c.resetStream(s.id, http2.ErrCodeInternal)
	}
}

// ended is called once the response's END_STREAM went out: a client still
// sending its request gets RST_STREAM NO_ERROR (RFC 9113 §8.1), and the
// stream is forgotten.
func (s *stream) ended() {
	c := s.c
	c.mu.Lock()
	live := c.streams[s.id] == s
	open := live && !s.recvDone && s.err == nil
	if live && !open {
		c.removeLocked(s)
	}
	c.mu.Unlock()
	if open {
		c.resetStream(s.id, http2.ErrCodeNo)
	}
}

// requestBody is a request's body: the stream's received bytes, read by
// the handler; what it reads is given back to the peer's windows.
type requestBody struct {
	s             *stream
	needsContinue bool // send 100 Continue at the first read
}

// errBodyClosed is what a read of a closed request body returns.
var errBodyClosed = errors.New("http2 server: read on closed request body")

func (b *requestBody) Read(p []byte) (int, error) {
	s := b.s
	c := s.c
	if b.needsContinue {
		b.needsContinue = false
		s.rw.writeContinue()
	}
	c.mu.Lock()
	for s.off == len(s.buf) && !s.recvDone && s.err == nil && !s.bodyClosed {
		s.cond.Wait()
	}
	switch {
	case s.bodyClosed:
		c.mu.Unlock()
		return 0, errBodyClosed
	case s.off < len(s.buf):
		n := copy(p, s.buf[s.off:])
		s.off += n
		if s.off == len(s.buf) {
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
		for k, v := range s.trailer {
			if _, ok := s.reqTrailer[k]; ok {
				s.reqTrailer[k] = v
			}
		}
		s.trailer = nil
		c.mu.Unlock()
		return 0, io.EOF
	}
	err := s.err
	c.mu.Unlock()
	var se http2.StreamError
	if errors.As(err, &se) && se.Code == http2.ErrCodeNo {
		err = io.ErrUnexpectedEOF
	}
	return 0, err
}

// Close stops reading: what was received and what still arrives is given
// back to the connection window.
func (b *requestBody) Close() error {
	s := b.s
	c := s.c
	c.mu.Lock()
	if s.bodyClosed {
		c.mu.Unlock()
		return nil
	}
	s.bodyClosed = true
	connInc := c.returnConnWindowLocked(uint32(len(s.buf) - s.off))
	wire.PutBodyBuf(s.buf)
	s.buf, s.off = nil, 0
	s.cond.Broadcast()
	c.mu.Unlock()
	c.sendWindowUpdates(connInc, 0, 0)
	return nil
}

// release closes the body once the handler returned.
func (b *requestBody) release() { _ = b.Close() }
