package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/straitmesh/strait/internal/proxy/http2/wire"
)

// stream is one request and its response. Every field after the first
// three is guarded by c.mu.
type stream struct {
	c    *Conn
	id   uint32
	head bool // a HEAD request: the response has no body whatever it says

	cond      sync.Cond // L is &c.mu: the head, body bytes or an error arrived
	sendWin   wire.SendWindow
	recvWin   wire.RecvWindow // what the peer may still send, and what the caller read and we owe it back
	resp      *http.Response
	buf       []byte // body bytes received, not yet read
	off       int
	received  int64
	trailer   http.Header
	noContent bool  // the response has no content (HEAD, 204, 304)
	recvDone  bool  // END_STREAM received (and the body checked)
	sendDone  bool  // END_STREAM sent, or the request abandoned
	err       error // the stream failed
	closed    bool  // the response body was closed
	stopCtx   func() bool

	respv http.Response // what resp points to once the head arrived
	body  body          // respv's Body

	// vals backs the values of the response's head and trailers while
	// they fit (vals[:nvals] taken): no allocation of their own for a
	// response of a few fields. Each value's slice is capped, so that an
	// append by the caller copies rather than writes over the next.
	vals  [8]string
	nvals uint8
}

// values returns a backing array for n header values: the stream's own
// while it has room, else a new one (c.mu held).
func (s *stream) values(n int) []string {
	used := int(s.nvals)
	if n > len(s.vals)-used {
		return make([]string, n)
	}
	s.nvals += uint8(n)
	return s.vals[used : used+n : used+n]
}

// failLocked records err as the stream's failure (the first one wins)
// and wakes whoever waits on it (c.mu held).
func (s *stream) failLocked(err error) {
	if s.err == nil {
		s.err = err
	}
	s.cond.Broadcast()
	s.c.sendCond.Broadcast()
}

// endRecvLocked ends the response side after END_STREAM (c.mu held): a
// body shorter than its content-length resets the stream; a request body
// still being sent is abandoned (the response is complete).
func (s *stream) endRecvLocked() {
	if !s.noContent && s.resp.ContentLength >= 0 && s.received != s.resp.ContentLength {
		s.c.resetLocked(s, http2.ErrCodeProtocol, http2.StreamError{StreamID: s.id, Code: http2.ErrCodeProtocol, Cause: errors.New("response body shorter than its content-length")})
		return
	}
	s.recvDone = true
	s.cond.Broadcast()
	if s.sendDone {
		s.c.removeLocked(s)
		return
	}
	s.sendDone = true // the body writer stops
	s.c.removeLocked(s)
	id := s.id
	go s.c.writeFrames(func(fr *http2.Framer) error { return fr.WriteRSTStream(id, http2.ErrCodeCancel) }) //nolint:errcheck // the connection fails on its own
}

// uniqueValued are request header fields whose value is new on nearly
// every request: they are sent never-indexed, so that they don't churn
// the HPACK dynamic table (evicting what repeats) for nothing.
var uniqueValued = map[string]bool{
	"x-request-id": true, "traceparent": true, "tracestate": true,
	"x-b3-traceid": true, "x-b3-spanid": true, "x-b3-parentspanid": true,
	"b3": true, "x-ot-span-context": true, "x-cloud-trace-context": true,
	"x-client-trace-id": true, "grpc-timeout": true, "content-length": true,
	"x-envoy-expected-rq-timeout-ms": true, "x-forwarded-client-cert": true,
}

// connectionSpecific are the fields HTTP/2 forbids (RFC 9113 §8.2.2);
// they are dropped (te is sent only as "trailers").
var connectionSpecific = map[string]bool{
	"Connection": true, "Proxy-Connection": true, "Transfer-Encoding": true,
	"Upgrade": true, "Keep-Alive": true, "Host": true, "Content-Length": true,
	"Te": true, "Trailer": true,
}

// field is a request header field ready to encode.
type field struct {
	name, value string
}

