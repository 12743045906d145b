// Package transparent makes the sockets of a transparent proxy: listeners
// that accept connections TPROXY diverted to them (whatever their
// destination), and upstream connections that leave with the downstream
// client's address as their source (what Envoy's original_src listener
// filter does), marked so that policy routing brings the replies back.
//
// Both need CAP_NET_ADMIN (IP_TRANSPARENT). With TPROXY, the original
// destination of an accepted connection is simply its LocalAddr.
package transparent

import (
	"context"
	"fmt"
	"net"
	"net/netip"
)

// ListenTransparent listens on addr (e.g. ":15006") with IP_TRANSPARENT
// (and IPV6_TRANSPARENT for IPv6), so that it accepts connections the
// TPROXY target sends it. network is "tcp", "tcp4" or "tcp6".
func ListenTransparent(ctx context.Context, network, addr string) (net.Listener, error) {
	lc := net.ListenConfig{Control: control(0)}
	l, err := lc.Listen(ctx, network, addr)
	if err != nil {
		return nil, fmt.Errorf("transparent listen %s: %w", addr, err)
	}
	return l, nil
}

// DialOptions configures DialFrom.
type DialOptions struct {
	// Mark is the socket mark (SO_MARK) of the connection's packets; 0
	// leaves it unmarked. With Strait's TPROXY rules it must be the
	// -t/--inbound-tproxy-mark (1337): the mark is saved on the connection
	// and restored on the app's replies, which policy routing then
	// delivers back to this socket instead of out of eth0.
	Mark uint32
}

// DialFrom connects to dst with src as the local address, even though src
// is not an address of this host (IP_TRANSPARENT, IP_FREEBIND). src's port
// may be 0 (any free port); Envoy's original_src keeps only the IP.
func DialFrom(ctx context.Context, src, dst netip.AddrPort, opts DialOptions) (net.Conn, error) {
	network := "tcp4"
	if dst.Addr().Is6() && !dst.Addr().Is4In6() {
		network = "tcp6"
	}
	d := net.Dialer{
		LocalAddr: net.TCPAddrFromAddrPort(src),
		Control:   control(opts.Mark),
	}
	c, err := d.DialContext(ctx, network, dst.String())
	if err != nil {
		return nil, fmt.Errorf("transparent dial %s from %s: %w", dst, src, err)
	}
	return c, nil
}
