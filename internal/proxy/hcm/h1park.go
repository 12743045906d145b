package hcm

import (
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/fwdheaders"
	"github.com/straitmesh/strait/internal/proxy/http1"
)

// A parked HTTP/1.1 connection (h1.go's waitRequest, http1.Parker) keeps
// only an h1keep: what serving it again needs (its listener's filter, its
// addresses, its limits and drain state) and the parker's slot, which
// holds a duplicate of its socket's descriptor. Its h1conn (request state,
// reader, wrappers) and its net.Conn are gone: the h1conn that served it
// closed the net.Conn when it parked, and a new h1conn serves the socket
// when it becomes readable (Resume). The h1keep lives as long as the
// connection, so that its drain callbacks, request count and
// max_connection_duration carry over from one h1conn to the next.
//
// Only a plain TCP connection is detached (detachable): one whose
// identity is all in its socket (the peer's address and the original
// destination, which the h1keep keeps). A connection under TLS, or under
// a wrapper that carries something of its own (the metadata exchange's, a
// TLS inspector's replayed bytes), keeps its goroutine while idle.

// h1keep is one downstream HTTP/1.1 connection for its whole life.
type h1keep struct {
	s      *Server
	filter *Filter
	dst    netip.AddrPort
	src    cluster.OriginalSource
	secure bool
	xfcc   fwdheaders.XFCCConn
	drain  *Drain // watches it (drainIdle, cut)

	idle      atomic.Int32 // connBusy, connIdle, connDrained (drain.go)
	limits    connLimits   // max_requests_per_connection, max_connection_duration (stream.go)
	idleSince time.Time    // when the wait for the next request began; written by the serving goroutine

	// nc is the connection of the h1conn serving it, for the drain to
	// close; nil once parked.
	nc   atomic.Pointer[http1.DeadlineConn]
	park http1.ParkSlot // the parker's while parked
}

// end releases what the connection holds for its whole life; once, when
// it closes.
func (k *h1keep) end() {
	k.drain.unwatch(k)
	k.filter.cxEnd()
}

// detachable reports whether the connection can be parked: it is plain
// TCP (the socket itself, or the HTTP/2 sniffer's replay of it with
// nothing left to replay), so a net.Conn made again from its descriptor
// is the same connection to everything that reads it.
func (c *h1conn) detachable() bool {
	switch t := c.tracked.(type) {
	case *net.TCPConn:
		return true
	case *prefixConn:
		return http1.RawSyscallConn(t) != nil
	}
	return false
}

// park hands the connection to the Server's parker, detached, once its
// buffer is back in the pool; it reports false when the parker did not
// take it (the connection is then still this h1conn's). On true, c is
// dead: Resume serves the connection with a new h1conn.
func (c *h1conn) park(since time.Time) bool {
	s := c.s
	s.parking(c.tracked)
	if s.parker.Park(&c.k.park, c.nc, c.k, c.k.parkDeadline(since)) {
		// Drop the closed connection (and its socket's structures) unless
		// the connection already resumed; the drain no longer needs it:
		// the parker's Take finds the connection.
		c.k.nc.CompareAndSwap(c.nc, nil)
		return true
	}
	if !s.unparked(c.tracked) {
		// The Server closed meanwhile without closing the connection,
		// which it no longer tracked: close it, so the wait ends.
		c.nc.Close()
	}
	return false
}

// parkDeadline is when a parked connection must wake to close: its idle
// timeout counted from since, or max_connection_duration, whichever comes
// first; zero for never.
func (k *h1keep) parkDeadline(since time.Time) time.Time {
	var t time.Time
	if d := k.filter.limits().IdleTimeout; d > 0 {
		t = since.Add(d)
	}
	if e := k.limits.expiry; !e.IsZero() && (t.IsZero() || e.Before(t)) {
		t = e
	}
	return t
}

// Resume serves a parked connection that became readable
// (http1.Parked), on the parker's new goroutine: a new net.Conn from the
// descriptor, tracked again, and a new h1conn.
func (k *h1keep) Resume() {
	nc, err := k.park.ResumeConn()
	if err != nil {
		k.s.log.Warn("a parked connection could not be resumed; closing it", "error", err)
		k.s.unparked(nil)
		k.end()
		return
	}
	if !k.s.unparked(nc) {
		nc.Close()
		k.end()
		return
	}
	k.s.newH1conn(k, nc).run(true)
}

// Finish ends a parked connection (http1.Parked): its idle_timeout or
// max_connection_duration passed, or the Server closed.
func (k *h1keep) Finish() {
	k.park.CloseFD()
	k.s.unparked(nil)
	k.end()
}

// unpark takes a parked connection that became readable back: a buffer,
// and the first bytes of its request. It reports false when the connection
// should close (it was drained meanwhile, or the client closed it).
func (c *h1conn) unpark() bool {
	c.r.UnparkBuffer()
	if c.drain != nil && !c.idle.CompareAndSwap(connIdle, connBusy) {
		return false
	}
	if c.drain.Ended() {
		return false // cut ran while the connection had no net.Conn
	}
	c.nc.SetReadTimeouts(0, c.k.parkDeadline(c.k.idleSince))
	if err := c.r.Fill(); err != nil {
		// A readable socket whose read times out can only be past its
		// deadline: close, as waitRequest would.
		return false
	}
	return true
}

// drainIdle runs when the connection's drain starts: a connection waiting
// for its next request is closed; one serving a request closes after the
// response (closing). Any goroutine.
func (k *h1keep) drainIdle() {
	if k.idle.CompareAndSwap(connIdle, connDrained) {
		if k.s.parker.Take(&k.park) {
			k.Finish()
			return
		}
		if nc := k.nc.Load(); nc != nil {
			nc.Close()
		}
	}
}

// cut runs when the connection's drain ends (its drain time has passed):
// the connection is closed whatever it is doing, so a response in progress
// stops there and the client sees the connection close; the request's
// upstream exchange ends once it notices (a write downstream fails, or the
// wait for the response head finds the client gone). Any goroutine.
func (k *h1keep) cut() {
	k.s.log.Debug("drain time over; closing the connection", "destination", k.dst.String())
	if k.s.parker.Take(&k.park) {
		k.Finish()
		return
	}
	if nc := k.nc.Load(); nc != nil {
		nc.Close()
	}
}
