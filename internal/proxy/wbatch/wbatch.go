// Package wbatch coalesces a connection's writes: Write copies into a
// buffer and returns, and one goroutine per connection writes whatever has
// accumulated with one system call. x/net/http2 flushes after nearly every
// frame (its server after each frame its writer goroutine writes, its
// Transport after a request's HEADERS and again after its DATA), so a
// unary gRPC call costs several write syscalls per hop; behind a batcher,
// the frames written while the previous batch was in the kernel go out
// together. Nothing waits for more data: with the connection idle, a write
// goes out as soon as the writing goroutine yields, so latency is one
// goroutine switch, not a timer (unlike Nagle's algorithm).
package wbatch

import (
	"errors"
	"net"
	"sync"
	"time"
)

// maxBuffered is how much may wait for the writer goroutine; past it Write
// blocks until the goroutine took the buffer (back-pressure, so a slow peer
// costs at most this much memory per connection beyond the kernel's).
const maxBuffered = 64 << 10

// Conn is a net.Conn whose writes are batched. Write errors are reported
// by a later Write (or Close): a connection that failed fails every write
// after, which is what HTTP/2 needs (the connection is then closed).
type Conn struct {
	net.Conn

	mu      sync.Mutex // guards the fields below
	cond    sync.Cond  // signalled when buf was taken or the writer ended
	buf     []byte     // waiting for the writer goroutine
	spare   []byte     // the writer's previous buffer, for reuse
	err     error      // the first write error; sticky
	writing bool       // the writer goroutine is in a write
	closing bool
	done    chan struct{} // closed when the writer goroutine returned
	kick    chan struct{} // capacity 1: there is something to write
}

// errClosed is returned by writes after Close.
var errClosed = errors.New("wbatch: write on closed connection")

// New wraps c and starts its writer goroutine, which Close stops.
func New(c net.Conn) *Conn {
	b := &Conn{Conn: c, done: make(chan struct{}), kick: make(chan struct{}, 1)}
	b.cond.L = &b.mu
	go b.run()
	return b
}

// Write queues p; it blocks only while maxBuffered bytes already wait.
func (b *Conn) Write(p []byte) (int, error) {
	b.mu.Lock()
	for b.err == nil && !b.closing && len(b.buf) > 0 && len(b.buf)+len(p) > maxBuffered {
		b.cond.Wait()
	}
	switch {
	case b.err != nil:
		err := b.err
		b.mu.Unlock()
		return 0, err
	case b.closing:
		b.mu.Unlock()
		return 0, errClosed
	}
	b.buf = append(b.buf, p...)
	select { // under mu: Close closes kick under mu
	case b.kick <- struct{}{}:
	default:
	}
	b.mu.Unlock()
	return len(p), nil
}

// maxBacklog bounds what Append may queue: a peer that stops reading while
// it keeps sending frames that need an answer (PING, SETTINGS) costs at
// most this much before Append fails.
const maxBacklog = 4 * maxBuffered

// ErrBacklog is returned by Append when maxBacklog bytes already wait:
// the peer does not read what it asks for.
var ErrBacklog = errors.New("wbatch: peer does not read (write backlog full)")

// Append queues p without blocking (a connection's reader, which must not
// wait on its peer, writes its answers with it); it fails with ErrBacklog
// when more than maxBacklog bytes would wait.
func (b *Conn) Append(p []byte) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.err != nil:
		return b.err
	case b.closing:
		return errClosed
	case len(b.buf)+len(p) > maxBacklog && len(b.buf) > 0:
		return ErrBacklog
	}
	b.buf = append(b.buf, p...)
	select { // under mu: Close closes kick under mu
	case b.kick <- struct{}{}:
	default:
	}
	return nil
}

// HasRoom reports whether a Write would not block (fewer than maxBuffered
// bytes wait).
func (b *Conn) HasRoom() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.buf) < maxBuffered || b.err != nil || b.closing
}

// WaitRoom blocks while maxBuffered bytes wait for the writer goroutine,
// until stop reports true (checked at each Wake); it reports whether
// there is room (false: stopped, failed or closed).
func (b *Conn) WaitRoom(stop func() bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.err == nil && !b.closing && len(b.buf) >= maxBuffered {
		if stop != nil && stop() {
			return false
		}
		b.cond.Wait()
	}
	return b.err == nil && !b.closing
}

// Wake wakes the goroutines in WaitRoom, so that they check their stop.
func (b *Conn) Wake() {
	b.mu.Lock()
	b.cond.Broadcast()
	b.mu.Unlock()
}

func (b *Conn) run() {
	defer close(b.done)
	for range b.kick {
		for {
			b.mu.Lock()
			if len(b.buf) == 0 {
				closing := b.closing
				b.mu.Unlock()
				if closing {
					return
				}
				break
			}
			// Swap buffers: Write appends to the spare one meanwhile.
			out := b.buf
			b.buf, b.spare = b.spare[:0], nil
			b.writing = true
			b.mu.Unlock()
			_, err := b.Conn.Write(out)
			b.mu.Lock()
			b.writing = false
			if cap(out) <= 2*maxBuffered {
				b.spare = out[:0]
			}
			if err != nil && b.err == nil {
				b.err = err
			}
			failed := b.err != nil
			b.cond.Broadcast()
			b.mu.Unlock()
			if failed {
				return
			}
		}
	}
}

// closeWait bounds how long Close waits for queued bytes to go out to a
// peer that does not read.
const closeWait = time.Second

// NetConn is the wrapped connection, so that what looks through wrappers
// (tlsconf.Layers: the upstream's principals for istio.stats, which x/net's
// Transport reports with the batched connection) finds its TLS layer.
// Writing to it directly would bypass the queue: only read what it is.
func (b *Conn) NetConn() net.Conn { return b.Conn }

// Close writes what is queued (as a plain connection's Close would find it
// already in the kernel), waiting at most closeWait, then closes the
// connection.
func (b *Conn) Close() error {
	b.mu.Lock()
	if !b.closing {
		b.closing = true
		select {
		case b.kick <- struct{}{}:
		default:
		}
		close(b.kick)
		b.cond.Broadcast()
	}
	b.mu.Unlock()
	t := time.NewTimer(closeWait)
	defer t.Stop()
	select {
	case <-b.done:
	case <-t.C:
		_ = b.Conn.SetWriteDeadline(time.Unix(1, 0)) // end the write in progress
		<-b.done
	}
	return b.Conn.Close()
}

// CloseWrite waits for what is queued to be written, then shuts down the
// write side when the connection supports it.
func (b *Conn) CloseWrite() error {
	b.mu.Lock()
	for b.err == nil && (len(b.buf) > 0 || b.writing) {
		b.cond.Wait()
	}
	b.mu.Unlock()
	if cw, ok := b.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
