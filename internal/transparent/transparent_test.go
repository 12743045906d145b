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
