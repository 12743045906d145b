package hcm

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/hcm/http1"
)

// This file is the request path on the strait HTTP/1.1 codec: one goroutine
// per downstream connection reads a request head, routes it, writes it to a
// pooled upstream connection (with the body bytes already buffered, in one
// write), reads the response head and writes it downstream (again with the
// buffered body), then streams whatever body is left. Nothing is allocated
// per request on the common path: heads are parsed into slices reused per
// connection, and buffers come from pools.

// maxDiscardBody is how much of an unread request body a local reply reads
// to keep the connection; past it the connection is closed.
const maxDiscardBody = 256 << 10

// bodyFinishWait is how long a response waits for the request body copier
// before it gives up on keeping the downstream connection.
const bodyFinishWait = 50 * time.Millisecond

// copyBufSize is the body streaming buffer (plus chunk framing room).
const copyBufSize = 32 << 10

var copyBufPool = sync.Pool{New: func() any {
	b := make([]byte, http1.ChunkHeadroom+copyBufSize+2)
	return &b
}}

var wbufPool = sync.Pool{New: func() any { b := make([]byte, 0, 8<<10); return &b }}

// h1conn is one downstream connection. Only its goroutine touches it, except
// the request body copier (see forward), which owns r while it runs.
type h1conn struct {
	s      *Server
	nc     net.Conn
	filter *Filter
	dst    netip.AddrPort
	src    cluster.OriginalSource // original_src; zero when absent
	r      *http1.Reader
	wbuf   []byte
	req    http1.Request
	resp   http1.Response
	chunk  http1.ChunkedReader // response body decoder
	reqCh  http1.ChunkedReader // request body decoder
}

func (s *Server) serveH1(nc net.Conn, f *Filter, dst netip.AddrPort, src cluster.OriginalSource) {
	defer s.untrack(nc)
	defer nc.Close()
	defer func() {
		// A bug must cost one connection, not the proxy (as with net/http).
		if v := recover(); v != nil {
			s.log.Error("panic serving connection", "remote", nc.RemoteAddr().String(), "panic", v, "stack", string(debug.Stack()))
		}
	}()
	nc = http1.WrapConn(nc) // closing it closes the tracked conn
	c := &h1conn{s: s, nc: nc, filter: f, dst: dst, src: src, r: http1.NewReader(nc)}
	defer c.r.Release()
	// The write buffer is taken per request, so that an idle keep-alive
	// connection holds only its read buffer.
	var wb *[]byte
	take := func() {
		wb = wbufPool.Get().(*[]byte)
		c.wbuf = (*wb)[:0]
	}
	release := func() {
		if cap(c.wbuf) <= 64<<10 { // don't keep what a huge head grew
			*wb = c.wbuf[:0]
			wbufPool.Put(wb)
		}
		wb, c.wbuf = nil, nil
	}
	defer func() {
		if wb != nil {
			release()
		}
	}()
	for {
		head, err := c.r.ReadHead(http1.DefaultMaxHeadBytes)
		if err != nil {
			if errors.Is(err, http1.ErrHeaderTooLarge) {
				take()
				c.errorReply(431)
			}
			return
		}
		take()
		if err := http1.ParseRequest(head, &c.req); err != nil {
			code := 400
			if errors.Is(err, http1.ErrTooManyHeaders) {
				code = 431
			}
			c.errorReply(code)
			return
		}
		keep := c.serveRequest()
		release()
		if !keep {
			return
		}
	}
}

// errorReply answers a request the codec could not accept; the connection
// closes after it.
func (c *h1conn) errorReply(code int) {
	w := append(c.wbuf[:0], "HTTP/1.1 "...)
	w = strconv.AppendInt(w, int64(code), 10)
	w = append(w, ' ')
	w = append(w, statusText(code)...)
	w = append(w, "\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"...)
	c.wbuf = w
	c.nc.Write(w)
}

func statusText(code int) string {
	switch code {
	case 400:
		return "Bad Request"
	case 431:
		return "Request Header Fields Too Large"
	}
	return strconv.Itoa(code)
}

