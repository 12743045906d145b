//go:build !linux

package http1

import (
	"net"
	"sync/atomic"
)

// WrapConn returns c: raw system calls are only used on Linux.
func WrapConn(c net.Conn) net.Conn { return c }

// Peek reports PeekQuiet: without raw sockets there is no cheap check.
func Peek(c net.Conn) PeekState { return PeekQuiet }

// RawConner is a connection wrapper that can hand out the connection it
// wraps when reading it directly is safe (see the Linux build).
type RawConner interface {
	RawConn() net.Conn
}

// ReadMark is what a raw connection records of its reads (see the Linux
// build).
type ReadMark struct {
	D0, D1  uint64
	Drained bool
}

// MarkReads returns nil: there are no raw connections.
func MarkReads(net.Conn, *atomic.Uint64) *ReadMark { return nil }

// MarkReadsInto returns false: there are no raw connections.
func MarkReadsInto(net.Conn, *ReadMark, *atomic.Uint64) bool { return false }
