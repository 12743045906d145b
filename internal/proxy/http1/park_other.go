//go:build !linux

package http1

import (
	"errors"
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

// ResumeConn fails: nothing is parked.
func (s *ParkSlot) ResumeConn() (net.Conn, error) {
	return nil, errors.New("resume a parked connection: parking is Linux-only")
}

// CloseFD does nothing: nothing is parked.
func (s *ParkSlot) CloseFD() {}
