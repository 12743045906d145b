package http1

import (
	"sync/atomic"
)

// An idle keep-alive connection is parked: after a while without a new
// message its goroutine ends and its read buffer goes back to the pool
// (ParkBuffer), and the connection waits in a Parker (one epoll set and
// one goroutine for all of them, park_linux.go) until it becomes readable
// (Parked.Resume), its deadline passes or the Parker closes
// (Parked.Finish). So ten thousand idle connections cost their sockets
// and small structs, not ten thousand goroutine stacks and read buffers
// (Envoy and nginx hold an idle connection the same way: an entry in an
// event loop). A parked connection is detached from the runtime: the
// Parker holds a duplicate of its socket's descriptor and its net.Conn is
// closed, so that no netpoller descriptor, net.Conn or wrapper lives while
// it waits; it becomes a net.Conn again (ParkSlot.ResumeConn) when it
// wakes. When to park, and what a resumed connection does, is its
// owner's (the HTTP connection manager's).

// Parked is a connection that a Parker holds.
type Parked interface {
	// Resume serves the connection again once its socket is readable; the
	// Parker calls it on a new goroutine.
	Resume()
	// Finish releases and closes the connection: its deadline passed or
	// the Parker closed.
	Finish()
}

// ParkSlot is what a Parker keeps in a connection while it is parked; the
// connection holds one (its zero value is ready) and passes it to Park and
// Take.
type ParkSlot struct {
	id   atomic.Uint64 // set while parked
	fd   int           // the duplicate descriptor the slot owns (held) from Park until ResumeConn or CloseFD
	held bool          // fd is open and the slot's
	// Guarded by the Parker's mu: the deadline (Unix nanoseconds; 0:
	// none) and the slot's index in the Parker's deadlines (-1: not in).
	deadline int64
	hidx     int
	conn     Parked // set by the first Park
}

// ParkBuffer gives the read buffer back to the pool while the connection
// waits for its next message, so that an idle keep-alive connection holds
// no buffer. It reports false, keeping the buffer, when bytes are still
// unread. UnparkBuffer must be called before the next read.
func (b *Reader) ParkBuffer() bool {
	if b.r != b.w || b.buf == nil {
		return b.buf == nil
	}
	if !b.big {
		bufPool.Put(b.pb)
	}
	b.buf, b.pb, b.big, b.r, b.w, b.scan = nil, nil, false, 0, 0, 0
	return true
}

// UnparkBuffer takes a pooled buffer after ParkBuffer; it does nothing when
// the Reader has one.
func (b *Reader) UnparkBuffer() {
	if b.buf == nil {
		b.pb = bufPool.Get().(*[]byte)
		b.buf = *b.pb
	}
}
