package iptables_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/iptables"
	"github.com/straitmesh/strait/internal/netns"
	"github.com/straitmesh/strait/internal/transparent"
)

// linkLocal waits (bounded by ctx) until the pod's eth0 has a usable
// IPv6 link-local address (DAD done) and returns it with the zone of
// the peer's interface on the same link, for dialing from there.
func linkLocal(ctx context.Context, t *testing.T, pod *netns.Pod) netip.Addr {
	t.Helper()
	for {
		out, err := pod.Run(ctx, netns.ExecOptions{}, "ip", "-6", "-o", "addr", "show", "dev", "eth0", "scope", "link")
		if err == nil {
			for _, line := range strings.Split(string(out), "\n") {
				f := strings.Fields(line)
				if len(f) < 4 || f[2] != "inet6" || strings.Contains(line, "tentative") {
					continue
				}
				if p, err := netip.ParsePrefix(f[3]); err == nil {
					return p.Addr()
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("pod %s: no usable IPv6 link-local address on eth0 (ip said %q, %v)", pod.Name, out, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ifIndex is the index of the pod's interface name, a numeric zone that
// needs no lookup in the test process's own namespace.
func ifIndex(ctx context.Context, t *testing.T, pod *netns.Pod, name string) string {
	t.Helper()
	out, err := pod.Run(ctx, netns.ExecOptions{}, "ip", "-o", "link", "show", "dev", name)
	if err != nil {
		t.Fatalf("pod %s: ip link show %s: %v", pod.Name, name, err)
	}
	idx, _, ok := strings.Cut(string(out), ":")
	if _, err := strconv.Atoi(idx); !ok || err != nil {
		t.Fatalf("pod %s: ip link show %s said %q", pod.Name, name, out)
	}
	return idx
}

// onLink is [addr%zone]:port.
func onLink(addr netip.Addr, zone string, port int) string {
	return net.JoinHostPort(addr.WithZone(zone).String(), strconv.Itoa(port))
}

// expectRefused checks that a connection to addr is refused at once
// (ECONNREFUSED: the ICMPv6 port unreachable of the guard's REJECT), not
// answered by whatever listens there.
func expectRefused(ctx context.Context, t *testing.T, dial dialFunc, addr, what string) {
	t.Helper()
	got, err := ask(ctx, dial, addr)
	if err == nil {
		t.Errorf("%s: %s answered %q; it must be refused", what, addr, got)
		return
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("%s: dial %s: %v, want connection refused", what, addr, err)
	}
}

// TestIPv6LinkLocalRefusedInNetns is issue #20 item 1: without
// --dual-stack only IPv4 is captured, yet the pod's eth0 has an IPv6
// link-local address. A plaintext connection from another namespace on
// the link to [fe80::…%eth0]:8080 reached the app directly, past the
// proxy (and its mTLS, authorization and JWT checks). Now it is refused,
// in both interception modes, while IPv4 capture, the app's own IPv6
// loopback and the app calling itself keep working; the app's IPv6
// connections out are refused too; and cleanup opens IPv6 again.
func TestIPv6LinkLocalRefusedInNetns(t *testing.T) {
	needIptables(t)
	for _, mode := range []string{iptables.ModeRedirect, iptables.ModeTProxy} {
		t.Run(mode, func(t *testing.T) {
			n := netns.NewTestNetwork(t)
			app := n.AddTestPod(t, "app")
			peer := n.AddTestPod(t, "peer")
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			cfg := seedConfig()
			cfg.InboundInterceptionMode = mode
			install(ctx, t, app, cfg)
			install(ctx, t, app, cfg) // idempotent

			var l net.Listener
			if err := app.Do(nil, func() error {
				var err error
				l, err = transparent.ListenTransparent(ctx, "tcp4", ":15006")
				return err
			}); err != nil {
				t.Fatal(err)
			}
			serveInbound(t, l)
			listen(t, app, ":15001", "outbound")
			// Dual-stack listeners ([::]), as most servers open them.
			listen(t, app, ":8080", "app")
			listen(t, app, ":15021", "health")
			listen(t, peer, ":9000", "peer")

			appLL, peerLL := linkLocal(ctx, t, app), linkLocal(ctx, t, peer)
			appLink := onLink(appLL, ifIndex(ctx, t, peer, "eth0"), 8080)
			appIP, peerIP := app.IP.String(), peer.IP.String()

			// The point of the test: over link-local IPv6 the app is not
			// reachable, on the app port, on an excluded port (IPv4 does
			// not capture 15021, but it does not let IPv6 in either) and
			// on the proxy's own ports.
			for _, port := range []int{8080, 15021, 15006, 15001} {
				expectRefused(ctx, t, peer.DialContext, onLink(appLL, ifIndex(ctx, t, peer, "eth0"), port),
					fmt.Sprintf("peer to the app's link-local port %d", port))
			}
			// Nor does the app get out over IPv6 past the proxy.
			expectRefused(ctx, t, app.DialContext, onLink(peerLL, ifIndex(ctx, t, app, "eth0"), 9000),
				"app to the peer's link-local address")

			expectAll(ctx, t, []captureCase{
				{"IPv4 inbound still captured", peer.DialContext, appIP + ":8080", "inbound " + appIP + ":8080 from " + peerIP},
				{"IPv4 outbound still captured", app.DialContext, peerIP + ":9000", "outbound " + peerIP + ":9000"},
				{"::1 (health checks, the agent) still works", app.DialContext, "[::1]:15021", "health -"},
			})
			// Over lo; the server prints conntrack's destination, which
			// exists only when some ip6tables rule tracks connections.
			self := onLink(appLL, ifIndex(ctx, t, app, "eth0"), 8080)
			if got, err := ask(ctx, app.DialContext, self); err != nil || !strings.HasPrefix(got, "app ") {
				t.Errorf("the app calling its own link-local address %s: %q, %v; want the app", self, got, err)
			}

			// Cleanup removes the guard with the rest: IPv6 reaches the
			// app again (what it did before the guard existed).
			if rep, err := iptables.Cleanup(ctx, podSystem(ctx, t, app)); err != nil {
				t.Fatalf("cleanup: %v\n%s", err, rep)
			}
			if saved := normalizedSave(ctx, t, app, "ip6tables-save"); strings.Contains(saved, iptables.OwnerComment) {
				t.Errorf("ip6tables rules left after cleanup:\n%s", saved)
			}
			if got, err := ask(ctx, peer.DialContext, appLink); err != nil || !strings.HasPrefix(got, "app ") {
				t.Errorf("after cleanup, peer to %s: %q, %v; want the app", appLink, got, err)
			}
		})
	}
}
