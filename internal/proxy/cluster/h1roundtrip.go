package cluster

// This file is the round trip of an http.Request (an HTTP/2 stream's, a
// request mirror's) to an HTTP/1.1 upstream, on the cluster's pooled
// connections (h1pool.go) and the strait codec (package http1), the ones
// the HTTP/1.1 path (forward/h1) uses: the request head is written from
// the request, its body streamed by its own goroutine while the response
// head is awaited, and the response's body read from the connection by
// the caller, which gives the connection back to the pool at its end.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"sync"
	"sync/atomic"

	"golang.org/x/net/http/httpguts"

	"github.com/straitmesh/strait/internal/proxy/http1"
)

// ErrPipeEndpoint is returned for HTTP requests to a unix-socket endpoint.
var ErrPipeEndpoint = errors.New("pipe endpoints are not supported for HTTP upstreams")

// RoundTrip sends req to ep (whatever req's URL host says) and returns
// the upstream's response, whose body the caller reads and closes; a
// request body is closed once sent or given up, as an
// http.RoundTripper does. It counts upstream_rq_total once the request
// has a connection (see attached). Cancelling the request's context ends
// the exchange: the connection is closed, also while the response body is
// read.
func (c *Cluster) RoundTrip(req *http.Request, ep Endpoint) (*http.Response, error) {
	if c.UpstreamHTTP2(req.ProtoMajor == 2) {
		return c.h2.roundTrip(req, ep) // h2Pool.counted counts
	}
	return c.roundTripH1(req, ep)
}

// attached counts a request that got an upstream connection:
// upstream_rq_total, which Envoy counts when its connection pool attaches
// a stream to a connection (ConnPoolImplBase::attachStreamToClient), so a
// request the circuit breaker refuses (upstream_rq_pending_overflow) or
// whose connection could not be made is not in it.
func (c *Cluster) attached() { c.Stats.RqTotal.Add(1) }

// Errors of the HTTP/1.1 round trip.
var (
	errSwitched     = fmt.Errorf("%w: upstream switched protocols without an upgrade request", ErrMalformedResponse)
	errTooMany1xx   = fmt.Errorf("%w: too many informational (1xx) responses", ErrMalformedResponse)
	errConnect      = errors.New("CONNECT is not sent to an HTTP/1.1 upstream")
	errBodyShort    = errors.New("request body shorter than its Content-Length")
	errBodyClosed   = errors.New("response body closed")
	errHeadTooLarge = errors.New("request head too large")
)

// max1xx bounds the informational responses skipped before the final one,
// as net/http's Transport does.
const max1xx = 5

// maxRequestHead bounds the request head this path writes (and the
// pooled buffer it keeps): the HCM's own limit on request heads is lower.
const maxRequestHead = 96 << 10

var headBufPool = sync.Pool{New: func() any { b := make([]byte, 0, 2<<10); return &b }}

// h1Exchange is one request's exchange on an upstream connection, and the
// body of its response. Two parts use the connection: the response (until
// its body ends, read by the caller) and, for a request with a body, the
// goroutine that sends it. The last part to end gives the connection back
// to the pool when both ended cleanly, else closes it (release).
type h1Exchange struct {
	// Set before the parts start, read-only while they run.
	c    *Cluster
	req  *http.Request
	ctx  context.Context
	uc   *UpstreamConn
	stop func() bool // ends the cancellation watch (context.AfterFunc); nil: none

	live atomic.Int32 // parts still using uc
	bad  atomic.Bool  // a part failed: uc is not reused
	// keep is cleared by the response part when the upstream or the
	// request asked for the connection to close.
	keep bool

	// The response body, owned by its reader.
	framing http1.Framing
	lr      http1.LengthReader
	cr      http1.ChunkedReader
	rdone   bool  // the body ended (EOF, error or Close)
	rerr    error // what Read returns once rdone
}