// serveRequest handles one parsed request and reports whether the
// connection can carry another.
func (c *h1conn) serveRequest() bool {
	req := &c.req
	table := c.filter.table()
	if table == nil {
		return c.localReply(404, "NR", "")
	}
	rt := table.MatchHeaders(http1.UnsafeString(req.Host), http1.UnsafeString(req.Path), &req.Headers)
	if rt == nil {
		return c.localReply(404, "NR", "")
	}
	if rt.Direct != nil {
		return c.localReply(rt.Direct.Status, "", rt.Direct.Body)
	}
	cl := c.s.clusters.Get(rt.PickCluster())
	if cl == nil {
		return c.localReply(503, "NC", "")
	}
	ep, err := cl.Pick(c.dst)
	if err != nil {
		return c.localReply(503, "UH", bodyNoHealthy)
	}
	ep.Source = c.src
	if c.filter.upgradeAllowed(req) {
		return c.forwardUpgrade(cl, ep) // upgrade.go
	}
	if cl.UpstreamHTTP2(false) {
		return c.forwardH2(cl, ep) // h1toh2.go
	}
	return c.forward(cl, ep)
}

// localReply answers without an upstream. The request body, if any, is
// read and dropped so the connection stays usable, unless it is large or
// the client waits for 100-continue.
func (c *h1conn) localReply(code int, flags, body string) bool {
	keep := !c.req.Close && c.discardRequestBody()
	return c.writeLocal(code, flags, body, keep) && keep
}

func (c *h1conn) writeLocal(code int, flags, body string, keep bool) bool {
	w := append(c.wbuf[:0], "HTTP/1.1 "...)
	w = strconv.AppendInt(w, int64(code), 10)
	w = append(w, ' ')
	w = append(w, reasonPhrase(code)...)
	w = append(w, "\r\n"...)
	if flags != "" {
		w = append(w, "x-strait-response-flags: "...)
		w = append(w, flags...)
		w = append(w, "\r\n"...)
	}
	if body != "" {
		w = append(w, "content-type: text/plain\r\n"...)
	}
	w = append(w, "content-length: "...)
	w = strconv.AppendInt(w, int64(len(body)), 10)
	w = append(w, "\r\n"...)
	if !keep {
		w = append(w, "connection: close\r\n"...)
	} else if c.req.Minor == 0 {
		w = append(w, "connection: keep-alive\r\n"...)
	}
	w = append(w, "\r\n"...)
	if !c.req.IsHead {
		w = append(w, body...)
	}
	c.wbuf = w
	_, err := c.nc.Write(w)
	return err == nil
}

func (c *h1conn) discardRequestBody() bool {
	req := &c.req
	switch req.Framing {
	case http1.FramingNone:
		return true
	case http1.FramingLength:
		if buf := c.r.Buffered(); int64(len(buf)) >= req.ContentLength {
			c.r.Discard(int(req.ContentLength))
			return true
		}
		if req.Expect100 || req.ContentLength > maxDiscardBody {
			return false
		}
		n, err := io.Copy(io.Discard, &http1.LengthReader{R: c.r, Left: req.ContentLength})
		return err == nil && n == req.ContentLength
	case http1.FramingChunked:
		if req.Expect100 && len(c.r.Buffered()) == 0 {
			return false
		}
		c.reqCh.Reset(c.r)
		n, err := io.Copy(io.Discard, io.LimitReader(&c.reqCh, maxDiscardBody))
		return err == nil && n < maxDiscardBody && c.reqCh.Done()
	}
	return false
}

