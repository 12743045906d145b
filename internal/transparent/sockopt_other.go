//go:build !linux

package transparent

import (
	"errors"
	"net"
	"syscall"
)

// errNotLinux: IP_TRANSPARENT is Linux's.
var errNotLinux = errors.New("transparent sockets are only supported on Linux")

func control(uint32) func(string, string, syscall.RawConn) error {
	return func(string, string, syscall.RawConn) error { return errNotLinux }
}

// ListenerControl is only implemented on Linux.
func ListenerControl(string, string, syscall.RawConn) error { return errNotLinux }

// SetListener is only implemented on Linux.
func SetListener(net.Listener, bool) error { return errNotLinux }
