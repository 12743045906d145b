package iptables

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"golang.org/x/sys/unix"
)

// soOriginalDst is SO_ORIGINAL_DST from <linux/netfilter_ipv4.h>.
const soOriginalDst = 80

// OriginalDst returns the destination a connection accepted on a port that
// REDIRECT rules feed had before the rewrite (SO_ORIGINAL_DST, IPv4). This
// is what Envoy's original_dst listener filter reads.
func OriginalDst(c net.Conn) (netip.AddrPort, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("original destination: %T has no file descriptor", c)
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("original destination: %w", err)
	}
	var (
		addr   netip.AddrPort
		sysErr error
	)
	err = raw.Control(func(fd uintptr) {
		// The kernel fills a struct sockaddr_in (16 bytes); IPv6Mreq is a
		// 20-byte struct x/sys can read it into.
		var mreq *unix.IPv6Mreq
		mreq, sysErr = unix.GetsockoptIPv6Mreq(int(fd), unix.SOL_IP, soOriginalDst)
		if sysErr != nil {
			return
		}
		b := mreq.Multiaddr
		port := binary.BigEndian.Uint16(b[2:4])
		addr = netip.AddrPortFrom(netip.AddrFrom4([4]byte{b[4], b[5], b[6], b[7]}), port)
	})
	if err == nil {
		err = sysErr
	}
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("original destination: getsockopt SO_ORIGINAL_DST: %w", err)
	}
	return addr, nil
}
