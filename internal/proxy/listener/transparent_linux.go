//go:build linux

package listener

import (
	"errors"
	"fmt"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// transparentControl sets IP_TRANSPARENT (and IPV6_TRANSPARENT on tcp6
// sockets) before bind, as Envoy does for a listener with transparent: true.
func transparentControl(network, _ string, c syscall.RawConn) error {
	return setTransparentRaw(network == "tcp6", c, 1)
}

// setTransparent turns IP_TRANSPARENT on or off on a bound listener.
func setTransparent(ln net.Listener, on bool) error {
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
