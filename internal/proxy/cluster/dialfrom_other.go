//go:build !linux

package cluster

import (
	"context"
	"errors"
	"net"
	"net/netip"
)

// dialFrom is only implemented on Linux.
func dialFrom(context.Context, netip.AddrPort, netip.AddrPort, uint32) (net.Conn, error) {
	return nil, errors.New("original source: not supported on this OS")
}
