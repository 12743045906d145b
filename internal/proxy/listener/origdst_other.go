//go:build !linux

package listener

import (
	"errors"
	"net"
	"net/netip"
)

// SocketOriginalDst is only implemented on Linux.
func SocketOriginalDst(net.Conn) (netip.AddrPort, error) {
	return netip.AddrPort{}, errors.New("original dst: not supported on this OS")
}
