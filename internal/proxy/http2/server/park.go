package server

import (
	"net"
	"time"

	"github.com/straitmesh/strait/internal/proxy/http1"
)

// An idle connection is parked, as an idle HTTP/1.1 one is (http1.Parker):
// once it has had no open stream, nothing queued to write and no byte of
// a frame read for parkAfter, its reader goroutine ends, the socket is
// detached (the parker holds a duplicate of its descriptor in its epoll
// set, the net.Conn is closed) and the reader's framer, the write buffers,
// the writer's framer and HPACK encoder and the header-name caches are
// dropped. What stays is the Conn (settings, windows, counters, timers),
// the peer's HPACK dynamic table (the decoder: the peer's next header
// block may refer to it) and the guard's counts. When the socket becomes
// readable the parker resumes the connection (Resume) on a new goroutine:
// a new net.Conn from the descriptor, a new framer on the same decoder, a
// new encoder. The encoder's table starts empty, and its first header
// block says so (a dynamic table size update to 0, then back to the
// limit), so that the peer's decoder empties its copy too (RFC 7541
// §4.2).
//
// Whatever must write to a parked connection (a keepalive PING, the
// GOAWAYs of a shutdown: idle_timeout, max_connection_duration, a drain)
// or close it first wakes it (wake): the connection is taken back from the
// parker and served again, and parks again after parkAfter if it is still
// idle. The idle and keepalive timers keep running while it is parked.

// parkAfter is how long a connection waits for a frame on its own
// goroutine before parking: a client that sends requests back to back
// never parks, so the request path pays nothing for parking.
const parkAfter = 100 * time.Millisecond

// Parking is how a connection parks. The connection's Config.Handler is
// told about its socket as it parks and resumes, and when the connection
// ends: it must be a Host (one interface less in what a parked
// connection keeps).
type Parking struct {
	// Parker holds parked connections (*http1.Parker).
	Parker Parker
	// Socket reads the socket under the connection's wbatch.Conn
	// (*http2.Guard): it lets go of it to park, and takes it back.
	Socket Socket
}

// host is the Handler as the Host that Parking needs (Init checked it).
func (c *Conn) host() Host { return c.cfg.Handler.(Host) }

// Parker is what a connection needs of http1.Parker.
type Parker interface {
	Park(s *http1.ParkSlot, nc net.Conn, c http1.Parked, deadline time.Time) bool
	Take(s *http1.ParkSlot) bool
}

// Socket is what a connection needs of the guard that reads its socket
// (http2.Guard).
type Socket interface {
	// ArmIdle makes a read that waits for the first byte of a frame
	// fail once d has passed, with an error IsIdle recognizes (a read
	// within a frame goes on). Called under the connection's mu.
	ArmIdle(d time.Duration)
	IsIdle(err error) bool
	// Detach returns the socket to park, or nil when it cannot be parked
	// now (nothing is read then); the socket is not read until Attach.
	Detach() net.Conn
	Attach(nc net.Conn)
}

// Host is the connection's owner (the HTTP connection manager).
type Host interface {
	// Parked: the connection is about to park, without a net.Conn.
	Parked()
	// Unparked: the connection is served again on nc (nil: it ends
	// instead). false: it may not be (its server closed); it ends.
	Unparked(nc net.Conn) bool
	// Ended: the connection ended; called once, whether it parked or not.
	Ended()
}

// armIdleLocked arms the socket's idle deadline when the connection could
// park: no stream, no shutdown (mu held). The reader arms it after a
// frame, a stream's end when it was the last.
func (c *Conn) armIdleLocked() {
	if c.cfg.Park != nil && len(c.streams) == 0 && !c.shutdown && !c.closing && !c.parked {
		c.cfg.Park.Socket.ArmIdle(parkAfter)
	}
}

