//go:build !linux

package http2

import "net"

// fill is Linux's only: elsewhere the guard reads through the connection.
func (g *Guard) fill() (n int, ok bool, err error) { return 0, false, nil }

// rawSocket reports false: parking is Linux-only.
func rawSocket(net.Conn) bool { return false }
