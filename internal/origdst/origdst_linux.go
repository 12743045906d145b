//go:build linux

// Package origdst reads the destination a redirected TCP connection had
// before netfilter rewrote it (getsockopt SO_ORIGINAL_DST), for IPv4 and
// IPv6: what Envoy's original_dst listener filter reads
// (source/extensions/filters/listener/original_dst), and what the
// sidecar's capture rules depend on. It imports nothing of Strait's.
package origdst

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"golang.org/x/sys/unix"
)

// ip6tSOOriginalDst is IP6T_SO_ORIGINAL_DST from
// <linux/netfilter_ipv6/ip6_tables.h>; x/sys has only the IPv4 name, which
// has the same value.
const ip6tSOOriginalDst = 80

// Get returns the original destination of c, a connection accepted from a
// port that REDIRECT (or DNAT) rules feed. On a connection that was not
// redirected the kernel either fails (no conntrack entry) or returns the
// local address.
func Get(c net.Conn) (netip.AddrPort, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("original destination: %T has no file descriptor", c)
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("original destination: %w", err)
	}
	// An IPv4 connection on a dual-stack socket has an IPv4-mapped local
	// address and is tracked as IPv4.
	v4 := true
	if local, ok := c.LocalAddr().(*net.TCPAddr); ok && local.IP.To4() == nil {
		v4 = false
	}
	var (
		addr   netip.AddrPort
		sysErr error
	)
	err = raw.Control(func(fd uintptr) {
		if v4 {
			// The kernel fills a struct sockaddr_in (16 bytes); IPv6Mreq
			// is a 20-byte struct x/sys can read it into.
			var m *unix.IPv6Mreq
			if m, sysErr = unix.GetsockoptIPv6Mreq(int(fd), unix.SOL_IP, unix.SO_ORIGINAL_DST); sysErr != nil {
				return
			}
			b := m.Multiaddr
			addr = netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), binary.BigEndian.Uint16(b[2:4]))
			return
		}
		// The kernel fills a struct sockaddr_in6 (28 bytes); IPv6MTUInfo
		// starts with one.
		var info *unix.IPv6MTUInfo
		if info, sysErr = unix.GetsockoptIPv6MTUInfo(int(fd), unix.SOL_IPV6, ip6tSOOriginalDst); sysErr != nil {
			return
		}
		// sin6_port is in network byte order: read its bytes as stored.
		var port [2]byte
		binary.NativeEndian.PutUint16(port[:], info.Addr.Port)
		addr = netip.AddrPortFrom(netip.AddrFrom16(info.Addr.Addr), binary.BigEndian.Uint16(port[:]))
	})
	if err == nil {
		err = sysErr
	}
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("original destination: getsockopt SO_ORIGINAL_DST: %w", err)
	}
	return addr, nil
}