// tryPark parks the connection (reader only, between frames); it reports
// whether it did, the reader then ending. On false the reader goes on.
func (c *Conn) tryPark() bool {
	p := c.cfg.Park
	c.wmu.Lock()
	if !c.nc.Idle() {
		c.wmu.Unlock()
		return false
	}
	c.mu.Lock()
	if len(c.streams) > 0 || c.shutdown || c.closing {
		c.mu.Unlock()
		c.wmu.Unlock()
		return false
	}
	raw := p.Socket.Detach()
	if raw == nil {
		c.mu.Unlock()
		c.wmu.Unlock()
		return false
	}
	c.parked = true
	c.streams = nil
	// The idle timeout is the parker's deadline while parked (one heap
	// and timer for all): the connection's timer goes.
	var deadline time.Time
	if c.cfg.IdleTimeout > 0 {
		deadline = monoEpoch.Add(c.idleSince + c.cfg.IdleTimeout)
		if c.idleTimer != nil {
			c.idleTimer.Stop()
			c.idleTimer = nil
		}
	}
	c.mu.Unlock()
	c.wr = nil
	c.wmu.Unlock()
	c.fr.Release()
	c.fr = nil
	c.canon.Reset()
	c.host().Parked()
	if !p.Parker.Park(&c.slot, raw, c, deadline) {
		// Not taken (no epoll, or the parker closed): raw is still open.
		if !c.host().Unparked(raw) {
			_ = raw.Close()
			c.end()
			return true
		}
		c.attach(raw)
		return false
	}
	// Parked: from here the connection is the parker's, or whoever takes
	// it back. A write that came meanwhile waits for this goroutine.
	c.mu.Lock()
	w := c.wakeWanted
	c.wakeWanted = false
	c.mu.Unlock()
	if w && p.Parker.Take(&c.slot) {
		return !c.unpark() // serve on here
	}
	return true
}

// unpark makes a net.Conn of the socket of a connection taken back from
// the parker and attaches it; false: the connection ended instead.
func (c *Conn) unpark() bool {
	nc, err := c.slot.ResumeConn()
	if err != nil {
		c.cfg.Log.Warn("a parked HTTP/2 connection could not be resumed; closing it", "error", err)
		c.host().Unparked(nil)
		c.end()
		return false
	}
	if !c.host().Unparked(nc) {
		_ = nc.Close()
		c.end()
		return false
	}
	c.attach(http1.WrapConn(nc))
	return true
}

// attach gives the connection its socket back, and what the reader and
// the writers need.
func (c *Conn) attach(nc net.Conn) {
	c.wmu.Lock()
	c.wr = newWriter(c.encLimit, true)
	c.wmu.Unlock()
	c.newReader()
	c.mu.Lock()
	c.cfg.Park.Socket.Attach(nc) // under mu, as ArmIdle
	c.parked, c.wakeWanted = false, false
	if c.cfg.IdleTimeout > 0 && c.idleTimer == nil && !c.closing {
		c.idleTimer = time.AfterFunc(max(c.cfg.IdleTimeout-(monoNow()-c.idleSince), 0), c.idleCheck)
	}
	c.wakeSendersLocked()
	c.mu.Unlock()
}

// Resume serves a parked connection whose socket became readable
// (http1.Parked), on the parker's new goroutine.
func (c *Conn) Resume() {
	defer c.recoverPanic()
	if c.unpark() {
		c.run(false)
	}
}

// Finish ends a parked connection (http1.Parked): its idle timeout passed
// (it then shuts down as a served one does: GOAWAY) or the parker closed.
func (c *Conn) Finish() {
	c.mu.Lock()
	timedOut := c.cfg.IdleTimeout > 0 && (monoNow()-c.idleSince) >= c.cfg.IdleTimeout
	c.mu.Unlock()
	if timedOut {
		if c.unpark() {
			go c.resumed()
			c.idleCheck()
		}
		return
	}
	c.slot.CloseFD()
	c.host().Unparked(nil)
	c.end()
}

// resumed serves a connection that wake took back from the parker.
func (c *Conn) resumed() {
	defer c.recoverPanic()
	c.run(false)
}

// wake makes sure the connection has its socket before a write from
// outside the reader (a timer, Shutdown, Close): a parked connection is
// taken back from the parker and served again on a new goroutine. It
// reports false when the connection has ended.
func (c *Conn) wake() bool {
	if c.cfg.Park == nil {
		return true
	}
	c.mu.Lock()
	for {
		if c.closing || c.ended {
			c.mu.Unlock()
			return false
		}
		if !c.parked {
			c.mu.Unlock()
			return true
		}
		c.wakeWanted = true
		c.mu.Unlock()
		if c.cfg.Park.Parker.Take(&c.slot) {
			if !c.unpark() {
				return false
			}
			go c.resumed()
			return true
		}
		// Being parked (tryPark takes it back once Park returns) or
		// resumed: wait for whoever has it.
		c.mu.Lock()
		if c.parked && !c.closing && !c.ended {
			c.waitSendLocked()
		}
	}
}

// Close closes the connection at once, from any goroutine (a drain whose
// time is over, a keepalive PING unanswered): a parked one is woken, so
// that it ends as a served one does.
func (c *Conn) Close() {
	for c.wake() {
		c.mu.Lock()
		if !c.parked {
			// The socket itself, at once (the batched writer would wait
			// for a peer that does not read); under mu, so that the
			// reader does not detach it meanwhile.
			_ = c.nc.NetConn().Close()
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
	}
}

var _ http1.Parked = (*Conn)(nil)
