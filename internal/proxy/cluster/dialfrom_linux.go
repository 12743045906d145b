//go:build linux

package cluster

import (
	"context"
	"net"
	"net/netip"

	"github.com/straitmesh/strait/internal/transparent"
)

// dialFrom connects to dst from src, a non-local address (IP_TRANSPARENT),
// with SO_MARK mark when not 0.
func dialFrom(ctx context.Context, src, dst netip.AddrPort, mark uint32) (net.Conn, error) {
	return transparent.DialFrom(ctx, src, dst, transparent.DialOptions{Mark: mark})
}