func (c *Cluster) roundTripH1(req *http.Request, ep Endpoint) (*http.Response, error) {
	hasBody := req.Body != nil && req.Body != http.NoBody
	bodyOwned := false // the body goroutine closes req.Body
	defer func() {
		if hasBody && !bodyOwned {
			req.Body.Close()
		}
	}()
	if ep.Network != "tcp" {
		return nil, ErrPipeEndpoint
	}
	ctx := req.Context()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	bp := headBufPool.Get().(*[]byte)
	head, err := appendRequestHead((*bp)[:0], req, ep.Address, hasBody)
	defer func() {
		if cap(head) <= maxRequestHead {
			*bp = head[:0]
			headBufPool.Put(bp)
		}
	}()
	if err != nil {
		return nil, err
	}
	uc, err := c.GetConn(ctx, ep)
	if err != nil {
		return nil, err
	}
	// A body can't be sent again once the goroutine sending it read from
	// it, so a pooled connection that may have been closed while idle is
	// checked first (as forward/h1 does for a streamed body).
	if hasBody && uc.Reused && http1.Peek(uc.Conn) != http1.PeekQuiet {
		if uc, err = c.ReplaceConn(ctx, ep, uc); err != nil {
			return nil, err
		}
	}
	x := &h1Exchange{c: c, req: req, ctx: ctx}
	reused := uc.Reused
	for attempt := 0; ; attempt++ {
		x.start(uc)
		n, err := uc.Write(head)
		if err == nil && hasBody {
			x.live.Add(1)
			bodyOwned = true
			go x.sendBody()
		}
		got := false
		var resp *http.Response
		if err == nil {
			resp, got, err = x.readResponse()
			if err == nil {
				return resp, nil
			}
		}
		x.end(partAborted)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		// Once more on a new connection only if this one came from the
		// pool (the upstream may have closed it while idle), no response
		// byte came, and sending the request again is safe: none of it
		// left, or it has no body and an idempotent method.
		safe := n == 0 || !hasBody && http1.Idempotent(req.Method)
		if attempt > 0 || !reused || got || !safe || bodyOwned || !http1.StaleConn(err) {
			return nil, err
		}
		if uc, err = c.ReplaceConn(ctx, ep, uc); err != nil {
			return nil, err
		}
	}
}

// start begins an attempt on uc: the request's trace learns the
// connection, and the request's cancellation closes it.
func (x *h1Exchange) start(uc *UpstreamConn) {
	x.uc, x.keep, x.stop = uc, !x.req.Close, nil
	x.bad.Store(false)
	x.live.Store(1)
	uc.Exchange()
	if trace := httptrace.ContextClientTrace(x.ctx); trace != nil && trace.GotConn != nil {
		// The connection under the deadlines: its layers carry the TLS
		// identities (tlsconf.UpstreamPrincipals).
		trace.GotConn(httptrace.GotConnInfo{Conn: uc.D.Conn, Reused: uc.Reused})
	}
	if x.ctx.Done() != nil {
		x.stop = context.AfterFunc(x.ctx, x.abort)
	}
}

// abort closes the connection under the parts, which ends their reads and
// writes with an error; the last part's release frees it.
func (x *h1Exchange) abort() { x.uc.Conn.Close() }

// How a part of the exchange ended.
type partEnd uint8

const (
	partDone     partEnd = iota // its message complete
	partUnusable                // the connection is not reused, but the other part goes on
	partAborted                 // the exchange is over: the connection closes at once, which ends the other part
)

// end ends a part.
func (x *h1Exchange) end(how partEnd) {
	if how != partDone {
		x.bad.Store(true)
	}
	if how == partAborted {
		x.abort()
	}
	if x.live.Add(-1) == 0 {
		x.release()
	}
}

// release gives the connection back to the pool when the exchange
// completed and left it reusable, else closes it.
func (x *h1Exchange) release() {
	cancelled := x.stop != nil && !x.stop()
	if x.bad.Load() || cancelled || !x.keep {
		x.uc.Close()
		return
	}
	x.c.PutConn(x.uc)
}

