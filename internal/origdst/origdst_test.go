//go:build linux

package origdst_test

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/netns"
	"github.com/straitmesh/strait/internal/origdst"
	"github.com/straitmesh/strait/internal/testreq"
)

// In a network namespace, REDIRECT port 7001 to 7000 (IPv4 and IPv6) and
// check that a connection to 7001, accepted on 7000, reads 7001 back.
func TestGetRedirected(t *testing.T) {
	testreq.Binary(t, "iptables", "iptables")
	testreq.Binary(t, "ip6tables", "iptables")
	pod := netns.NewTestNetwork(t).AddTestPod(t, "app")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := pod.Run(ctx, netns.ExecOptions{}, "ip", "link", "set", "lo", "up"); err != nil {
		t.Fatalf("ip link set lo up: %v: %s", err, out)
	}
	for _, tc := range []struct{ bin, listen, dial, want string }{
		{"iptables", "127.0.0.1:7000", "127.0.0.1:7001", "127.0.0.1:7001"},
		{"ip6tables", "[::1]:7000", "[::1]:7001", "[::1]:7001"},
	} {
		t.Run(tc.bin, func(t *testing.T) {
			args := []string{"-t", "nat", "-A", "OUTPUT", "-p", "tcp", "--dport", "7001", "-j", "REDIRECT", "--to-ports", "7000"}
			if out, err := pod.Run(ctx, netns.ExecOptions{}, tc.bin, args...); err != nil {
				t.Fatalf("%s %v: %v: %s", tc.bin, args, err, out)
			}
			l, err := pod.Listen(ctx, "tcp", tc.listen)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			type result struct {
				addr netip.AddrPort
				err  error
			}
			got := make(chan result, 1)
			go func() {
				c, err := l.Accept()
				if err != nil {
					got <- result{err: err}
					return
				}
				defer c.Close()
				a, err := origdst.Get(c)
				got <- result{a, err}
			}()
			c, err := pod.DialContext(ctx, "tcp", tc.dial)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			r := <-got
			if r.err != nil || r.addr.String() != tc.want {
				t.Fatalf("origdst.Get = %v, %v; want %s", r.addr, r.err, tc.want)
			}
		})
	}
}

func TestGetNotASocket(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if _, err := origdst.Get(a); err == nil {
		t.Fatal("origdst.Get(net.Pipe) succeeded")
	}
}
