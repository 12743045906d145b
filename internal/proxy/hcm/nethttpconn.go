package hcm

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/straitmesh/strait/internal/proxy/cluster"
)

// This file is the connection handling of the net/http codec
// (CodecNetHTTP), which the strait codec does in h1conn: the HCM's
// timeouts and limits, and drain.
//
// net/http applies its timeouts per http.Server, so there is one Server
// per set of them (nhKey), started with the first connection that needs
// it: request_headers_timeout is ReadHeaderTimeout, request_timeout
// ReadTimeout (the whole request, as in Envoy), idle_timeout IdleTimeout,
// max_request_headers_kb MaxHeaderBytes. Per connection (nhConn), through
// the handler and ConnState: max_connection_duration, a drain and
// max_requests_per_connection answer the request in progress with
// "connection: close" and close a connection that waits for its next
// request; max_headers_count and max_request_headers_kb (as Envoy counts
// them, headlimits.go) answer 431; stream_idle_timeout (or the route's
// idle_timeout) is h2timeouts.go's streamGuard.

// nhKey is what one net/http Server is configured with.
type nhKey struct {
	headers, request, idle time.Duration
	maxHead                int
}

// nhServer is one net/http Server and the listener that feeds it.
type nhServer struct {
	srv  *http.Server
	ln   *chanListener
	done chan struct{} // closed when Serve returned
}

// nhConn is what the net/http codec tracks of a connection.
type nhConn struct {
	closing  atomic.Bool   // the next response says connection: close
	idle     atomic.Bool   // between requests (ConnState)
	requests atomic.Uint32 // requests begun
	stops    []func() bool // drain registration and duration timer; ConnState closed runs them
}

// nethttpServer returns the Server for limits, starting it if needed. It
// returns nil once the Server closed.
func (s *Server) nethttpServer(lim *Limits) *nhServer {
	idle := lim.IdleTimeout
	if idle == 0 && lim.RequestTimeout > 0 {
		idle = 100 * 365 * 24 * time.Hour // net/http would use ReadTimeout; Envoy: no idle timeout
	}
	k := nhKey{headers: lim.RequestHeadersTimeout, request: lim.RequestTimeout, idle: idle, maxHead: lim.MaxRequestHeadBytes}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	if n := s.nh[k]; n != nil {
		return n
	}
	n := &nhServer{ln: newChanListener(), done: make(chan struct{})}
	n.srv = &http.Server{
		Handler:           http.HandlerFunc(s.serveNetHTTP),
		ReadHeaderTimeout: k.headers,
		ReadTimeout:       k.request,
		IdleTimeout:       k.idle,
		MaxHeaderBytes:    k.maxHead,
		TLSNextProto:      map[string]func(*http.Server, *tls.Conn, http.Handler){},
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c.(*conn))
		},
		ConnState: nhConnState,
	}
	if s.nh == nil {
		s.nh = map[nhKey]*nhServer{}
	}
	s.nh[k] = n
	go func() {
		defer close(n.done)
		_ = n.srv.Serve(n.ln)
	}()
	return n
}

// serveConnNetHTTP hands c to the net/http codec.
func (s *Server) serveConnNetHTTP(c net.Conn, f *Filter, dst netip.AddrPort, src cluster.OriginalSource, d *Drain) {
	lim := &f.Limits
	if lim.MaxRequestHeadBytes == 0 {
		l := DefaultLimits() // a Filter made without Build (tests)
		lim = &l
	}
	n := s.nethttpServer(lim)
	if n == nil {
		c.Close()
		return
	}
	cn := &conn{Conn: c, filter: f, dst: dst, src: src, local: s.local, secure: isTLS(c), xfcc: xfccConnOf(f.xfcc, c), lim: lim, nh: &nhConn{}, authz: rbacConnection(f, c, dst), fconn: filterConnection(f, c, dst), logConn: logConnOf(f, c)}
	f.cxBegin() // cxEnd in stop
	end := func() { cn.endGracefully() }
	if d != nil {
		// Once the drain time has passed, the connection closes whatever
		// it is doing (h1.go's cut).
		cn.nh.stops = append(cn.nh.stops, d.onStart(end), d.onEnd(func() { c.Close() }))
	}
	if m := lim.MaxConnectionDuration; m > 0 {
		cn.nh.stops = append(cn.nh.stops, time.AfterFunc(m, end).Stop)
	}
	if !n.ln.push(cn) {
		cn.stop()
		c.Close()
	}
}

// endGracefully makes the connection close after its response in
// progress, or now if it waits for a request.
func (c *conn) endGracefully() {
	c.nh.closing.Store(true)
	if c.nh.idle.Load() {
		c.Close()
	}
}

func (c *conn) stop() {
	for _, f := range c.nh.stops {
		f()
	}
	c.filter.cxEnd()
}

// nhConnState follows a net/http codec connection between requests.
func nhConnState(nc net.Conn, st http.ConnState) {
	c, ok := nc.(*conn)
	if !ok || c.nh == nil {
		return
	}
	switch st {
	case http.StateActive:
		c.nh.idle.Store(false)
	case http.StateIdle:
		c.nh.idle.Store(true)
		if c.nh.closing.Load() {
			c.Close()
		}
	case http.StateClosed, http.StateHijacked:
		c.stop()
	}
}

// serveNetHTTP is the net/http codec's handler: the per-connection limits
// around serveHTTP.
func (s *Server) serveNetHTTP(w http.ResponseWriter, r *http.Request) {
	c, ok := r.Context().Value(connKey{}).(*conn)
	if !ok || c.nh == nil {
		s.serveHTTP(w, r)
		return
	}
	n := c.nh.requests.Add(1)
	if m := c.lim.MaxRequestsPerConnection; m > 0 && n >= m {
		c.nh.closing.Store(true)
	}
	if requestHeadOverLimits(r, c.lim) { // headlimits.go
		w.Header().Set("Connection", "close")
		localReply(w, http.StatusRequestHeaderFieldsTooLarge, "", "")
		return
	}
	withStreamIdle(c.lim.StreamIdleTimeout, s.serveHTTP)(&closingWriter{ResponseWriter: w, c: c}, r)
}

// closingWriter adds "connection: close" to a response whose connection
// must end, as the response head goes out.
type closingWriter struct {
	http.ResponseWriter
	c     *conn
	wrote bool
}

func (w *closingWriter) WriteHeader(code int) {
	if !w.wrote && code >= 200 {
		w.wrote = true
		if w.c.nh.closing.Load() {
			w.Header().Set("Connection", "close")
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *closingWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *closingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
