package http1

import (
	"errors"
	"net"
	"os"
	"time"
)

// PeekState is what Peek found on a connection.
type PeekState uint8

// The states Peek reports.
const (
	PeekQuiet  PeekState = iota // open, nothing to read
	PeekData                    // bytes are waiting
	PeekClosed                  // EOF or error
)

// DeadlineConn is a net.Conn whose reads and writes time out: each
// direction has an idle timeout, counted from the start of the call or its
// last progress (so a call blocks at most that long without progress), and
// a hard deadline. The zero settings mean no timeout and
// cost nothing per call.
//
// The deadline on the socket is moved lazily: while progress keeps pushing
// the idle deadline forward it is re-armed only when it moved by more than
// idle/16 (up to a second), and a deadline that fires before the wanted
// time is re-armed and the call resumed. Long timeouts count from
// CoarseNow. So a busy connection reads no clock per call and updates the
// runtime timer about once a second.
//
// Read settings are owned by the reading goroutine, write settings by the
// writing one, like a net.Conn's Read and Write.
type DeadlineConn struct {
	net.Conn
	rd, wd side
}

type side struct {
	lazy bool // keep an earlier socket deadline (SetReadLazy)
	idle time.Duration
	hard time.Time
	last time.Time // last progress
	set  time.Time // deadline on the socket; zero for none
}

// NewDeadlineConn wraps c.
func NewDeadlineConn(c net.Conn) *DeadlineConn { return &DeadlineConn{Conn: c} }

// SetReadTimeouts sets the read side's idle timeout (0: none) and hard
// deadline (zero: none).
func (d *DeadlineConn) SetReadTimeouts(idle time.Duration, hard time.Time) {
	d.rd.idle, d.rd.hard = idle, hard
}

// SetReadLazy makes the read side keep a socket deadline earlier than the
// one its settings want, until it fires (then the read is resumed under
// the right one, as with any early deadline), instead of moving it later.
// For a connection whose timeouts alternate between a short and a long
// one on every request (the downstream HTTP/1.1 connection: its wait for
// the next request, then the request), this keeps the runtime timer
// untouched per request; the cost is a spurious wake-up per short timeout.
func (d *DeadlineConn) SetReadLazy(on bool) { d.rd.lazy = on }

// SetReadHard moves the read side's hard deadline only.
func (d *DeadlineConn) SetReadHard(hard time.Time) { d.rd.hard = hard }

// SetWriteTimeouts is SetReadTimeouts for writes.
func (d *DeadlineConn) SetWriteTimeouts(idle time.Duration, hard time.Time) {
	d.wd.idle, d.wd.hard = idle, hard
}

// now is the time for the idle timeout: coarse when it is long.
func (s *side) now() time.Time {
	if s.idle < preciseBelow {
		return time.Now()
	}
	return CoarseNow()
}

// want returns the deadline the settings ask for (zero: none).
func (s *side) want() time.Time {
	if s.idle <= 0 {
		return s.hard
	}
	w := s.last.Add(s.idle)
	if !s.hard.IsZero() && s.hard.Before(w) {
		return s.hard
	}
	return w
}

// arm moves the socket deadline if needed; it reports the wanted deadline.
// setDeadline's error is not returned: a deadline fails only on a closed
// connection, and the Read or Write that follows returns that error.
func (s *side) arm(setDeadline func(time.Time) error) time.Time {
	w := s.want()
	if w.IsZero() {
		if !s.set.IsZero() {
			_ = setDeadline(time.Time{})
			s.set = time.Time{}
		}
		return w
	}
	slack := s.idle / 16
	if slack > time.Second {
		slack = time.Second
	}
	if s.set.IsZero() || w.Before(s.set) || !s.lazy && w.Sub(s.set) > slack {
		_ = setDeadline(w)
		s.set = w
	}
	return w
}

// expired reports whether a timeout error is real, rather than an early
// deadline left armed lazily.
func (s *side) expired(w time.Time) bool {
	if w.IsZero() {
		return true // someone else's deadline: report it
	}
	if time.Now().Before(w) {
		return false
	}
	return true
}

func isTimeout(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }

func (d *DeadlineConn) Read(p []byte) (int, error) {
	if d.rd.idle <= 0 && d.rd.hard.IsZero() && d.rd.set.IsZero() {
		return d.Conn.Read(p)
	}
	if d.rd.idle > 0 {
		d.rd.last = d.rd.now()
	}
	for {
		w := d.rd.arm(d.Conn.SetReadDeadline)
		n, err := d.Conn.Read(p)
		if n > 0 && d.rd.idle > 0 {
			d.rd.last = d.rd.now()
		}
		if err != nil && n == 0 && isTimeout(err) && !d.rd.expired(w) {
			d.rd.set = time.Time{} // force re-arming
			continue
		}
		return n, err
	}
}

func (d *DeadlineConn) Write(p []byte) (int, error) {
	if d.wd.idle <= 0 && d.wd.hard.IsZero() && d.wd.set.IsZero() {
		return d.Conn.Write(p)
	}
	if d.wd.idle > 0 {
		d.wd.last = d.wd.now()
	}
	written := 0
	for {
		w := d.wd.arm(d.Conn.SetWriteDeadline)
		n, err := d.Conn.Write(p[written:])
		written += n
		if n > 0 && d.wd.idle > 0 {
			d.wd.last = d.wd.now()
		}
		if err != nil && isTimeout(err) && written < len(p) && (n > 0 || !d.wd.expired(w)) {
			d.wd.set = time.Time{}
			continue
		}
		return written, err
	}
}

// CloseWrite shuts down the write side when the connection supports it.
func (d *DeadlineConn) CloseWrite() error {
	if cw, ok := d.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// IsTimeout reports whether err is a read or write deadline expiry.
func IsTimeout(err error) bool { return isTimeout(err) }

// BufferedConn is a connection wrapper that replays bytes it already read
// (the HCM's protocol sniffing) over the connection it wraps; Peek looks
// through it. Both methods are called only by the connection's reader.
type BufferedConn interface {
	net.Conn
	// Buffered is how many read bytes are still to be replayed.
	Buffered() int
	// NetConn is the wrapped connection.
	NetConn() net.Conn
}