// RoundTrip sends req on a new stream and returns the response once its
// head arrives; the body streams after. It takes a reservation made with
// Reserve if there is one. req.Body is closed. A request that was not
// sent fails with ErrConnUnusable; one that was sent is never sent again.
func (c *Conn) RoundTrip(req *http.Request) (*http.Response, error) {
	hasBody := req.Body != nil && req.Body != http.NoBody
	fail := func(err error) (*http.Response, error) {
		if hasBody {
			req.Body.Close()
		}
		return nil, err
	}
	if req.Method == http.MethodConnect {
		c.Release()
		return fail(errors.New("http2 client: CONNECT is not supported"))
	}
	ctx := req.Context()
	if err := ctx.Err(); err != nil {
		c.Release()
		return fail(err)
	}
	s := &stream{c: c, head: req.Method == http.MethodHead}
	s.cond.L = &c.mu

	c.wmu.Lock()
	fields, size, err := c.requestFields(req, hasBody)
	if err == nil && c.peerMaxHdr > 0 && size > uint64(c.peerMaxHdr) {
		err = fmt.Errorf("http2 client: request header list of %d bytes past the server's limit of %d", size, c.peerMaxHdr)
	}
	if err != nil {
		c.wmu.Unlock()
		c.Release()
		return fail(err)
	}
	c.mu.Lock()
	if c.reserved > 0 {
		c.reserved--
	} else if uint32(len(c.streams)) >= c.maxStreams {
		c.mu.Unlock()
		c.wmu.Unlock()
		return fail(ErrConnUnusable)
	}
	if !c.usableLocked() || c.werr != nil {
		c.becameIdleLocked()
		c.mu.Unlock()
		c.wmu.Unlock()
		return fail(ErrConnUnusable)
	}
	s.id = c.nextID
	c.nextID += 2
	s.sendWin = wire.NewSendWindow(c.peerInitWin)
	s.recvWin = wire.NewRecvWindow(c.streamWin, c.streamWin/2)
	s.sendDone = !hasBody
	c.streams[s.id] = s
	c.mu.Unlock()

	c.hbuf.Reset()
	for _, f := range fields {
		_ = c.henc.WriteField(hpack.HeaderField{Name: f.name, Value: f.value, Sensitive: uniqueValued[f.name]})
	}
	err = c.writeHeaderBlock(s.id, !hasBody)
	if err == nil {
		err = c.flushLocked()
	}
	c.wmu.Unlock()
	if err != nil {
		c.mu.Lock()
		s.failLocked(c.writeErrLocked(err))
		c.removeLocked(s)
		err = s.err
		c.mu.Unlock()
		c.closeWith(err)
		return fail(err)
	}

	if stop := afterDone(ctx, func() { c.cancel(ctx, s) }); stop != nil {
		c.mu.Lock()
		s.stopCtx = stop
		c.mu.Unlock()
	}
	if hasBody {
		go s.writeBody(req.Body, req.Trailer)
	}

	c.mu.Lock()
	for s.resp == nil && s.err == nil {
		s.cond.Wait()
	}
	resp, err := s.resp, s.err
	stop := s.stopCtx
	c.mu.Unlock()
	if resp == nil {
		if stop != nil {
			stop()
		}
		return nil, err
	}
	resp.Request = req
	return resp, nil
}

// cancel resets s when its request's context ends before the response
// was read to its end.
func (c *Conn) cancel(ctx context.Context, s *stream) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.err != nil || s.closed || s.recvDone && s.off == len(s.buf) {
		return
	}
	if c.streams[s.id] == s {
		c.resetLocked(s, http2.ErrCodeCancel, ctx.Err())
		return
	}
	s.failLocked(ctx.Err())
}

// requestFields lists req's header fields in HTTP/2 form and their size
// as SETTINGS_MAX_HEADER_LIST_SIZE counts it (c.wmu held: the lower-case
// name cache is the writer's).
func (c *Conn) requestFields(req *http.Request, hasBody bool) ([]field, uint64, error) {
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	if !httpguts.ValidHostHeader(host) {
		return nil, 0, fmt.Errorf("http2 client: invalid :authority %q", host)
	}
	path := req.URL.RequestURI()
	if req.URL.Opaque == "" && req.URL.Path == "" && req.URL.RawPath == "" {
		path = "/" + strings.TrimPrefix(path, "/")
	}
	scheme := req.URL.Scheme
	if scheme == "" {
		scheme = "http"
	}
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	fields := c.fields[:0]
	fields = append(fields, field{":method", method}, field{":scheme", scheme}, field{":authority", host}, field{":path", path})
	for k, vv := range req.Header {
		if connectionSpecific[k] {
			if k == "Te" && httpguts.HeaderValuesContainsToken(vv, "trailers") {
				fields = append(fields, field{"te", "trailers"})
			}
			continue
		}
		if !httpguts.ValidHeaderFieldName(k) {
			return nil, 0, fmt.Errorf("http2 client: invalid header field name %q", k)
		}
		name := c.lowered.Lower(k)
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				return nil, 0, fmt.Errorf("http2 client: invalid value of header field %q", k)
			}
			fields = append(fields, field{name, v})
		}
	}
	if len(req.Trailer) > 0 {
		keys := make([]string, 0, len(req.Trailer))
		for k := range req.Trailer {
			if !httpguts.ValidTrailerHeader(k) {
				return nil, 0, fmt.Errorf("http2 client: invalid trailer %q", k)
			}
			keys = append(keys, c.lowered.Lower(k))
		}
		fields = append(fields, field{"trailer", strings.Join(keys, ",")})
	}
	switch {
	case req.ContentLength > 0:
		fields = append(fields, field{"content-length", strconv.FormatInt(req.ContentLength, 10)})
	case !hasBody && (method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch):
		fields = append(fields, field{"content-length", "0"})
	}
	var size uint64
	for _, f := range fields {
		size += uint64(len(f.name) + len(f.value) + 32)
	}
	c.fields = fields[:0]
	return fields, size, nil
}