// appendRequestHead writes the upstream request head into w.
func (c *h1conn) appendRequestHead(w []byte, ep cluster.Endpoint) []byte {
	req := &c.req
	w = append(w, req.Method...)
	w = append(w, ' ')
	if req.Authority != nil {
		w = append(w, req.Path...)
		w = append(w, req.Query...)
	} else {
		w = append(w, req.Target...)
	}
	w = append(w, " HTTP/1.1\r\n"...)
	var xfp, rid bool
	for i := range req.Headers {
		h := &req.Headers[i]
		if h.Hop {
			continue
		}
		switch len(h.Name) {
		case 4:
			if req.Authority != nil && http1.EqualFold(h.Name, "Host") {
				continue // replaced by the target's authority below
			}
		case 12:
			if !rid && http1.EqualFold(h.Name, "X-Request-Id") {
				rid = true
			}
		case 14:
			if http1.EqualFold(h.Name, "Content-Length") {
				continue // framing is written below
			}
		case 17:
			if !xfp && http1.EqualFold(h.Name, "X-Forwarded-Proto") {
				xfp = true
			}
		}
		w = http1.AppendHeader(w, h.Name, h.Value)
	}
	if req.Authority != nil {
		w = http1.AppendHeader(w, hostName, req.Authority)
	} else if !req.HasHost {
		w = append(w, "host: "...)
		w = append(w, ep.Address...)
		w = append(w, "\r\n"...)
	}
	if !xfp {
		w = append(w, "x-forwarded-proto: http\r\n"...)
	}
	if !rid {
		w = append(w, "x-request-id: "...)
		w = appendRequestID(w)
		w = append(w, "\r\n"...)
	}
	switch req.Framing {
	case http1.FramingLength:
		w = append(w, "content-length: "...)
		w = http1.AppendInt(w, req.ContentLength)
		w = append(w, "\r\n"...)
	case http1.FramingChunked:
		w = append(w, "transfer-encoding: chunked\r\n"...)
	default:
		if req.ContentLength == 0 {
			w = append(w, "content-length: 0\r\n"...)
		}
	}
	return append(w, "\r\n"...)
}

var hostName = []byte("host")

// appendRequestID appends a random (version 4) UUID.
func appendRequestID(w []byte) []byte {
	const hex = "0123456789abcdef"
	a, b := rand.Uint64(), rand.Uint64()
	a = a&^(0xf<<12) | 0x4<<12 // version 4
	b = b&^(0x3<<62) | 0x2<<62 // variant 10
	var u [16]byte
	for i := 0; i < 8; i++ {
		u[i] = byte(a >> (56 - 8*i))
		u[8+i] = byte(b >> (56 - 8*i))
	}
	for i, x := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			w = append(w, '-')
		}
		w = append(w, hex[x>>4], hex[x&0xf])
	}
	return w
}

// bodyCopy is the result of streaming a request body upstream.
type bodyCopy struct {
	done chan error
}

// forward sends the request to ep on cl and relays the response. It
// reports whether the downstream connection can carry another request.
func (c *h1conn) forward(cl *cluster.Cluster, ep cluster.Endpoint) bool {
	req := &c.req
	isHead, reqClose, reqMinor, expect100 := req.IsHead, req.Close, req.Minor, req.Expect100
	cl.Stats.RqTotal.Add(1)

	w := c.appendRequestHead(c.wbuf[:0], ep)
	// A body already in the buffer goes in the same write as the head, and
	// stays replayable; anything else is streamed by a second goroutine.
	streamBody := false
	switch req.Framing {
	case http1.FramingLength:
		if buf := c.r.Buffered(); int64(len(buf)) >= req.ContentLength {
			w = append(w, buf[:req.ContentLength]...)
			c.r.Discard(int(req.ContentLength))
		} else {
			streamBody = true
		}
	case http1.FramingChunked:
		streamBody = true
	}
	c.wbuf = w

	ctx := context.Background()
	uc, err := cl.GetConn(ctx, ep)
	if err != nil {
		return c.upstreamFailed(cl, ep, err, !streamBody)
	}
	var bc *bodyCopy
	for attempt := 0; ; attempt++ {
		_, err = uc.Write(w)
		if err == nil && streamBody {
			bc = c.startBodyCopy(uc)
		}
		if err == nil {
			err = c.readResponseHead(uc, isHead, expect100, reqMinor)
		}
		if err == nil {
			break
		}
		uc.Close()
		if bc != nil {
			// The copier may be blocked reading downstream: answer, then
			// close the connection, which can't be reused anyway.
			c.s.log.Debug("upstream request failed", "cluster", cl.Name, "endpoint", ep.Address, "err", err)
			cl.Stats.AddResponse(503)
			c.writeLocal(503, "UF", bodyConnectFailed, false)
			c.nc.Close()
			<-bc.done
			return false
		}
		if !uc.Reused || attempt > 0 || streamBody || !retryable(err) {
			return c.upstreamFailed(cl, ep, err, !streamBody)
		}
		// An idle connection the upstream had closed: once more on a new one.
		if uc, err = cl.DialConn(ctx, ep); err != nil {
			return c.upstreamFailed(cl, ep, err, true)
		}
	}

	resp := &c.resp
	cl.Stats.AddResponse(resp.Status)
	bodyDone := bc == nil
	if bc != nil {
		// The upstream usually answers after reading the whole body, so the
		// copier is done or about to be; if it isn't soon, the upstream
		// answered early and the rest of the body won't be read.
		t := time.NewTimer(bodyFinishWait)
		select {
		case err := <-bc.done:
			bodyDone, bc = err == nil, nil
		case <-t.C:
		}
		t.Stop()
	}
	keep := !reqClose && bodyDone
	// An upstream connection is reusable only if both messages were
	// complete: a request body cut short leaves the upstream waiting for
	// the rest.
	upKeep := bodyDone && !resp.Close && resp.Framing != http1.FramingClose
	// Chunked and close-delimited bodies go downstream chunked, or
	// close-delimited to an HTTP/1.0 client.
	unsized := resp.Framing == http1.FramingChunked || resp.Framing == http1.FramingClose
	downChunked := unsized && reqMinor == 1
	if unsized && reqMinor == 0 {
		keep = false
	}

	// Response head, then as much body as is buffered, in one write.
	w = c.appendResponseHead(c.wbuf[:0], reqMinor, keep)
	complete := false
	switch resp.Framing {
	case http1.FramingNone:
		complete = true
	case http1.FramingLength:
		if buf := uc.R.Buffered(); int64(len(buf)) >= resp.ContentLength {
			w = append(w, buf[:resp.ContentLength]...)
			uc.R.Discard(int(resp.ContentLength))
			complete = true
		}
	}
	c.wbuf = w
	_, err = c.nc.Write(w)
	if err == nil && !complete {
		err = c.copyResponseBody(uc, downChunked)
	}
	if bc != nil {
		// The response is complete but the request body isn't: the client
		// or the upstream stopped early. Neither connection can be reused.
		c.nc.Close()
		uc.Close()
		<-bc.done
		return false
	}
	if err != nil {
		// Mid-body failure: abort so the client sees a truncated response.
		uc.Close()
		return false
	}
	if upKeep {
		cl.PutConn(uc)
	} else {
		uc.Close()
	}
	return keep
}

