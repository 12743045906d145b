package http2

import (
	"errors"
	"net"
	"time"
)

// An idle downstream HTTP/2 connection is parked (package http2/server,
// http1.Parker): its reader goroutine ends and the guard lets go of the
// socket (Detach) until the connection is resumed on a new net.Conn made
// from the same socket (Attach). What the guard counts (the streams
// opened, the premature resets) carries over: parking does not reset the
// rapid-reset accounting.

// ErrIdle is what Read returns when ArmIdle's deadline passed between
// frames: nothing was read, the next byte starts a frame.
var ErrIdle = errors.New("http2: no frame arrived (connection idle)")

// ArmIdle sets the read deadline to d from now, as an idle deadline: if it
// passes while the reader waits for the first byte of a frame, Read fails
// with ErrIdle; if it passes within a frame, Read reads on (and the
// deadline is gone). Another deadline (SetReadDeadline) replaces it. Any
// goroutine, as long as the guard is not detached meanwhile; nothing is
// armed on a connection that could not park (TLS).
func (g *Guard) ArmIdle(d time.Duration) {
	if !rawSocket(g.Conn) {
		return
	}
	g.idle.Store(true)
	_ = g.Conn.SetReadDeadline(time.Now().Add(d))
}

// IsIdle reports whether err is ErrIdle.
func (g *Guard) IsIdle(err error) bool { return errors.Is(err, ErrIdle) }

// SetReadDeadline replaces an idle deadline (ArmIdle) too.
func (g *Guard) SetReadDeadline(t time.Time) error {
	g.idle.Store(false)
	return g.Conn.SetReadDeadline(t)
}

// SetDeadline replaces an idle deadline (ArmIdle) too.
func (g *Guard) SetDeadline(t time.Time) error {
	g.idle.Store(false)
	return g.Conn.SetDeadline(t)
}

// betweenFrames reports whether every byte read so far ends a frame: the
// next one starts a new frame, outside any header block (reader only).
func (g *Guard) betweenFrames() bool {
	return g.r == g.w && g.preface == 0 && g.unread == 0 && g.in.hn == 0 && g.in.skip == 0 &&
		g.blockEnd == 0 && g.err == nil && g.rerr == nil
}

// Detach hands the socket over for parking: between frames, with nothing
// read ahead, it returns the connection it reads (which reaches its socket
// directly) and drops its buffers; it no longer uses the connection until
// Attach. It returns nil, keeping everything, when the guard holds bytes
// or state of a frame, or the connection is not a plain socket (TLS, bytes
// a wrapper still holds). The writer must be idle too (nothing queued).
// Reader only.
func (g *Guard) Detach() net.Conn {
	if !g.betweenFrames() || g.out.hn != 0 || g.out.skip != 0 || !rawSocket(g.Conn) {
		return nil
	}
	c := g.Conn
	g.release()
	g.idle.Store(false)
	_ = c.SetReadDeadline(time.Time{})
	g.Conn, g.readFn = detached{}, nil
	g.mu.Lock()
	if len(g.streams) == 0 {
		g.streams = nil // inbound makes it again
	}
	g.mu.Unlock()
	return c
}

// Attach gives a detached guard its connection back (the parked socket,
// as a new net.Conn); the caller owns the guard as its reader.
func (g *Guard) Attach(c net.Conn) { g.Conn = c }

// detached is a detached guard's connection: it is closed, as far as
// anything that still holds the guard can tell.
type detached struct{}

func (detached) Read([]byte) (int, error)         { return 0, net.ErrClosed }
func (detached) Write([]byte) (int, error)        { return 0, net.ErrClosed }
func (detached) Close() error                     { return nil }
func (detached) LocalAddr() net.Addr              { return nil }
func (detached) RemoteAddr() net.Addr             { return nil }
func (detached) SetDeadline(time.Time) error      { return nil }
func (detached) SetReadDeadline(time.Time) error  { return nil }
func (detached) SetWriteDeadline(time.Time) error { return nil }