// writeHeaderBlock writes the block in c.hbuf as HEADERS and
// CONTINUATION frames of at most the peer's frame size (c.wmu held).
func (c *Conn) writeHeaderBlock(id uint32, endStream bool) error {
	return wire.WriteHeaderBlock(c.wfr, id, c.hbuf.Bytes(), int(c.maxFrame), endStream)
}

// writeBody sends the request body in DATA frames as the send windows
// allow, then its trailers (or END_STREAM); it closes body.
func (s *stream) writeBody(body io.ReadCloser, trailer http.Header) {
	c := s.c
	defer body.Close()
	buf := wire.GetBodyBuf(wire.BodyBufSize)[:wire.BodyBufSize]
	defer wire.PutBodyBuf(buf)
	for {
		n, rerr := body.Read(buf)
		eof := errors.Is(rerr, io.EOF)
		if rerr != nil && !eof {
			c.mu.Lock()
			if !s.sendDone && c.streams[s.id] == s {
				c.resetLocked(s, http2.ErrCodeCancel, fmt.Errorf("http2 client: request body: %w", rerr))
			}
			c.mu.Unlock()
			return
		}
		data := buf[:n]
		for len(data) > 0 || eof {
			c.mu.Lock()
			for len(data) > 0 && s.err == nil && !s.sendDone && (s.sendWin.Avail() <= 0 || c.connSendWin.Avail() <= 0) {
				c.sendCond.Wait()
			}
			if s.err != nil || s.sendDone {
				c.mu.Unlock()
				return
			}
			k := wire.SpendData(&s.sendWin, &c.connSendWin, len(data), len(data))
			last := eof && k == len(data)
			c.mu.Unlock()
			if last {
				s.finishBody(data, trailer)
				return
			}
			if err := c.writeFrames(func(fr *http2.Framer) error { return fr.WriteData(s.id, false, data[:k]) }); err != nil {
				c.closeWith(err)
				return
			}
			data = data[k:]
		}
	}
}

// finishBody sends the body's last bytes and ends the stream, with the
// trailers that have values if any.
func (s *stream) finishBody(data []byte, trailer http.Header) {
	c := s.c
	var tf []field
	for k, vv := range trailer {
		for _, v := range vv {
			if httpguts.ValidHeaderFieldValue(v) {
				tf = append(tf, field{strings.ToLower(k), v})
			}
		}
	}
	c.wmu.Lock()
	c.mu.Lock()
	if s.sendDone || s.err != nil || c.streams[s.id] != s {
		c.mu.Unlock()
		c.wmu.Unlock()
		return
	}
	s.sendDone = true
	if s.recvDone {
		c.removeLocked(s)
	}
	c.mu.Unlock()
	var err error
	if len(data) > 0 || len(tf) == 0 {
		err = c.wfr.WriteData(s.id, len(tf) == 0, data)
	}
	if err == nil && len(tf) > 0 {
		c.hbuf.Reset()
		for _, f := range tf {
			_ = c.henc.WriteField(hpack.HeaderField{Name: f.name, Value: f.value})
		}
		err = c.writeHeaderBlock(s.id, true)
	}
	if err == nil {
		err = c.flushLocked()
	}
	c.wmu.Unlock()
	if err != nil {
		c.closeWith(err)
	}
}

// afterFuncer is a context that runs functions when it ends without a
// context.AfterFunc's context and done channel (the HTTP/2 server's
// stream context is one).
type afterFuncer interface {
	AfterFunc(f func()) (stop func() bool)
}

// afterDone arranges for f to run when ctx ends, as context.AfterFunc
// does, through ctx's own AfterFunc when it has one; nil: ctx never ends.
func afterDone(ctx context.Context, f func()) (stop func() bool) {
	if a, ok := ctx.(afterFuncer); ok {
		return a.AfterFunc(f)
	}
	if ctx.Done() == nil {
		return nil
	}
	return context.AfterFunc(ctx, f)
}