// retryable reports whether a failure on a reused connection looks like the
// upstream having closed it while idle (EOF, reset, broken pipe).
func retryable(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, errNoResponse) || isNetError(err)
}

var errNoResponse = errors.New("upstream closed before a response")

func isNetError(err error) bool {
	var ne *net.OpError
	return errors.As(err, &ne) && !ne.Timeout()
}

// upstreamFailed answers 503 for a request that got no response.
func (c *h1conn) upstreamFailed(cl *cluster.Cluster, ep cluster.Endpoint, err error, bodyConsumed bool) bool {
	c.s.log.Debug("upstream request failed", "cluster", cl.Name, "endpoint", ep.Address, "err", err)
	cl.Stats.AddResponse(503)
	keep := bodyConsumed && !c.req.Close
	if !bodyConsumed {
		keep = !c.req.Close && c.discardRequestBody()
	}
	return c.writeLocal(503, "UF", bodyConnectFailed, keep) && keep
}

// readResponseHead reads the final response head into c.resp, relaying
// interim (1xx) responses downstream.
func (c *h1conn) readResponseHead(uc *cluster.UpstreamConn, isHead, expect100 bool, reqMinor int) error {
	for {
		head, err := uc.R.ReadHead(http1.DefaultMaxHeadBytes)
		if err != nil {
			if err == io.EOF {
				return errNoResponse
			}
			return err
		}
		if err := http1.ParseResponse(head, &c.resp, isHead); err != nil {
			return err
		}
		if c.resp.Status >= 200 {
			return nil
		}
		if c.resp.Status == 101 {
			return errors.New("upstream switched protocols without an upgrade request")
		}
		if c.resp.Status == 100 && !expect100 || reqMinor == 0 {
			continue // not expected by the client: drop it
		}
		w := c.appendResponseHead(c.wbuf[:0], 1, true)
		c.wbuf = w
		if _, err := c.nc.Write(w); err != nil {
			return err
		}
	}
}

