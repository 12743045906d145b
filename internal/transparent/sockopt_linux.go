//go:build linux

package transparent

import (
	"errors"
	"fmt"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// control sets the socket options before bind: IP_TRANSPARENT, IP_FREEBIND
// (or their IPv6 forms) and SO_MARK when mark is not 0.
func control(mark uint32) func(network, address string, c syscall.RawConn) error {
	return func(network, _ string, c syscall.RawConn) error {
		var sysErr error
		err := c.Control(func(fd uintptr) {
			s := int(fd)
			if network == "tcp6" || network == "udp6" {
				sysErr = setsockopt(s, unix.SOL_IPV6, unix.IPV6_TRANSPARENT, "IPV6_TRANSPARENT", 1)
				if sysErr == nil {
					sysErr = setsockopt(s, unix.SOL_IPV6, unix.IPV6_FREEBIND, "IPV6_FREEBIND", 1)
				}
			}
			// A tcp6 socket may carry IPv4 too (dual-stack wildcard).
			if sysErr == nil {
				err := setsockopt(s, unix.SOL_IP, unix.IP_TRANSPARENT, "IP_TRANSPARENT", 1)
				if network != "tcp6" && network != "udp6" {
					sysErr = err
				}
			}
			if sysErr == nil && network != "tcp6" && network != "udp6" {
				sysErr = setsockopt(s, unix.SOL_IP, unix.IP_FREEBIND, "IP_FREEBIND", 1)
			}
			if sysErr == nil && mark != 0 {
				sysErr = setsockopt(s, unix.SOL_SOCKET, unix.SO_MARK, "SO_MARK", int(mark))
			}
		})
		if err != nil {
			return err
		}
		return sysErr
	}
}

func setsockopt(fd, level, opt int, name string, value int) error {
	if err := unix.SetsockoptInt(fd, level, opt, value); err != nil {
		return fmt.Errorf("setsockopt %s: %w (needs CAP_NET_ADMIN)", name, err)
	}
	return nil
}

// ListenerControl sets IP_TRANSPARENT (and IPV6_TRANSPARENT on tcp6
// sockets) before bind, as a net.ListenConfig's Control, as Envoy does for a
// listener with transparent: true (no IP_FREEBIND: the listener binds a
// local address).
func ListenerControl(network, _ string, c syscall.RawConn) error {
	return setTransparentRaw(network == "tcp6", c, 1)
}

// SetListener turns IP_TRANSPARENT on or off on a bound listener.
func SetListener(ln net.Listener, on bool) error {
	sc, ok := ln.(syscall.Conn)
	if !ok {
		return errors.New("listener has no socket")
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	v6 := false
	if a, ok := ln.Addr().(*net.TCPAddr); ok {
		v6 = a.IP.To4() == nil
	}
	v := 0
	if on {
		v = 1
	}
	return setTransparentRaw(v6, raw, v)
}

func setTransparentRaw(v6 bool, c syscall.RawConn, v int) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		if v6 {
			if err := unix.SetsockoptInt(int(fd), unix.SOL_IPV6, unix.IPV6_TRANSPARENT, v); err != nil {
				serr = fmt.Errorf("setsockopt IPV6_TRANSPARENT: %w (needs CAP_NET_ADMIN)", err)
			}
			return
		}
		if err := unix.SetsockoptInt(int(fd), unix.SOL_IP, unix.IP_TRANSPARENT, v); err != nil {
			serr = fmt.Errorf("setsockopt IP_TRANSPARENT: %w (needs CAP_NET_ADMIN)", err)
		}
	})
	if err != nil {
		return err
	}
	return serr
}
