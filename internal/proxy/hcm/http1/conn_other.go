//go:build !linux

package http1

import "net"

// WrapConn returns c: raw system calls are only used on Linux.
func WrapConn(c net.Conn) net.Conn { return c }
