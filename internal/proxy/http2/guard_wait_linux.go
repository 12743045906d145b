package http2

import (
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"

	"github.com/straitmesh/strait/internal/proxy/http1"
)

// fill reads the socket under the guard into a pooled read-ahead buffer
// that it takes only once bytes are there: while the connection waits for
// its peer it holds no buffer (an idle HTTP/2 connection would otherwise
// keep guardBuffer bytes). It reads as the runtime's own Read does (a
// non-blocking receive, then the poller until the socket is readable), on
// the socket's syscall.RawConn, so the read deadline still applies. ok is
// false when the socket can't be reached that way (TLS, bytes a wrapper
// still holds): the caller reads through the connection.
func (g *Guard) fill() (n int, ok bool, err error) {
	rc := http1.RawSyscallConn(g.Conn)
	if rc == nil {
		return 0, false, nil
	}
	if g.readFn == nil {
		g.readFn = g.doRead
	}
	g.rn, g.rerr0 = 0, nil
	if err := rc.Read(g.readFn); err != nil {
		return 0, true, &net.OpError{Op: "read", Net: "tcp", Source: g.LocalAddr(), Addr: g.RemoteAddr(), Err: err}
	}
	return int(g.rn), true, g.rerr0
}

// rawSocket reports whether c reaches its TCP socket directly (what a
// parked connection must be).
func rawSocket(c net.Conn) bool { return http1.RawSyscallConn(c) != nil }

// doRead is fill's receive; false: nothing to read yet (the buffer went
// back to the pool).
func (g *Guard) doRead(fd uintptr) bool {
	if g.buf == nil {
		g.buf = getGuardBuf()
	}
	for {
		n, _, e := syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&g.buf[0])), uintptr(len(g.buf)), 0, 0, 0)
		switch e {
		case 0:
			g.rn = int32(n)
			if n == 0 {
				g.rerr0 = io.EOF
			}
			return true
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			putGuardBuf(g.buf)
			g.buf = nil
			return false
		}
		g.rerr0 = os.NewSyscallError("read", e)
		return true
	}
}