// appendResponseHead writes the downstream response head for c.resp.
func (c *h1conn) appendResponseHead(w []byte, reqMinor int, keep bool) []byte {
	resp := &c.resp
	w = append(w, "HTTP/1.1 "...)
	w = http1.AppendInt(w, int64(resp.Status))
	w = append(w, ' ')
	w = append(w, resp.Reason...)
	w = append(w, "\r\n"...)
	for i := range resp.Headers {
		h := &resp.Headers[i]
		if h.Hop {
			continue
		}
		if len(h.Name) == 14 && http1.EqualFold(h.Name, "Content-Length") {
			continue
		}
		w = http1.AppendHeader(w, h.Name, h.Value)
	}
	if resp.Status < 200 {
		return append(w, "\r\n"...)
	}
	switch resp.Framing {
	case http1.FramingLength:
		w = append(w, "content-length: "...)
		w = http1.AppendInt(w, resp.ContentLength)
		w = append(w, "\r\n"...)
	case http1.FramingChunked, http1.FramingClose:
		if reqMinor == 1 {
			w = append(w, "transfer-encoding: chunked\r\n"...)
		} else {
			keep = false
		}
	case http1.FramingNone:
		if resp.ContentLength >= 0 && (!http1.NoBody(resp.Status) || resp.Status == 304) {
			// HEAD (or 304): the length the body would have had.
			w = append(w, "content-length: "...)
			w = http1.AppendInt(w, resp.ContentLength)
			w = append(w, "\r\n"...)
		}
	}
	if !keep {
		w = append(w, "connection: close\r\n"...)
	} else if reqMinor == 0 {
		w = append(w, "connection: keep-alive\r\n"...)
	}
	return append(w, "\r\n"...)
}

// copyResponseBody streams the rest of the response body downstream,
// re-chunking it when downChunked.
func (c *h1conn) copyResponseBody(uc *cluster.UpstreamConn, downChunked bool) error {
	resp := &c.resp
	var src io.Reader
	var lr http1.LengthReader
	switch resp.Framing {
	case http1.FramingLength:
		lr = http1.LengthReader{R: uc.R, Left: resp.ContentLength}
		src = &lr
	case http1.FramingChunked:
		c.chunk.Reset(uc.R)
		src = &c.chunk
	default:
		src = uc.R
	}
	err := copyBody(c.nc, src, downChunked, func() []byte {
		if resp.Framing == http1.FramingChunked {
			return c.chunk.Trailer
		}
		return nil
	})
	return err
}

// copyBody copies src to dst, framing each read as a chunk when chunked
// (and ending with the last chunk and trailer()). Bodies don't go through
// any other buffer: each read lands where it is written from.
func copyBody(dst io.Writer, src io.Reader, chunked bool, trailer func() []byte) error {
	bp := copyBufPool.Get().(*[]byte)
	defer copyBufPool.Put(bp)
	buf := *bp
	data := buf[http1.ChunkHeadroom : http1.ChunkHeadroom+copyBufSize]
	for {
		n, err := src.Read(data)
		if n > 0 {
			out := data[:n]
			if chunked {
				out = http1.FrameChunk(buf, n)
			}
			if _, werr := dst.Write(out); werr != nil {
				return werr
			}
		}
		if err == io.EOF {
			if chunked {
				_, werr := dst.Write(http1.AppendLastChunk(buf[:0], trailer()))
				return werr
			}
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// startBodyCopy streams the rest of the request body upstream on its own
// goroutine, so that the response (and 100 Continue) can be read meanwhile.
// Until done is signalled the copier owns c.r.
func (c *h1conn) startBodyCopy(uc *cluster.UpstreamConn) *bodyCopy {
	bc := &bodyCopy{done: make(chan error, 1)}
	req := &c.req
	var src io.Reader
	chunked := req.Framing == http1.FramingChunked
	if chunked {
		c.reqCh.Reset(c.r)
		src = &c.reqCh
	} else {
		src = &http1.LengthReader{R: c.r, Left: req.ContentLength}
	}
	go func() {
		bc.done <- copyBody(uc, src, chunked, func() []byte { return c.reqCh.Trailer })
	}()
	return bc
}

// reasonPhrase is the reason for local replies.
func reasonPhrase(code int) string {
	switch code {
	case 200:
		return "OK"
	case 404:
		return "Not Found"
	case 503:
		return "Service Unavailable"
	}
	if t := http.StatusText(code); t != "" {
		return t
	}
	return "Status"
}
