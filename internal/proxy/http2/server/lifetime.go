package server

// How a connection ends: GOAWAY on a protocol error, the graceful
// shutdown (two GOAWAYs), the idle timeout and the keepalive PINGs.

import (
	"time"

	"golang.org/x/net/http2"

	"github.com/straitmesh/strait/internal/proxy/http2/wire"
)

// goAwayAndClose sends GOAWAY with code and the last stream processed,
// then ends the connection.
func (c *Conn) goAwayAndClose(code http2.ErrCode, why string) {
	c.mu.Lock()
	last := c.maxClientID
	c.goAwayFinal = true
	c.mu.Unlock()
	var debug []byte
	if code != http2.ErrCodeNo {
		debug = []byte(why)
	}
	_ = c.writeControl(func(fr *http2.Framer) error { return fr.WriteGoAway(last, code, debug) })
	c.linger()
}

// Shutdown starts a graceful shutdown (any goroutine): GOAWAY with the
// largest stream id and a PING; when the PING returns (or after
// goAwayGrace), GOAWAY with the last stream processed. Streams in
// progress finish; then the connection closes.
func (c *Conn) Shutdown() {
	c.mu.Lock()
	if c.shutdown || c.closing {
		c.mu.Unlock()
		return
	}
	c.shutdown = true
	started := c.started
	c.mu.Unlock()
	if started && c.wake() {
		c.sendShutdown()
	}
}

// sendShutdown writes the first GOAWAY and its PING, and arms the second.
func (c *Conn) sendShutdown() {
	_ = c.writeControl(func(fr *http2.Framer) error {
		_ = fr.WriteGoAway(maxStreamID, http2.ErrCodeNo, nil)
		return fr.WritePing(false, wire.DrainPingData)
	})
	c.mu.Lock()
	if !c.closing {
		c.drainTimer = time.AfterFunc(goAwayGrace, c.finalGoAway)
	}
	c.mu.Unlock()
}

// finalGoAway is the second GOAWAY of a graceful shutdown; a connection
// without a stream then ends.
func (c *Conn) finalGoAway() {
	c.mu.Lock()
	if c.goAwayFinal || c.closing {
		c.mu.Unlock()
		return
	}
	c.goAwayFinal = true
	c.goAwayID = c.maxClientID
	last := c.goAwayID
	idle := len(c.streams) == 0
	c.mu.Unlock()
	if !c.wake() {
		return
	}
	_ = c.writeControl(func(fr *http2.Framer) error { return fr.WriteGoAway(last, http2.ErrCodeNo, nil) })
	if idle {
		// The reader may be blocked on a silent peer: wake it.
		_ = c.nc.SetReadDeadline(time.Now())
	}
}

func (c *Conn) idleCheck() {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return
	}
	wait := wire.IdleWait(len(c.streams) != 0, monoNow()-c.idleSince, c.cfg.IdleTimeout)
	if c.idleTimer == nil && (!c.parked || wait > 0) {
		// Parked after this call began (the parker's deadline is the
		// timeout now; park.go), and not resumed since.
		c.mu.Unlock()
		return
	}
	if wait > 0 {
		c.idleTimer.Reset(wait)
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	c.Shutdown()
	c.finalGoAway()
}

// keepalive returns the timer function of a keepalive check that starts
// from k (wire.Keepalive: a PING after PingInterval without a frame, the
// connection closed PingTimeout after it without one).
func (c *Conn) keepalive(k wire.Keepalive) func() {
	return func() {
		read := c.lastRead.Load()
		c.mu.Lock()
		if c.closing {
			c.mu.Unlock()
			return
		}
		step, wait, next := k.Check(read, c.cfg.PingInterval, c.cfg.PingTimeout)
		if step == wire.KeepaliveClose {
			c.mu.Unlock()
			c.Close()
			return
		}
		c.pingTimer = time.AfterFunc(wait, c.keepalive(next))
		c.mu.Unlock()
		if step != wire.KeepalivePing || !c.wake() {
			return
		}
		_ = c.writeControl(func(fr *http2.Framer) error { return fr.WritePing(false, wire.KeepalivePingData) })
	}
}
