package iptables_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/iptables"
	"github.com/straitmesh/strait/internal/netns"
	"github.com/straitmesh/strait/internal/origdst"
	"github.com/straitmesh/strait/internal/testreq"
)

// seedConfig is the seed's istio-init args.
func seedConfig() iptables.Config {
	c := iptables.DefaultConfig()
	c.OutboundIPRangesInclude = "*"
	c.InboundPortsInclude = "*"
	c.InboundPortsExclude = "15090,15021,15020"
	return c
}

// podRunner runs iptables-save/-restore inside pod.
func podRunner(pod *netns.Pod) iptables.ExecRunner {
	return iptables.ExecRunner{Command: func(ctx context.Context, name string, args ...string) *exec.Cmd {
		return pod.Command(ctx, netns.ExecOptions{}, name, args...)
	}}
}

// serve answers every connection on l with one line: "NAME ORIGINAL_DST"
// (or "NAME -" when the connection was not redirected).
func serve(t *testing.T, l net.Listener, name string) {
	t.Helper()
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			dst := "-"
			if a, err := origdst.Get(c); err == nil && a.String() != c.LocalAddr().String() {
				dst = a.String()
			}
			fmt.Fprintf(c, "%s %s\n", name, dst)
			c.Close()
		}
	}()
}

func listen(t *testing.T, pod *netns.Pod, addr, name string) {
	t.Helper()
	l, err := pod.Listen(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	serve(t, l, name)
}

// ask connects with dial and returns the server's line.
func ask(ctx context.Context, dial func(context.Context, string, string) (net.Conn, error), addr string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := dial(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line), err
}

func TestRedirectInNetns(t *testing.T) {
	testreq.Binary(t, "iptables-restore", "iptables")
	n := netns.NewTestNetwork(t)
	app := n.AddTestPod(t, "app")
	peer := n.AddTestPod(t, "peer")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	rules, err := iptables.BuildRules(seedConfig())
	if err != nil {
		t.Fatal(err)
	}
	runner := podRunner(app)
	// Twice: the second run must replace, not add.
	for i := 0; i < 2; i++ {
		if input, err := iptables.Apply(ctx, runner, rules); err != nil {
			t.Fatalf("apply #%d: %v\ninput:\n%s", i+1, err, input)
		}
	}
	checkOneCopy(ctx, t, runner, rules)

	// The proxy's listeners, and the app's real servers.
	listen(t, app, ":15001", "outbound")
	listen(t, app, ":15006", "inbound")
	listen(t, app, ":15021", "health")
	listen(t, app, ":8080", "app")
	listen(t, peer, ":9000", "peer")

	appIP, peerIP := app.IP.String(), peer.IP.String()
	proxy := netns.Identity{UID: 1337, GID: 1337}
	asProxy := func(ctx context.Context, network, addr string) (net.Conn, error) {
		return app.DialContextAs(ctx, proxy, network, addr)
	}
	cases := []struct {
		name string
		dial func(context.Context, string, string) (net.Conn, error)
		addr string
		want string
	}{
		{"app to a service VIP goes to 15001", app.DialContext, "240.240.0.10:80", "outbound 240.240.0.10:80"},
		{"app to another pod goes to 15001", app.DialContext, peerIP + ":9000", "outbound " + peerIP + ":9000"},
		{"proxy (uid 1337) to another pod is not captured", asProxy, peerIP + ":9000", "peer -"},
		{"app to localhost is not captured", app.DialContext, "127.0.0.1:8080", "app -"},
		{"inbound to the app port goes to 15006", peer.DialContext, appIP + ":8080", "inbound " + appIP + ":8080"},
		{"inbound to any port goes to 15006", peer.DialContext, appIP + ":12345", "inbound " + appIP + ":12345"},
		{"inbound to excluded 15021 is not captured", peer.DialContext, appIP + ":15021", "health -"},
		{"inbound tunnel port 15008 is not captured", peer.DialContext, appIP + ":15008", "refused"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ask(ctx, tc.dial, tc.addr)
			if err != nil {
				if tc.want == "refused" && strings.Contains(err.Error(), "connection refused") {
					return
				}
				t.Fatalf("dial %s: %v", tc.addr, err)
			}
			if got != tc.want {
				t.Fatalf("dial %s: server said %q, want %q", tc.addr, got, tc.want)
			}
		})
	}

	// Re-applying with other settings replaces the rules: only 8080 is
	// captured inbound now.
	cfg := seedConfig()
	cfg.InboundPortsInclude = "8080"
	rules2, err := iptables.BuildRules(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := iptables.Apply(ctx, runner, rules2); err != nil {
		t.Fatal(err)
	}
	checkOneCopy(ctx, t, runner, rules2)
	if got, err := ask(ctx, peer.DialContext, appIP+":8080"); err != nil || got != "inbound "+appIP+":8080" {
		t.Errorf("after re-apply, inbound to 8080: %q, %v", got, err)
	}
	if _, err := ask(ctx, peer.DialContext, appIP+":12345"); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("after re-apply, inbound to 12345 was captured (err %v)", err)
	}
}

// checkOneCopy checks that the nat table holds exactly the rules, once.
func checkOneCopy(ctx context.Context, t *testing.T, runner iptables.Runner, rules iptables.Rules) {
	t.Helper()
	saved, err := runner.Save(ctx, "nat")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	total := 0
	for _, line := range strings.Split(saved, "\n") {
		if strings.HasPrefix(line, "-A ") {
			seen[line]++
			total++
		}
	}
	for line, count := range seen {
		if count != 1 {
			t.Errorf("%d copies of %q", count, line)
		}
	}
	if want := len(rules.List()); total != want {
		t.Errorf("nat table has %d rules, want %d:\n%s", total, want, saved)
	}
}
