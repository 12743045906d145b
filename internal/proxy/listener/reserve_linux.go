//go:build linux

package listener

import (
	"fmt"
	"net"
	"net/netip"
	"os"

	"golang.org/x/sys/unix"
)

// reservation is a TCP socket bound to a warming listener's address that
// does not listen yet: the address is taken (an LDS update naming an
// address in use is refused) but a client's connect is refused until the
// listener is warm. Envoy binds a listener's socket when LDS adds it and
// calls listen() only once it is warm (ListenSocketFactoryImpl's
// doFinalPreWorkerInit, source/common/listener_manager/listener_impl.cc).
// Guarded by Manager.mu.
type reservation struct {
	addr        netip.AddrPort
	transparent bool
	fd          int // -1 once closed or handed to listen
}

// reserve binds a socket to addr without listening, with the options Go's
// net package sets on a listener (SO_REUSEADDR, IPV6_V6ONLY on IPv6) and
// IP_TRANSPARENT when transparent.
func reserve(addr netip.AddrPort, transparent bool) (*reservation, error) {
	family := unix.AF_INET
	if addr.Addr().Is6() {
		family = unix.AF_INET6
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket: %w", err)
	}
	r := &reservation{addr: addr, transparent: transparent, fd: fd}
	if err := r.setup(family); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return r, nil
}

func (r *reservation) setup(family int) error {
	if err := unix.SetsockoptInt(r.fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		return fmt.Errorf("setsockopt SO_REUSEADDR: %w", err)
	}
	var sa unix.Sockaddr
	if family == unix.AF_INET6 {
		if err := unix.SetsockoptInt(r.fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1); err != nil {
			return fmt.Errorf("setsockopt IPV6_V6ONLY: %w", err)
		}
		if r.transparent {
			if err := unix.SetsockoptInt(r.fd, unix.SOL_IPV6, unix.IPV6_TRANSPARENT, 1); err != nil {
				return fmt.Errorf("setsockopt IPV6_TRANSPARENT: %w (needs CAP_NET_ADMIN)", err)
			}
		}
		sa = &unix.SockaddrInet6{Port: int(r.addr.Port()), Addr: r.addr.Addr().As16()}
	} else {
		if r.transparent {
			if err := unix.SetsockoptInt(r.fd, unix.SOL_IP, unix.IP_TRANSPARENT, 1); err != nil {
				return fmt.Errorf("setsockopt IP_TRANSPARENT: %w (needs CAP_NET_ADMIN)", err)
			}
		}
		sa = &unix.SockaddrInet4{Port: int(r.addr.Port()), Addr: r.addr.Addr().As4()}
	}
	if err := unix.Bind(r.fd, sa); err != nil {
		return fmt.Errorf("bind: %w", err)
	}
	return nil
}

// listen starts listening on the reserved socket and hands it over as a
// net.Listener; the reservation is used up.
func (r *reservation) listen() (net.Listener, error) {
	if r.fd < 0 {
		return nil, fmt.Errorf("reservation of %s is closed", r.addr)
	}
	// The kernel caps the backlog at net.core.somaxconn, as for Go's own
	// listeners.
	if err := unix.Listen(r.fd, 65535); err != nil {
		r.close()
		return nil, fmt.Errorf("listen: %w", err)
	}
	f := os.NewFile(uintptr(r.fd), "listener "+r.addr.String())
	r.fd = -1
	defer f.Close() // FileListener holds its own descriptor
	return net.FileListener(f)
}

func (r *reservation) close() {
	if r != nil && r.fd >= 0 {
		unix.Close(r.fd)
		r.fd = -1
	}
}

// boundAddr is the address the socket is bound to, with the port the
// kernel chose when the reservation asked for port 0.
func (r *reservation) boundAddr() net.Addr {
	sa, err := unix.Getsockname(r.fd)
	if err != nil {
		return net.TCPAddrFromAddrPort(r.addr)
	}
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		return &net.TCPAddr{IP: net.IP(sa.Addr[:]), Port: sa.Port}
	case *unix.SockaddrInet6:
		return &net.TCPAddr{IP: net.IP(sa.Addr[:]), Port: sa.Port}
	}
	return net.TCPAddrFromAddrPort(r.addr)
}
