//go:build linux

package listener

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"

	"golang.org/x/sys/unix"
)

// ip6tSOOriginalDst is IP6T_SO_ORIGINAL_DST (same value as SO_ORIGINAL_DST).
const ip6tSOOriginalDst = 80

// SocketOriginalDst reads the pre-NAT destination of a redirected TCP
// connection with getsockopt(SO_ORIGINAL_DST) (SOL_IP for IPv4,
// SOL_IPV6/IP6T_SO_ORIGINAL_DST for IPv6).
func SocketOriginalDst(c net.Conn) (netip.AddrPort, error) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return netip.AddrPort{}, errors.New("original dst: not a TCP connection")
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, err
	}
	local, _ := c.LocalAddr().(*net.TCPAddr)
	v4 := local == nil || local.IP.To4() != nil
	var out netip.AddrPort
	var serr error
	cerr := raw.Control(func(fd uintptr) {
		if v4 {
			// sockaddr_in is 16 bytes; IPv6Mreq is a convenient 20-byte buffer.
			m, err := unix.GetsockoptIPv6Mreq(int(fd), unix.SOL_IP, unix.SO_ORIGINAL_DST)
			if err != nil {
				serr = err
				return
			}
			b := m.Multiaddr[:]
			port := binary.BigEndian.Uint16(b[2:4])
			out = netip.AddrPortFrom(netip.AddrFrom4([4]byte{b[4], b[5], b[6], b[7]}), port)
			return
		}
		info, err := unix.GetsockoptIPv6MTUInfo(int(fd), unix.SOL_IPV6, ip6tSOOriginalDst)
		if err != nil {
			serr = err
			return
		}
		sa := info.Addr
		port := binary.BigEndian.Uint16((*[2]byte)(portBytes(&sa.Port))[:])
		out = netip.AddrPortFrom(netip.AddrFrom16(sa.Addr), port)
	})
	if cerr != nil {
		return netip.AddrPort{}, cerr
	}
	if serr != nil {
		return netip.AddrPort{}, serr
	}
	return out, nil
}

func portBytes(p *uint16) *[2]byte {
	// Port is stored in network byte order in the raw sockaddr.
	var b [2]byte
	binary.NativeEndian.PutUint16(b[:], *p)
	return &b
}
