package http1

import (
	"io"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// WrapConn returns a net.Conn whose Read and Write on a TCP connection are
// raw non-blocking system calls, still waiting for readiness through the
// runtime's netpoller (syscall.RawConn). The sockets are non-blocking, so
// such a call never blocks; making it "raw" skips the scheduler's syscall
// bookkeeping (entersyscall/exitsyscall), which on the request path costs
// more than the call itself: every blocking-syscall entry wakes sysmon,
// which then polls every 20µs and hands the P to another thread when a
// write takes longer than that, two context switches each time. Other
// connections are returned as they are.
//
// Like a net.Conn, the result allows one Read and one Write at a time,
// concurrently.
func WrapConn(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	r := &rawConn{TCPConn: tc, rc: rc}
	r.readFn, r.writeFn, r.peekFn = r.doRead, r.doWrite, r.doPeek
	return r
}

type rawConn struct {
	*net.TCPConn
	rc syscall.RawConn
	// Set at creation: the callbacks, bound once so calls don't allocate.
	readFn, writeFn func(fd uintptr) bool

	// Owned by the reading goroutine during Read.
	rbuf []byte
	rn   int
	rerr error
	mark *ReadMark // MarkReads's; nil: reads are not marked
	// Owned by the writing goroutine during Write.
	wbuf []byte
	wn   int
	werr error
	// Owned by the caller of Peek (which the connection's owner serializes
	// with its reads).
	peekFn    func(fd uintptr)
	peekBuf   [1]byte
	peekState PeekState
}

func (c *rawConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.rbuf, c.rn, c.rerr = p, 0, nil
	err := c.rc.Read(c.readFn)
	n, rerr := c.rn, c.rerr
	c.rbuf, c.rerr = nil, nil
	if err != nil {
		return n, c.opError("read", err)
	}
	return n, rerr
}

func (c *rawConn) doRead(fd uintptr) bool {
	for {
		var d0 uint64
		if c.mark != nil {
			d0 = c.mark.epoch.Load()
		}
		// recvfrom rather than read: a socket has no file position, and
		// read(2) still takes the position lock.
		n, _, e := syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&c.rbuf[0])), uintptr(len(c.rbuf)), 0, 0, 0)
		if m := c.mark; m != nil && e != syscall.EAGAIN && e != syscall.EINTR {
			// A TCP receive returns less than asked only when nothing
			// more is queued.
			m.D0, m.D1, m.Drained = d0, m.epoch.Load(), e == 0 && n > 0 && int(n) < len(c.rbuf)
		}
		switch e {
		case 0:
			c.rn = int(n)
			if n == 0 {
				c.rerr = io.EOF
			}
			return true
		case syscall.EAGAIN:
			return false // wait for readiness, then call again
		case syscall.EINTR:
			continue
		default:
			c.rerr = c.opError("read", os.NewSyscallError("read", e))
			return true
		}
	}
}

func (c *rawConn) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.wbuf, c.wn, c.werr = p, 0, nil
	err := c.rc.Write(c.writeFn)
	n, werr := c.wn, c.werr
	c.wbuf, c.werr = nil, nil
	if err != nil {
		return n, c.opError("write", err)
	}
	return n, werr
}

func (c *rawConn) doWrite(fd uintptr) bool {
	for c.wn < len(c.wbuf) {
		// sendto with MSG_NOSIGNAL: EPIPE instead of SIGPIPE.
		n, _, e := syscall.RawSyscall6(syscall.SYS_SENDTO, fd, uintptr(unsafe.Pointer(&c.wbuf[c.wn])),
			uintptr(len(c.wbuf)-c.wn), syscall.MSG_NOSIGNAL, 0, 0)
		switch e {
		case 0:
			c.wn += int(n)
		case syscall.EAGAIN:
			return false // wait for room, then call again
		case syscall.EINTR:
		default:
			c.werr = c.opError("write", os.NewSyscallError("write", e))
			return true
		}
	}
	return true
}

func (c *rawConn) opError(op string, err error) error {
	if _, ok := err.(*net.OpError); ok { //nolint:errorlint // the syscall layer's own error, never wrapped
		return err
	}
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}

// Peek reports whether a connection that should be quiet (an idle pooled
// upstream connection, or a downstream one waiting for its response) is
// still open with nothing to read: one non-blocking MSG_PEEK recv on the
// socket, which consumes nothing. It returns PeekQuiet when the receive
// queue is empty, PeekData when bytes are waiting and PeekClosed on EOF or
// a socket error. Connections not made by WrapConn report PeekQuiet. A
// wrapper that replays bytes it already read (a BufferedConn) is looked
// through: PeekData while it holds bytes, else its connection's state.
func Peek(c net.Conn) PeekState {
	for {
		if d, ok := c.(*DeadlineConn); ok {
			c = d.Conn
			continue
		}
		if b, ok := c.(BufferedConn); ok {
			if b.Buffered() > 0 {
				return PeekData
			}
			c = b.NetConn()
			continue
		}
		break
	}
	r, ok := c.(*rawConn)
	if !ok {
		return PeekQuiet
	}
	if err := r.rc.Control(r.peekFn); err != nil {
		return PeekClosed
	}
	return r.peekState
}

func (c *rawConn) doPeek(fd uintptr) {
	for {
		n, _, e := syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&c.peekBuf[0])), 1,
			syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
		switch {
		case e == syscall.EINTR:
			continue
		case e == syscall.EAGAIN:
			c.peekState = PeekQuiet
		case e != 0 || n == 0:
			c.peekState = PeekClosed
		default:
			c.peekState = PeekData
		}
		return
	}
}

// ReadMark is what a connection made by WrapConn records of its last
// receive system call for an idle watch (the cluster's upstream pool): an
// epoch of the watch's before and after it, and whether it emptied the
// socket's receive queue. Its fields are written by the connection's
// reader, during Read.
type ReadMark struct {
	// What the watch reads first: they share a cache line with what a
	// ReadMark is embedded beside (MarkReadsInto).
	D0, D1  uint64 // epoch just before and just after the receive
	Drained bool   // it returned data, less than asked: nothing more was queued
	epoch   *atomic.Uint64
}

// MarkReads makes c (made by WrapConn, or a wrapper RawSyscallConn looks
// through) record its reads against epoch; nil when c has no raw socket.
// Call it before c's first Read.
func MarkReads(c net.Conn, epoch *atomic.Uint64) *ReadMark {
	m := new(ReadMark)
	if !MarkReadsInto(c, m, epoch) {
		return nil
	}
	return m
}

// MarkReadsInto is MarkReads recording into m, which the caller keeps
// (beside the state it reads with it); false when c has no raw socket.
func MarkReadsInto(c net.Conn, m *ReadMark, epoch *atomic.Uint64) bool {
	r := unwrapRaw(c)
	if r == nil {
		return false
	}
	*m = ReadMark{epoch: epoch}
	r.mark = m
	return true
}
