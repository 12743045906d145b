//go:build !linux

package idlewatch

import (
	"log/slog"
	"net"
)

// Watch is Linux-only (epoll); elsewhere idle connections are checked
// with http1.Peek when reused.
type Watch struct{}

// New returns a watch that watches nothing.
func New(*slog.Logger) *Watch { return &Watch{} }

// Add returns nil: the connection is not watched.
func (w *Watch) Add(net.Conn) *Conn { return nil }

// AddTo returns false: the connection is not watched.
func (w *Watch) AddTo(net.Conn, *Conn) bool { return false }

// forget does nothing.
func (w *Watch) forget(*Conn) {}

// Close does nothing.
func (w *Watch) Close() {}
