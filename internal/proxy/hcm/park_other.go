//go:build !linux

package hcm

import (
	"log/slog"
	"time"
)

// parker is Linux-only (epoll); elsewhere idle connections keep their
// goroutine.
type parker struct{}

func newParker(*slog.Logger) *parker           { return &parker{} }
func (p *parker) park(*h1conn, time.Time) bool { return false }
func (p *parker) take(*h1conn) bool            { return false }
func (p *parker) close()                       {}
