package cluster

import (
	"net"
	"os"
	"syscall"
	"unsafe"
)

// awaiter sends a request on an upstream TCP socket and waits for its
// answer without a receive (UpstreamConn.WriteAwaitRead). It is the
// connection's, used by the goroutine that sends a request while no other
// reads or writes the connection.
type awaiter struct {
	rc   syscall.RawConn // the socket's, the same poller registration as its reads
	fn   func(fd uintptr) bool
	buf  []byte
	n    int
	err  error
	sent bool
}

// newAwaiter returns nc's awaiter; nil when nc is not a plain TCP
// connection (TLS, a PROXY protocol wrapper): those write with Write.
func newAwaiter(nc net.Conn) *awaiter {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	a := &awaiter{rc: rc}
	a.fn = a.step
	return a
}

// send writes p and, once all of it left, waits until the socket is
// readable, closed, or its read deadline passes, in one poller read. It
// returns how much of p left (less when the socket's buffer was full or
// the write failed). The wait's end is not reported: the Read that follows
// finds what is there.
func (a *awaiter) send(p []byte) (int, error) {
	a.buf, a.n, a.err, a.sent = p, 0, nil, false
	// An error here (a closed socket, a read deadline already passed)
	// comes before the first step: nothing was sent, and the caller's
	// Write reports it.
	_ = a.rc.Read(a.fn)
	n, err := a.n, a.err
	a.buf, a.err = nil, nil
	return n, err
}

// step is the poller read's callback: first the request (a non-blocking
// sendto, as http1's raw writes), then, woken by readiness, done.
func (a *awaiter) step(fd uintptr) bool {
	if a.sent {
		return true // readable (or woken to be told of a close)
	}
	a.sent = true
	for a.n < len(a.buf) {
		n, _, e := syscall.RawSyscall6(syscall.SYS_SENDTO, fd, uintptr(unsafe.Pointer(&a.buf[a.n])),
			uintptr(len(a.buf)-a.n), syscall.MSG_NOSIGNAL, 0, 0)
		switch e {
		case 0:
			a.n += int(n)
		case syscall.EINTR:
		case syscall.EAGAIN:
			return true // no room: the caller's Write waits for it
		default:
			a.err = &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", e)}
			return true
		}
	}
	return false // sent: wait for the answer
}
