//go:build !linux

package cluster

import (
	"log/slog"
	"net"
)

// idleWatch is Linux-only (epoll); elsewhere idle connections are checked
// with http1.Peek when reused.
type idleWatch struct{}

func newIdleWatch(*slog.Logger) *idleWatch { return &idleWatch{} }

// watch returns nil: the connection is not watched.
func (w *idleWatch) watch(net.Conn) *watchedConn { return nil }

// forget does nothing.
func (w *idleWatch) forget(*watchedConn) {}

// close does nothing.
func (w *idleWatch) close() {}
