//go:build !linux

package listener

import (
	"errors"
	"net"
	"net/netip"
)

// reservation is not available off Linux: a warming listener binds when
// it is warm.
type reservation struct {
	addr        netip.AddrPort
	transparent bool
}

func reserve(netip.AddrPort, bool) (*reservation, error) { return nil, nil }

func (r *reservation) listen() (net.Listener, error) {
	return nil, errors.New("socket reservations are only supported on Linux")
}

func (r *reservation) close() {}

func (r *reservation) boundAddr() net.Addr { return net.TCPAddrFromAddrPort(r.addr) }
