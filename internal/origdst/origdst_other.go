//go:build !linux

// Package origdst reads the destination a redirected TCP connection had
// before netfilter rewrote it; only Linux has one.
package origdst

import (
	"errors"
	"net"
	"net/netip"
)

// Get fails: SO_ORIGINAL_DST is Linux's.
func Get(net.Conn) (netip.AddrPort, error) {
	return netip.AddrPort{}, errors.New("original destination: SO_ORIGINAL_DST is only available on Linux")
}
