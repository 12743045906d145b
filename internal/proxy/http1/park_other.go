//go:build !linux

package http1

import (
	"log/slog"
	"net"
	"time"
)

// Parker is Linux-only (epoll); elsewhere idle connections keep their
// goroutine.
type Parker struct{}

// NewParker returns a Parker that parks nothing.
func NewParker(*slog.Logger) *Parker { return &Parker{} }

// Park reports false: the connection keeps its goroutine.
func (p *Parker) Park(*ParkSlot, net.Conn, Parked, time.Time) bool { return false }

// Take reports false: nothing is parked.
func (p *Parker) Take(*ParkSlot) bool { return false }

// Close does nothing.
func (p *Parker) Close() {}
