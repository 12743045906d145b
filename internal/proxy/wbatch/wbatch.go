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
	"runtime"
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
//
// The writer goroutine runs only while there is something to write: it
// starts with the first bytes queued and ends once the queue is empty, and
// the queue's buffer comes from a pool and goes back to it once written.
// An idle connection holds neither.
type Conn struct {
	net.Conn

	mu      sync.Mutex // guards the fields below
	cond    *sync.Cond // signalled when buf was taken or the writer ended; made by the first wait
	buf     []byte     // waiting for the writer goroutine
	err     error      // the first write error; sticky
	writing bool       // the writer goroutine is in a write
	running bool       // the writer goroutine runs
	closing bool
}

// errClosed is returned by writes after Close.
var errClosed = errors.New("wbatch: write on closed connection")

// The queue's buffers come from pools of arrays in three sizes (array
// pointers: a Put allocates nothing, where a Put of a slice's address
// allocated its header once per batch); a queue that outgrows its buffer
// moves to one of the next size, and one past the largest is allocated
// and left to the GC.
const (
	smallBuf = 4 << 10
	midBuf   = 16 << 10
	largeBuf = 2 * maxBuffered
)

var (
	smallBufs = sync.Pool{New: func() any { return new([smallBuf]byte) }}
	midBufs   = sync.Pool{New: func() any { return new([midBuf]byte) }}
	largeBufs = sync.Pool{New: func() any { return new([largeBuf]byte) }}
)

// growBuf returns an empty buffer of at least n bytes holding buf's bytes;
// buf goes back to its pool.
func growBuf(buf []byte, n int) []byte {
	var nb []byte
	switch {
	case n <= smallBuf:
		nb = smallBufs.Get().(*[smallBuf]byte)[:0]
	case n <= midBuf:
		nb = midBufs.Get().(*[midBuf]byte)[:0]
	case n <= largeBuf:
		nb = largeBufs.Get().(*[largeBuf]byte)[:0]
	default:
		nb = make([]byte, 0, n)
	}
	nb = append(nb, buf...)
	putBuf(buf)
	return nb
}

// putBuf gives buf back to its pool, if it came from one.
func putBuf(buf []byte) {
	switch cap(buf) {
	case smallBuf:
		smallBufs.Put((*[smallBuf]byte)(buf[:smallBuf]))
	case midBuf:
		midBufs.Put((*[midBuf]byte)(buf[:midBuf]))
	case largeBuf:
		largeBufs.Put((*[largeBuf]byte)(buf[:largeBuf]))
	}
}

// New wraps c.
func New(c net.Conn) *Conn {
	b := &Conn{}
	b.Init(c)
	return b
}

// Init makes b, a zero Conn (one a larger struct holds, so that a
// connection's state is one allocation), wrap c.
func (b *Conn) Init(c net.Conn) {
	b.Conn = c
}

// waitLocked waits for a wakeLocked (mu held). The first wait makes the
// Cond: a connection none of whose writers waited (most, and every
// parked one) keeps 8 bytes for it instead of 56.
func (b *Conn) waitLocked() {
	if b.cond == nil {
		b.cond = sync.NewCond(&b.mu)
	}
	b.cond.Wait()
}

// wakeLocked wakes whoever waits in waitLocked (mu held).
func (b *Conn) wakeLocked() {
	if b.cond != nil {
		b.cond.Broadcast()
	}
}

// Write queues p; it blocks only while maxBuffered bytes already wait.
func (b *Conn) Write(p []byte) (int, error) {
	b.mu.Lock()
	for b.err == nil && !b.closing && len(b.buf) > 0 && len(b.buf)+len(p) > maxBuffered {
		b.waitLocked()
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
	b.queueLocked(p)
	b.mu.Unlock()
	return len(p), nil
}

// queueLocked appends p to the queue and starts the writer goroutine if
// it does not run (mu held).
func (b *Conn) queueLocked(p []byte) {
	if len(p) == 0 {
		return
	}
	if n := len(b.buf) + len(p); n > cap(b.buf) {
		b.buf = growBuf(b.buf, n)
	}
	b.buf = append(b.buf, p...)
	if !b.running {
		b.running = true
		go b.run()
	}
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
	b.queueLocked(p)
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
		b.waitLocked()
	}
	return b.err == nil && !b.closing
}

// Idle reports whether nothing is queued and the writer goroutine does not
// run, on a connection that has not failed or closed: what the connection
// under it needs to be swapped (a parked HTTP/2 connection, package
// http2/server), as long as the caller keeps writes out meanwhile.
func (b *Conn) Idle() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.buf) == 0 && !b.running && b.err == nil && !b.closing
}

// Wake wakes the goroutines in WaitRoom, so that they check their stop.
func (b *Conn) Wake() {
	b.mu.Lock()
	b.wakeLocked()
	b.mu.Unlock()
}

func (b *Conn) run() {
	// Let the goroutines that are ready run first: their writes join
	// this batch. (The goroutine that queued made this one its successor,
	// ahead of every other one ready to run.)
	runtime.Gosched()
	b.mu.Lock()
	for len(b.buf) > 0 && b.err == nil {
		out := b.buf
		b.buf = nil
		b.writing = true
		b.mu.Unlock()
		_, err := b.Conn.Write(out)
		putBuf(out)
		b.mu.Lock()
		b.writing = false
		if err != nil && b.err == nil {
			b.err = err
		}
		b.wakeLocked()
	}
	b.running = false
	b.wakeLocked()
	b.mu.Unlock()
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
	b.closing = true
	b.wakeLocked()
	if b.running {
		// End the write in progress once closeWait has passed.
		t := time.AfterFunc(closeWait, func() { _ = b.Conn.SetWriteDeadline(time.Unix(1, 0)) })
		for b.running {
			b.waitLocked()
		}
		t.Stop()
	}
	b.mu.Unlock()
	return b.Conn.Close()
}

// CloseWrite waits for what is queued to be written, then shuts down the
// write side when the connection supports it.
func (b *Conn) CloseWrite() error {
	b.mu.Lock()
	for b.err == nil && b.running {
		b.waitLocked()
	}
	b.mu.Unlock()
	if cw, ok := b.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
