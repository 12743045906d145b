// Package idlewatch tells whether an idle pooled upstream HTTP/1.1
// connection heard from its upstream, without a system call.
//
// An idle pooled HTTP/1.1 connection must not carry a request once its
// upstream sent it anything (bytes or a close) after the last response: a
// late or unsolicited response would be read as the answer to the next
// request. Checking each connection when it is reused costs a system call
// (http1.Peek) per request. Instead, as nginx and Envoy learn it from their
// event loop, every upstream socket of the process is in one epoll set,
// edge-triggered, that the runtime's poller watches (watch_linux.go):
// its goroutine collects the sockets that became readable or hung up and
// records, in each connection, the epoch of that collection. The
// connection's socket records the epochs around its last receive system
// call, and whether it emptied the receive queue (http1.MarkReads).
// Comparing the two tells, without a system call,
// whether anything arrived after the response (dirty: the connection is
// retired), nothing did (clean), or a collection overlapped that read
// (unsure: the connection is checked with a Peek, as before).
//
// Epochs: the watch's epoch is even between collections and odd during
// one (it starts at 2, so that a connection never heard from is clean).
package idlewatch

import (
	"sync/atomic"
	"unsafe"

	"github.com/straitmesh/strait/internal/proxy/http1"
)

// State is what the idle watch knows of a connection.
type State uint8

// The states Conn.State reports.
const (
	Unsure State = iota // check the socket (http1.Peek)
	Clean               // nothing arrived since the last read emptied the socket
	Dirty               // bytes or a close arrived since: retire it
)

// Conn is an upstream HTTP/1.1 socket in the idle watch. Its zero value is
// a connection not watched (State: Unsure). It is 64 bytes (on Linux), and what
// State reads comes first, so that a Conn embedded at the start of a
// 64-byte-aligned struct (the pool's connection) costs the pool no cache
// line of its own when it takes an idle connection.
type Conn struct {
	stopped *atomic.Bool // the watch's: it no longer collects; nil: not watched
	// heard is the epoch of the last collection that found the socket
	// readable or hung up (written by the watch's goroutine).
	heard atomic.Uint64
	// mark is what the socket's reads record (http1.MarkReadsInto):
	// written by the connection's reader, read by the pool once the
	// connection is idle (the pool's lock orders them).
	mark  http1.ReadMark
	owner *Watch
	id    uint64 // its key in the watch; unique for the process's life
}

// StateBytes is how many leading bytes of a Conn State reads.
const StateBytes = unsafe.Offsetof(Conn{}.mark) + unsafe.Offsetof(http1.ReadMark{}.Drained) + 1

// State tells whether anything arrived since the last read emptied the
// socket: a collection that began after that read found it readable
// (dirty); the last one that did ended before the read began (clean); or
// one overlapped the read (unsure), as for a connection not watched.
func (w *Conn) State() State {
	if w.stopped == nil || !w.mark.Drained || w.stopped.Load() {
		return Unsure
	}
	m := &w.mark
	h := w.heard.Load()
	if h > m.D1 {
		return Dirty
	}
	if h >= m.D0 {
		return Unsure
	}
	return Clean
}

// Watched reports whether the connection is in a watch.
func (w *Conn) Watched() bool { return w.stopped != nil }

// Forget takes the connection out of its watch; closing it calls Forget.
// It does nothing for a connection not watched, or forgotten already.
func (w *Conn) Forget() {
	if w.owner != nil {
		w.owner.forget(w)
		w.owner, w.stopped = nil, nil
	}
}