// sendBody is the request body's part: it copies the body to the
// connection, then closes it. A body that fails to read (the client went
// away, or sent less than its Content-Length) aborts the exchange: the
// upstream would wait for the rest. One the upstream stops taking (it
// answered early and closed, or reset) leaves the response to be read,
// as net/http and forward/h1 leave it, on a connection not reused.
func (x *h1Exchange) sendBody() {
	rerr, werr := x.copyBody()
	x.req.Body.Close()
	switch {
	case rerr != nil:
		x.end(partAborted)
	case werr != nil:
		x.end(partUnusable)
	default:
		x.end(partDone)
	}
}

const bodyBufSize = 32 << 10

var lastChunk = []byte("0\r\n\r\n")

// bodyBufPool holds the request body part's buffers: room for a chunk's
// size line before the data and its CRLF and the last chunk after it.
var bodyBufPool = sync.Pool{New: func() any {
	b := make([]byte, http1.ChunkHeadroom+bodyBufSize+2+len(lastChunk))
	return &b
}}

// copyBody sends the request body: its Content-Length bytes (no more are
// read), or chunked when its length is unknown; the last chunk goes with
// the last data when they arrive together. A request's trailers are not
// sent: no trailer crosses to an HTTP/1.1 upstream (forward/trailers.go).
// It returns the error reading the body or the one writing it.
func (x *h1Exchange) copyBody() (rerr, werr error) {
	body, uc := x.req.Body, x.uc
	chunked := x.req.ContentLength <= 0
	left := x.req.ContentLength
	bp := bodyBufPool.Get().(*[]byte)
	defer bodyBufPool.Put(bp)
	buf := *bp
	data := buf[http1.ChunkHeadroom : http1.ChunkHeadroom+bodyBufSize]
	for {
		p := data
		if !chunked {
			if left == 0 {
				return nil, nil
			}
			if int64(len(p)) > left {
				p = p[:left]
			}
		}
		n, err := body.Read(p)
		eof := errors.Is(err, io.EOF)
		if n > 0 || eof && chunked {
			out := p[:n]
			switch {
			case chunked && n > 0:
				out = http1.FrameChunk(buf, n)
				if eof {
					out = append(out, lastChunk...)
				}
			case chunked:
				out = lastChunk
			}
			if _, err := uc.Write(out); err != nil {
				return nil, err
			}
			left -= int64(n)
		}
		switch {
		case eof && !chunked && left > 0:
			return errBodyShort, nil
		case eof:
			return nil, nil
		case err != nil:
			return err, nil
		}
	}
}

// readResponse reads the final response head, skipping informational
// ones, and makes the response. got reports whether any response byte
// came.
func (x *h1Exchange) readResponse() (resp *http.Response, got bool, err error) {
	uc := x.uc
	r := &uc.resp
	isHead := x.req.Method == http.MethodHead
	var head []byte
	for n1xx := 0; ; n1xx++ {
		head, err = uc.R.ReadHead(http1.DefaultMaxHeadBytes)
		if err != nil {
			got = n1xx > 0 || len(uc.R.Buffered()) > 0
			switch {
			case errors.Is(err, io.EOF):
				err = http1.ErrNoResponse
			case errors.Is(err, http1.ErrHeaderTooLarge):
				err = fmt.Errorf("%w: %w", ErrResponseHeadTooLarge, err)
			}
			return nil, got, err
		}
		if err := http1.ParseResponse(head, r, isHead); err != nil {
			if errors.Is(err, http1.ErrTooManyHeaders) {
				return nil, true, fmt.Errorf("%w: %w", ErrResponseHeadTooLarge, err)
			}
			return nil, true, fmt.Errorf("%w: %w", ErrMalformedResponse, err)
		}
		if r.Status >= 200 {
			break
		}
		if r.Status == 101 {
			return nil, true, errSwitched
		}
		if n1xx == max1xx {
			return nil, true, errTooMany1xx
		}
	}
	if r.Close || r.Framing == http1.FramingClose {
		x.keep = false
	}
	resp = &http.Response{
		Status:        statusText(r.Status, r.Reason),
		StatusCode:    r.Status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    r.Minor,
		Header:        responseHeader(head, r.Headers, r.Framing == http1.FramingChunked),
		ContentLength: -1,
		Close:         !x.keep,
		Request:       x.req,
	}
	if r.Minor == 0 {
		resp.Proto = "HTTP/1.0"
	}
	x.framing = r.Framing
	switch r.Framing {
	case http1.FramingNone, http1.FramingLength:
		if r.Framing == http1.FramingNone || r.ContentLength == 0 {
			// No body: the response part ends with its head. A response to
			// HEAD says how long the body would have been.
			resp.Body = http.NoBody
			resp.ContentLength = 0
			if isHead {
				resp.ContentLength = r.ContentLength // -1 when it doesn't say
			}
			x.end(partDone)
			return resp, true, nil
		}
		resp.ContentLength = r.ContentLength
		x.lr = http1.LengthReader{R: uc.R, Left: r.ContentLength}
	case http1.FramingChunked:
		resp.TransferEncoding = chunkedCoding
		x.cr.Reset(uc.R)
	}
	resp.Body = x
	return resp, true, nil
}

