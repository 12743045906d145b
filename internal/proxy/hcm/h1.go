package hcm

import (
	"errors"
	"net"
	"net/netip"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/straitmesh/strait/internal/proxy/accesslog"
	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/forward"
	"github.com/straitmesh/strait/internal/proxy/forward/h1"
	"github.com/straitmesh/strait/internal/proxy/fwdheaders"
	"github.com/straitmesh/strait/internal/proxy/http1"
	"github.com/straitmesh/strait/internal/proxy/httpfilter"
	"github.com/straitmesh/strait/internal/proxy/pathnorm"
	"github.com/straitmesh/strait/internal/proxy/rbac"
	"github.com/straitmesh/strait/internal/proxy/route"
	"github.com/straitmesh/strait/internal/proxy/router"
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

var wbufPool = sync.Pool{New: func() any { b := make([]byte, 0, 8<<10); return &b }}

// maxLingerBytes bounds what a connection closed after an error reply
// drains before closing.
const maxLingerBytes = 256 << 10

// h1conn is one downstream connection. Only its goroutine touches it, except
// the request body copier of its exchange (package forward/h1), which owns
// r while it runs.
type h1conn struct {
	s      *Server
	nc     *http1.DeadlineConn // the downstream connection, with timeouts
	filter *Filter
	lim    *Limits
	dst    netip.AddrPort
	src    cluster.OriginalSource // original_src; zero when absent
	secure bool                   // the listener terminated TLS (scheme.go)
	xfcc   fwdheaders.XFCCConn    // the connection's client certificate
	r      *http1.Reader
	wbuf   []byte
	req    http1.Request

	// x is the request's upstream exchange: its response, and the route's
	// mutations of both messages (h1router.go); the connection is its
	// Downstream (h1response.go).
	x h1.Exchange

	// k is what the connection keeps while parked, and its limits and
	// drain state (h1park.go); one for the connection's whole life, while
	// a new h1conn serves it after each park.
	k      *h1keep
	limits *connLimits // k's: max_requests_per_connection, max_connection_duration (stream.go)
	idle   *atomic.Int32
	clock  streamClock // the timeouts of the request in progress (stream.go)
	linger bool        // an error reply was sent: close gracefully
	body   uint8       // what became of the request body (body.go)

	drain *Drain // nil: the connection never drains

	// stream is the request in progress as the HTTP filters see it
	// (h1stream.go, chain.go), reset for every request.
	stream h1stream
	// meta is the request in progress's dynamic metadata, reset for every
	// request: what a filter learns (the JWT filter's claims) for a later
	// one (RBAC) to read.
	meta httpfilter.Metadata
	// authz and fconn describe the connection for the RBAC filters and
	// the others; computed at the first request that asks.
	authz *rbac.Connection
	fconn *httpfilter.Connection
	// client is the request in progress's client address (fwdheaders.XFF).
	client fwdheaders.ClientAddress

	// The access log record of the request in progress (accesslog.go),
	// the response body bytes streamed (counted only when logging) and
	// the peer's address.
	rec       accesslog.Record
	respBytes atomic.Int64
	remote    netip.AddrPort
	logConn   *accesslog.Conn // the connection as the log sees it, computed at the first log

	tracked net.Conn // the connection as the Server tracks it
	wb      *[]byte  // pooled write buffer (wbuf) while a request is served
}

func (s *Server) serveH1(nc net.Conn, f *Filter, dst netip.AddrPort, src cluster.OriginalSource, d *Drain) {
	k := &h1keep{s: s, filter: f, dst: dst, src: src, drain: d, secure: isTLS(nc), xfcc: f.xfcc.Conn(nc)}
	k.limits.init(f.limits())
	f.cxBegin() // cxEnd in k.end
	// The connection (k.nc) first, the drain's watch after: a drain that
	// ended meanwhile runs cut at once, and cut closes k.nc; watched
	// before it was set, a new connection outlived the drain's end.
	c := s.newH1conn(k, nc)
	d.watch(k)
	c.run(false)
}

// newH1conn makes the state that serves connection k on nc: at its start,
// and each time it resumes from parking.
func (s *Server) newH1conn(k *h1keep, nc net.Conn) *h1conn {
	dc := http1.NewDeadlineConn(http1.WrapConn(nc)) // closing it closes the tracked conn
	// The wait for a request (parkAfter) and the request (stream idle)
	// alternate their read deadlines on every request: keep the earlier.
	dc.SetReadLazy(true)
	f := k.filter
	c := &h1conn{s: s, k: k, limits: &k.limits, idle: &k.idle, tracked: nc, nc: dc, filter: f, lim: f.limits(),
		dst: k.dst, src: k.src, secure: k.secure, xfcc: k.xfcc, r: http1.NewReader(dc), drain: k.drain}
	c.x = h1.Exchange{
		D: c, NC: dc, R: c.r, Req: &c.req, Wbuf: &c.wbuf, Rec: &c.rec, Log: s.log,
		Dst: k.dst, Src: k.src, Secure: c.secure, Trailers: &f.trailers, OverwriteXFP: f.xfp.Overwrites(),
	}
	k.nc.Store(dc)
	return c
}

// run serves the connection on the calling goroutine until it closes or
// parks (waitRequest); resumed says it was parked and is now readable.
func (c *h1conn) run(resumed bool) {
	parked := false
	defer func() {
		// A bug must cost one connection, not the proxy (as with net/http).
		if v := recover(); v != nil {
			parked = false
			c.s.log.Error("panic serving connection", "remote", c.tracked.RemoteAddr().String(), "panic", v, "stack", string(debug.Stack()))
		}
		if !parked {
			c.finish()
		}
	}()
	if resumed && !c.unpark() {
		return
	}
	parked = c.serve()
}

// finish releases what the connection holds and closes it.
func (c *h1conn) finish() {
	if c.wb != nil {
		c.releaseWbuf()
	}
	if c.linger {
		c.closeGracefully()
	}
	c.r.Release()
	c.nc.Close()
	c.s.untrack(c.tracked)
	c.k.end()
}

// takeWbuf takes the write buffer for a request. It is taken per request,
// so that an idle keep-alive connection holds none.
func (c *h1conn) takeWbuf() {
	c.wb = wbufPool.Get().(*[]byte)
	c.wbuf = (*c.wb)[:0]
}

func (c *h1conn) releaseWbuf() {
	if cap(c.wbuf) <= 64<<10 { // don't keep what a huge head grew
		*c.wb = c.wbuf[:0]
		wbufPool.Put(c.wb)
	}
	c.wb, c.wbuf = nil, nil
}

// serve serves requests until the connection should close (false) or was
// parked (true; the parker owns it from then on).
func (c *h1conn) serve() (parked bool) {
	for {
		if len(c.r.Buffered()) == 0 {
			switch c.waitRequest() {
			case waitClose:
				return false
			case waitParked:
				return true
			}
		}
		// A request began: stream_idle_timeout, request_headers_timeout and
		// request_timeout from now.
		logging := c.logging()
		if logging {
			c.beginLog(time.Now())
		}
		c.clock = c.lim.startStream()
		c.nc.SetReadTimeouts(c.clock.idle, c.clock.headDeadline())
		c.nc.SetWriteTimeouts(c.clock.idle, time.Time{})
		head, err := c.r.ReadRequestHead(c.lim.MaxRequestHeadBytes)
		if err != nil {
			switch {
			case errors.Is(err, http1.ErrHeaderTooLarge):
				c.takeWbuf()
				c.errorReply(431, "")
			case errors.Is(err, http1.ErrMalformed):
				c.takeWbuf()
				c.errorReply(400, "")
			case http1.IsTimeout(err):
				c.takeWbuf()
				f := c.clock.expired(time.Now(), true)
				c.errorReply(f.Code, f.Body)
				c.rec.Flags = f.Flags
			}
			if c.rec.Code != 0 {
				c.countErrorReply()
				if logging {
					c.endLog()
				}
			}
			return false
		}
		c.takeWbuf()
		err = http1.ParseRequestLimit(head, &c.req, c.lim.MaxHeadersCount)
		if err == nil && c.req.Minor == 0 && !c.filter.acceptHTTP10 {
			err = errHTTP10
		}
		if err != nil {
			code, body := 400, ""
			switch {
			case errors.Is(err, http1.ErrTooManyHeaders):
				code = 431
			case errors.Is(err, errHTTP10):
				code, body = 426, "Upgrade Required"
			}
			c.errorReply(code, body)
			c.countErrorReply()
			if logging {
				c.endLog()
			}
			return false
		}
		c.limits.beginRequest()
		h := c.filter.hstats
		if h != nil {
			rqBegin(h, 1)
			c.rec.Code = 0 // set by the reply; beginLog cleared it when logging
		}
		// The body (if any) is read under request_timeout only.
		c.nc.SetReadTimeouts(c.clock.idle, c.clock.request)
		keep := c.serveRequest()
		if h != nil {
			rqEnd(h, c.rec.Code)
		}
		if logging {
			c.endLog()
		}
		c.releaseWbuf()
		c.r.Shrink()
		if !keep {
			return false
		}
	}
}

// countErrorReply counts a request answered with an error before it was
// parsed (400, 408, 431): received and completed at once, as Envoy counts
// a request its codec rejected.
func (c *h1conn) countErrorReply() {
	if h := c.filter.hstats; h != nil {
		rqBegin(h, 1)
		rqEnd(h, c.rec.Code)
	}
}

// An idle HTTP/1.1 keep-alive connection is parked (http1.Parker): after
// parkAfter without a new request its goroutine ends and its read buffer
// goes back to the pool, and the connection waits in the Server's parker
// until it becomes readable (Resume), its idle_timeout or
// max_connection_duration passes (Finish), its listener drains (drainIdle)
// or the Server closes. A readable connection gets a new goroutine and a
// pooled buffer and reads its request as before.

// parkAfter is how long a connection waits for its next request on its own
// goroutine before parking: a client that sends requests back to back never
// parks, so the request path pays nothing for parking.
const parkAfter = 100 * time.Millisecond

// What waitRequest found.
const (
	waitRequest = iota // a request began
	waitClose          // close the connection
	waitParked         // the connection was parked
)

// waitRequest waits for the first bytes of the next request, under the
// connection's idle_timeout and max_connection_duration, parking the
// connection after parkAfter. waitClose means the connection should close
// (quietly: no request is in progress).
// The socket deadline is the stream idle timeout's when that is shorter,
// so that it need not be moved between this wait and the request.
func (c *h1conn) waitRequest() int {
	idle := c.lim.IdleTimeout
	wait := idle
	if s := c.lim.StreamIdleTimeout; s > 0 && (wait == 0 || s < wait) {
		wait = s
	}
	if c.drain != nil && c.limits.served() {
		// Idle from here: a drain starting now closes the connection
		// (drainIdle). Set before looking, so that one of the two sees
		// the other. A new connection gets its first request served.
		c.idle.Store(connIdle)
		if c.drain.Started() {
			return waitClose
		}
	}
	since := http1.CoarseNow()
	if idle > 0 && idle < 2*time.Second {
		since = time.Now()
	}
	c.k.idleSince = since
	// Wait parkAfter on this goroutine first (unless a deadline comes
	// sooner), then park. A connection that never carried a request is not
	// parked: its first bytes are normally on the way.
	parkAt := time.Time{}
	if c.limits.served() && c.detachable() {
		parkAt = http1.CoarseNow().Add(parkAfter)
		if dl := c.k.parkDeadline(since); !dl.IsZero() && !dl.After(parkAt) {
			parkAt = time.Time{}
		}
	}
	hard := c.limits.expiry
	if !parkAt.IsZero() {
		hard = parkAt
		c.nc.SetReadTimeouts(0, hard)
	} else {
		c.nc.SetReadTimeouts(wait, hard)
	}
	for {
		err := c.r.Fill()
		if err == nil {
			// A request began, unless the drain closed the connection
			// first.
			if c.drain == nil || !c.limits.served() || c.idle.CompareAndSwap(connIdle, connBusy) {
				return waitRequest
			}
			return waitClose
		}
		if !http1.IsTimeout(err) {
			return waitClose
		}
		now := time.Now()
		if idle > 0 && now.Sub(since) >= idle || c.limits.expiredAt(now) {
			return waitClose
		}
		if !parkAt.IsZero() && !now.Before(parkAt) {
			if c.r.ParkBuffer() {
				// The parsed heads alias the buffer just given back;
				// their header slices are regrown on the next request.
				c.req, c.x.Resp = http1.Request{}, http1.Response{}
				c.nc.SetReadTimeouts(0, time.Time{})
				if c.park(since) {
					return waitParked
				}
				c.r.UnparkBuffer()
			}
			parkAt = time.Time{}
			c.nc.SetReadTimeouts(wait, c.limits.expiry)
		}
	}
}

// closing reports whether the connection must close after the request in
// progress: max_connection_duration passed, max_requests_per_connection
// reached, or its listener is draining.
func (c *h1conn) closing() bool {
	return c.drain.Started() || c.limits.spent(http1.CoarseNow()) // stream.go
}

// closeGracefully ends a connection after an error reply so that the client
// reads the reply rather than a reset: shut down the write side, then read
// and drop what the client still sends, for at most delayed_close_timeout.
func (c *h1conn) closeGracefully() {
	// A failed shutdown leaves the drain below to end on the read error.
	_ = c.nc.CloseWrite()
	d := c.lim.DelayedCloseTimeout
	if d <= 0 {
		return
	}
	c.nc.SetReadTimeouts(0, time.Now().Add(d))
	bp := h1.GetCopyBuf()
	defer h1.PutCopyBuf(bp)
	for n := 0; n < maxLingerBytes; {
		m, err := c.nc.Read(*bp)
		n += m
		if err != nil {
			return
		}
	}
}

// serveRequest handles one parsed request and reports whether the
// connection can carry another.
func (c *h1conn) serveRequest() bool {
	req := &c.req
	c.x.Reset()
	c.body = bodyUnread
	c.meta.Reset()
	c.stream.begin(c)
	req.Headers, c.client = c.filter.xff.ApplyH1(req.Headers, c.remoteAddr(), c.s.local)
	req.Headers = c.filter.xfcc.ApplyH1(req.Headers, c.xfcc)
	if pathnorm.HasFragment(http1.UnsafeString(req.Target)) {
		return c.localReply(400, "", "")
	}
	if c.filter.pathNorm.Active() {
		if done, keep := c.normalizePath(); done {
			return keep
		}
	}
	query := req.Query
	if len(query) > 0 {
		query = query[1:] // its '?'
	}
	st := &c.stream
	st.rreq = route.Request{
		Host: http1.UnsafeString(req.Host), Path: http1.UnsafeString(req.Path),
		Query:  http1.UnsafeString(query),
		Method: http1.UnsafeString(req.Method), Scheme: c.scheme(), Headers: &req.Headers, // scheme.go
	}
	if st.decode(st) { // chain.go
		return st.replied && st.keep
	}
	if req.Framing != http1.FramingNone && c.filter.decodesBodies() && !c.filter.upgradeAllowed(req) {
		if done, keep := c.decodeBody(); done { // body.go
			return keep
		}
	}
	rt := st.route()
	if rt == nil {
		return c.localReply(404, "NR", "")
	}
	c.rec.RouteName = rt.Name
	if rt.Filters != nil && len(rt.Filters.Mirrors) > 0 {
		buffered := c.r.Buffered()
		if c.x.Body != nil {
			buffered = c.x.Body
		}
		c.s.shadow.MirrorH1(rt.Filters.Mirrors, req, buffered, c.forwardedProto(), st.rreq.Scheme)
	}
	if rt.Redirect != nil {
		return c.redirectReply(rt)
	}
	if rt.Direct != nil {
		return c.directReply(rt)
	}
	tgt := rt.Pick()
	cl := c.s.clusters.Get(tgt.Name)
	if cl == nil {
		return c.localReply(503, "NC", "")
	}
	c.rec.UpstreamCluster, c.rec.UpstreamStatName = tgt.Name, cl.Stats.Name
	if cl.HasIstioService {
		c.rec.UpstreamService = &cl.IstioService
	}
	hash, hasHash, setCookie := forward.RequestHash(rt, &req.Headers, http1.UnsafeString(req.Query), c.nc, c.client.Remote)
	ep, err := cl.PickRequest(c.dst, hash, hasHash)
	if err != nil {
		f := forward.PickFailure(err)
		return c.localReply(f.Code, f.Flags, f.Body)
	}
	defer cl.Finish(ep)
	c.rec.UpstreamHost = ep.Address
	c.x.SetCookie = setCookie
	ep.Source = c.src
	ep.Downstream = forward.Downstream(cl, c.nc.RemoteAddr(), c.dst)
	ov, hasOv := c.routerOverrides(rt.IncludeAttemptCount)
	if c.filter.upgradeAllowed(req) {
		if rt.HasRequestMutation() {
			c.mutateRequest(rt, tgt)
		}
		c.clock.routed(rt) // stream.go
		c.beginExchange()
		return c.x.ForwardUpgrade(cl, ep, rt)
	}
	if cl.UpstreamHTTP2(false) {
		c.beginExchange()
		return c.x.ForwardH2(cl, ep, rt, tgt, &ov)
	}
	if rt.HasRequestMutation() {
		c.mutateRequest(rt, tgt)
	}
	var ovp *router.Overrides
	if hasOv {
		ovp = &ov
	}
	if c.clock.routed(rt) { // stream.go
		c.nc.SetReadTimeouts(c.clock.idle, c.clock.request)
		c.nc.SetWriteTimeouts(c.clock.idle, time.Time{})
	}
	c.beginExchange()
	return c.x.Forward(cl, ep, rt, tgt, ovp)
}

// normalizePath applies the HCM's path normalization (package pathnorm) to the
// request before anything reads its path: a changed path replaces
// req.Path, and req.Target unless the target is absolute-form (then
// Path and Query are what is forwarded). It reports whether the request
// was answered (400, or 307 for UNESCAPE_AND_REDIRECT), and then whether
// the connection can carry another.
func (c *h1conn) normalizePath() (done, keep bool) {
	req := &c.req
	if len(req.Path) == 0 {
		return false, false
	}
	p, v := c.filter.pathNorm.Apply(req.Path)
	switch v {
	case pathnorm.Reject:
		return true, c.localReply(400, "", "")
	case pathnorm.Redirect:
		loc := append(append([]byte(nil), p...), req.Query...)
		c.x.RespExtra = append(c.x.RespExtra[:0], http1.Header{Name: []byte("location"), Value: loc})
		return true, c.localReply(307, "", "")
	}
	if &p[0] == &req.Path[0] && len(p) == len(req.Path) {
		return false, false // unchanged: no copy
	}
	t := append(p, req.Query...) // p is the normalizer's own slice
	req.Path, req.Query = t[:len(p)], t[len(p):]
	if req.Authority == nil {
		req.Target = t
	}
	return false, false
}
