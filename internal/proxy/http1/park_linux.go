package http1

import (
	"net"
	"syscall"
)

// RawConner is a connection wrapper that can hand out the connection it
// wraps when reading it directly is safe (nothing of its own is buffered).
// RawSyscallConn looks through such wrappers.
type RawConner interface {
	RawConn() net.Conn // nil while the wrapper holds unread bytes
}

// RawSyscallConn returns the syscall.RawConn of the TCP socket under c (a
// connection made by WrapConn, possibly inside a DeadlineConn or a
// RawConner), or nil when there is none or a wrapper still buffers bytes.
func RawSyscallConn(c net.Conn) syscall.RawConn {
	if r := unwrapRaw(c); r != nil {
		return r.rc
	}
	return nil
}

// unwrapRaw finds the connection made by WrapConn under c's wrappers.
func unwrapRaw(c net.Conn) *rawConn {
	for c != nil {
		switch w := c.(type) {
		case *rawConn:
			return w
		case *DeadlineConn:
			c = w.Conn
		case RawConner:
			c = w.RawConn()
		default:
			return nil
		}
	}
	return nil
}