var chunkedCoding = []string{"chunked"}

// Read reads the response body. At its end the exchange's response part
// ends (the connection goes back to the pool if the request part is done
// too). Read and Close are for one goroutine at a time.
func (x *h1Exchange) Read(p []byte) (int, error) {
	if x.rdone {
		return 0, x.rerr
	}
	var n int
	var err error
	switch x.framing {
	case http1.FramingLength:
		n, err = x.lr.Read(p)
		if err == nil && x.lr.Left == 0 {
			err = io.EOF
		}
	case http1.FramingChunked:
		n, err = x.cr.Read(p)
	default: // FramingClose: the body ends with the connection
		n, err = x.uc.R.Read(p)
	}
	if err == nil {
		return n, nil
	}
	x.rdone = true
	if errors.Is(err, io.EOF) {
		x.rerr = io.EOF
		x.end(partDone)
		return n, io.EOF
	}
	if cerr := x.ctx.Err(); cerr != nil {
		err = cerr // the request's cancellation closed the connection
	}
	x.rerr = err
	x.end(partAborted)
	return n, err
}

// Close ends the response body; before its end, the connection is closed.
func (x *h1Exchange) Close() error {
	if !x.rdone {
		x.rdone, x.rerr = true, errBodyClosed
		x.end(partAborted)
	}
	return nil
}

