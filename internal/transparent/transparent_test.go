package transparent_test

import (
	"context"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/straitmesh/strait/internal/testreq"
	"github.com/straitmesh/strait/internal/transparent"
)

// TestListenAndDialFrom checks the socket options on loopback; the real
// use (TPROXY, a non-local source) is tested with the rules in
// internal/iptables (TestClientIPReachesApp).
func TestListenAndDialFrom(t *testing.T) {
	testreq.Root(t, "IP_TRANSPARENT needs CAP_NET_ADMIN")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := transparent.ListenTransparent(ctx, "tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if v := sockopt(t, l.(syscall.Conn), unix.SOL_IP, unix.IP_TRANSPARENT); v != 1 {
		t.Errorf("listener IP_TRANSPARENT = %d", v)
	}
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			accepted <- c
		}
		close(accepted)
	}()
	src := netip.MustParseAddrPort("127.0.0.7:0")
	dst := l.Addr().(*net.TCPAddr).AddrPort()
	c, err := transparent.DialFrom(ctx, src, dst, transparent.DialOptions{Mark: 1337})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if v := sockopt(t, c.(syscall.Conn), unix.SOL_SOCKET, unix.SO_MARK); v != 1337 {
		t.Errorf("SO_MARK = %d, want 1337", v)
	}
	select {
	case a := <-accepted:
		if a == nil {
			t.Fatal("accept failed")
		}
		defer a.Close()
		if got := a.RemoteAddr().(*net.TCPAddr).AddrPort().Addr(); got != src.Addr() {
			t.Errorf("server sees %s, want %s", got, src.Addr())
		}
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
}

// TestListenerControl: a listener with transparent: true gets
// IP_TRANSPARENT (IPV6_TRANSPARENT on tcp6) before bind, and SetListener
// turns it off and on again on the bound socket (an in-place listener
// update), without IP_FREEBIND.
func TestListenerControl(t *testing.T) {
	testreq.Root(t, "IP_TRANSPARENT needs CAP_NET_ADMIN")
	for _, tc := range []struct {
		network, addr string
		level, opt    int
	}{
		{"tcp4", "127.0.0.1:0", unix.SOL_IP, unix.IP_TRANSPARENT},
		{"tcp6", "[::1]:0", unix.SOL_IPV6, unix.IPV6_TRANSPARENT},
	} {
		t.Run(tc.network, func(t *testing.T) {
			lc := net.ListenConfig{Control: transparent.ListenerControl}
			l, err := lc.Listen(context.Background(), tc.network, tc.addr)
			if err != nil {
				if tc.network == "tcp6" {
					testreq.Missing(t, "no IPv6 loopback: %v", err)
				}
				t.Fatalf("listen %s: %v", tc.network, err)
			}
			defer l.Close()
			if v := sockopt(t, l.(syscall.Conn), tc.level, tc.opt); v != 1 {
				t.Errorf("after bind: transparent = %d, want 1", v)
			}
			if tc.network == "tcp4" {
				if v := sockopt(t, l.(syscall.Conn), unix.SOL_IP, unix.IP_FREEBIND); v != 0 {
					t.Errorf("IP_FREEBIND = %d, want 0 on a listener", v)
				}
			}
			for _, on := range []bool{false, true, false} {
				if err := transparent.SetListener(l, on); err != nil {
					t.Fatal(err)
				}
				want := 0
				if on {
					want = 1
				}
				if v := sockopt(t, l.(syscall.Conn), tc.level, tc.opt); v != want {
					t.Errorf("SetListener(%v): transparent = %d", on, v)
				}
			}
		})
	}
}

func sockopt(t *testing.T, c syscall.Conn, level, opt int) int {
	t.Helper()
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var v int
	var serr error
	if err := raw.Control(func(fd uintptr) { v, serr = unix.GetsockoptInt(int(fd), level, opt) }); err != nil {
		t.Fatal(err)
	}
	if serr != nil {
		t.Fatal(serr)
	}
	return v
}
