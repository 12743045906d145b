//go:build !linux

package listener

import (
	"errors"
	"net"
	"syscall"
)

var errTransparent = errors.New("transparent listeners are only supported on Linux")

func transparentControl(string, string, syscall.RawConn) error { return errTransparent }

func setTransparent(net.Listener, bool) error { return errTransparent }