// appendRequestHead writes req's head for an HTTP/1.1 upstream at addr as
// net/http's Request.Write does for the fields a proxy sends (no
// User-Agent is added): the request line, Host (the request's, else
// addr), the header fields (but the framing ones and Connection, which
// it writes itself) and the body's framing: Content-Length when known,
// else chunked. Fields that would break the head are refused, as
// net/http refuses them.
func appendRequestHead(w []byte, req *http.Request, addr string, hasBody bool) ([]byte, error) {
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	if !validMethod(method) {
		return w, fmt.Errorf("invalid method %q", method)
	}
	if method == http.MethodConnect {
		return w, errConnect
	}
	host := req.Host
	if host == "" {
		host = addr
	}
	if !httpguts.ValidHostHeader(host) {
		return w, fmt.Errorf("invalid Host %q", host)
	}
	if !hasBody && req.ContentLength > 0 {
		return w, fmt.Errorf("request has a Content-Length of %d and no body", req.ContentLength)
	}
	w = append(w, method...)
	w = append(w, ' ')
	u := req.URL
	if u.Opaque != "" {
		w = append(w, u.RequestURI()...)
	} else {
		p := u.EscapedPath()
		if p == "" {
			p = "/"
		}
		w = append(w, p...)
		if u.ForceQuery || u.RawQuery != "" {
			w = append(w, '?')
			w = append(w, u.RawQuery...)
		}
	}
	for _, c := range w[len(method)+1:] {
		if c <= ' ' || c == 0x7f {
			return w, fmt.Errorf("invalid request target %q", w[len(method)+1:])
		}
	}
	w = append(w, " HTTP/1.1\r\nHost: "...)
	w = append(w, host...)
	w = append(w, "\r\n"...)
	for k, vv := range req.Header {
		switch k {
		case "Host", "Content-Length", "Transfer-Encoding", "Trailer", "Connection":
			continue
		}
		if !httpguts.ValidHeaderFieldName(k) {
			return w, fmt.Errorf("invalid header field name %q", k)
		}
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				return w, fmt.Errorf("invalid header field value for %q", k)
			}
			w = append(w, k...)
			w = append(w, ": "...)
			w = append(w, v...)
			w = append(w, "\r\n"...)
		}
		if len(w) > maxRequestHead {
			return w, errHeadTooLarge
		}
	}
	switch {
	case hasBody && req.ContentLength > 0:
		w = append(w, "Content-Length: "...)
		w = strconv.AppendInt(w, req.ContentLength, 10)
		w = append(w, "\r\n"...)
	case hasBody:
		w = append(w, "Transfer-Encoding: chunked\r\n"...)
	case method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch:
		// As net/http: these methods say their body is empty.
		w = append(w, "Content-Length: 0\r\n"...)
	}
	if req.Close {
		w = append(w, "Connection: close\r\n"...)
	}
	return append(w, "\r\n"...), nil
}

func validMethod(m string) bool {
	for i := 0; i < len(m); i++ {
		if !httpguts.IsTokenRune(rune(m[i])) {
			return false
		}
	}
	return m != ""
}

// responseHeader makes the http.Header of a parsed response head: one
// string holds the head, and the fields' names and values are substrings
// of it (hs aliases head: a field's offset in head is the difference of
// their capacities, as slicing keeps the end of the array). Hop-by-hop
// fields are left out, and a Content-Length that a chunked coding
// overrides (RFC 9112 §6.3).
func responseHeader(head []byte, hs http1.Headers, chunked bool) http.Header {
	s := string(head)
	n := 0
	for i := range hs {
		if !hs[i].Hop {
			n++
		}
	}
	h := make(http.Header, n)
	vals := make([]string, n)
	sub := func(b []byte) string {
		off := cap(head) - cap(b)
		if off < 0 || off+len(b) > len(s) {
			return string(b)
		}
		return s[off : off+len(b)]
	}
	i := 0
	for _, f := range hs {
		if f.Hop || chunked && http1.EqualFold(f.Name, "Content-Length") {
			continue
		}
		k := sub(f.Name)
		if !canonical(f.Name) {
			k = http.CanonicalHeaderKey(k)
		}
		v := sub(f.Value)
		if vv, ok := h[k]; ok {
			h[k] = append(vv, v)
			continue
		}
		vals[i] = v
		h[k] = vals[i : i+1 : i+1]
		i++
	}
	return h
}

// canonical reports whether a field name is in http.CanonicalHeaderKey's
// form already.
func canonical(name []byte) bool {
	upper := true
	for _, c := range name {
		if upper && 'a' <= c && c <= 'z' || !upper && 'A' <= c && c <= 'Z' {
			return false
		}
		upper = c == '-'
	}
	return true
}

// statusLines are the Status strings of the codes with a standard reason
// phrase, so that a response with one costs no allocation.
var statusLines = func() map[int]string {
	m := map[int]string{}
	for code := 100; code < 600; code++ {
		if t := http.StatusText(code); t != "" {
			m[code] = strconv.Itoa(code) + " " + t
		}
	}
	return m
}()

// statusText is a response's Status: its code and reason phrase.
func statusText(code int, reason []byte) string {
	if s, ok := statusLines[code]; ok && string(reason) == s[4:] {
		return s
	}
	return strconv.Itoa(code) + " " + string(reason)
}

var _ io.ReadCloser = (*h1Exchange)(nil)
