package transparent

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/straitmesh/strait/internal/testreq"
)

// TestControlOptions: each socket control sets exactly the options its
// kind needs, on IPv4 and IPv6 sockets: an upstream (DialFrom) socket
// IP_TRANSPARENT and IP_FREEBIND (their IPv6 forms on tcp6, with
// IP_TRANSPARENT for a dual-stack socket's IPv4) and SO_MARK only when a
// mark is given; a listener IP_TRANSPARENT (IPV6_TRANSPARENT) alone.
func TestControlOptions(t *testing.T) {
	testreq.Root(t, "IP_TRANSPARENT needs CAP_NET_ADMIN")
	type opt struct {
		level, opt int
		name       string
	}
	var (
		ipT    = opt{unix.SOL_IP, unix.IP_TRANSPARENT, "IP_TRANSPARENT"}
		ipF    = opt{unix.SOL_IP, unix.IP_FREEBIND, "IP_FREEBIND"}
		ip6T   = opt{unix.SOL_IPV6, unix.IPV6_TRANSPARENT, "IPV6_TRANSPARENT"}
		ip6F   = opt{unix.SOL_IPV6, unix.IPV6_FREEBIND, "IPV6_FREEBIND"}
		soMark = opt{unix.SOL_SOCKET, unix.SO_MARK, "SO_MARK"}
	)
	for _, tc := range []struct {
		name, network, addr string
		control             func(string, string, syscall.RawConn) error
		want                map[opt]int
	}{
		{"dial4", "tcp4", "127.0.0.1:0", control(0), map[opt]int{ipT: 1, ipF: 1, soMark: 0}},
		{"dial4 mark", "tcp4", "127.0.0.1:0", control(1337), map[opt]int{ipT: 1, ipF: 1, soMark: 1337}},
		{"dial6 mark", "tcp6", "[::1]:0", control(7), map[opt]int{ip6T: 1, ip6F: 1, ipT: 1, soMark: 7}},
		{"dial6", "tcp6", "[::1]:0", control(0), map[opt]int{ip6T: 1, ip6F: 1, soMark: 0}},
		{"listener4", "tcp4", "127.0.0.1:0", ListenerControl, map[opt]int{ipT: 1, ipF: 0, soMark: 0}},
		{"listener6", "tcp6", "[::1]:0", ListenerControl, map[opt]int{ip6T: 1, ip6F: 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lc := net.ListenConfig{Control: tc.control}
			l, err := lc.Listen(context.Background(), tc.network, tc.addr)
			if err != nil {
				if tc.network == "tcp6" {
					testreq.Missing(t, "no IPv6 loopback: %v", err)
				}
				t.Fatal(err)
			}
			defer l.Close()
			raw, err := l.(syscall.Conn).SyscallConn()
			if err != nil {
				t.Fatal(err)
			}
			for o, want := range tc.want {
				var got int
				var gerr error
				if err := raw.Control(func(fd uintptr) { got, gerr = unix.GetsockoptInt(int(fd), o.level, o.opt) }); err != nil {
					t.Fatal(err)
				}
				if gerr != nil {
					t.Fatalf("getsockopt %s: %v", o.name, gerr)
				}
				if got != want {
					t.Errorf("%s = %d, want %d", o.name, got, want)
				}
			}
		})
	}
}

// fdConn is a syscall.RawConn over a descriptor that is not a socket, so
// that every setsockopt fails (ENOTSOCK), or whose Control fails itself.
type fdConn struct {
	fd  uintptr
	err error
}

func (c fdConn) Control(f func(uintptr)) error {
	if c.err != nil {
		return c.err
	}
	f(c.fd)
	return nil
}
func (fdConn) Read(func(uintptr) bool) error  { return nil }
func (fdConn) Write(func(uintptr) bool) error { return nil }

// TestControlErrors: a socket option that cannot be set fails the bind
// with an error naming the option (and the capability it needs), on
// every network; so does a descriptor the runtime cannot reach.
func TestControlErrors(t *testing.T) {
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	notSock := fdConn{fd: f.Fd()}
	for _, tc := range []struct {
		name string
		run  func(syscall.RawConn) error
		want string
	}{
		{"dial4", func(c syscall.RawConn) error { return control(0)("tcp4", "", c) }, "setsockopt IP_TRANSPARENT"},
		{"dial6", func(c syscall.RawConn) error { return control(0)("tcp6", "", c) }, "setsockopt IPV6_TRANSPARENT"},
		{"udp6", func(c syscall.RawConn) error { return control(0)("udp6", "", c) }, "setsockopt IPV6_TRANSPARENT"},
		{"listener4", func(c syscall.RawConn) error { return ListenerControl("tcp4", "", c) }, "setsockopt IP_TRANSPARENT"},
		{"listener6", func(c syscall.RawConn) error { return ListenerControl("tcp6", "", c) }, "setsockopt IPV6_TRANSPARENT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run(notSock)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "CAP_NET_ADMIN") {
				t.Errorf("err = %v; want one naming %s and CAP_NET_ADMIN", err, tc.want)
			}
			cerr := syscall.EBADF
			if err := tc.run(fdConn{err: cerr}); !errors.Is(err, cerr) {
				t.Errorf("Control failing: err = %v, want %v", err, cerr)
			}
		})
	}
}

// TestSetListenerNoSocket: a listener without a socket is refused.
func TestSetListenerNoSocket(t *testing.T) {
	if err := SetListener(noSocketListener{}, true); err == nil || !strings.Contains(err.Error(), "no socket") {
		t.Errorf("err = %v", err)
	}
}

type noSocketListener struct{ net.Listener }
