package iptables_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/iptables"
	"github.com/straitmesh/strait/internal/netns"
	"github.com/straitmesh/strait/internal/origdst"
	"github.com/straitmesh/strait/internal/testreq"
	"github.com/straitmesh/strait/internal/transparent"
)

func needIptables(t *testing.T) {
	t.Helper()
	testreq.Binary(t, "iptables-restore", "iptables")
}

func podCommand(pod *netns.Pod) iptables.CommandFunc {
	return func(ctx context.Context, name string, args ...string) *exec.Cmd {
		return pod.Command(ctx, netns.ExecOptions{}, name, args...)
	}
}

// podSystem detects the pod's backend, as strait-agent does.
func podSystem(ctx context.Context, t *testing.T, pod *netns.Pod) iptables.System {
	t.Helper()
	b, _ := iptables.DetectBackend(ctx, podCommand(pod))
	return b.System(podCommand(pod))
}

func install(ctx context.Context, t *testing.T, pod *netns.Pod, cfg iptables.Config) iptables.Plan {
	t.Helper()
	plan, err := iptables.Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := iptables.Install(ctx, podSystem(ctx, t, pod), plan); err != nil {
		t.Fatalf("install: %v\n%s", err, rep)
	}
	return plan
}

type dialFunc func(context.Context, string, string) (net.Conn, error)

// expectAll runs ask for each case; want "refused" accepts a refused
// connection (nothing listens where an uncaptured connection goes).
func expectAll(ctx context.Context, t *testing.T, cases []captureCase) {
	t.Helper()
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
}

type captureCase struct {
	name string
	dial dialFunc
	addr string
	want string
}

func asUser(pod *netns.Pod, id netns.Identity) dialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return pod.DialContextAs(ctx, id, network, addr)
	}
}

// TestOutboundFlagsInNetns checks each outbound include/exclude flag with
// real connections: captured ones land on 15001 with SO_ORIGINAL_DST, the
// others reach the real server.
func TestOutboundFlagsInNetns(t *testing.T) {
	needIptables(t)
	n := netns.NewTestNetwork(t)
	app := n.AddTestPod(t, "app")
	peer := n.AddTestPod(t, "peer")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	listen(t, app, ":15001", "outbound")
	listen(t, peer, ":9000", "peer")
	listen(t, peer, ":3306", "peer3306")
	listen(t, peer, ":80", "peer80")
	peerIP := peer.IP.String()
	peerNet := netip.PrefixFrom(peer.IP, 32).String()
	proxyUID := asUser(app, netns.Identity{UID: 1337, GID: 2000})
	proxyGID := asUser(app, netns.Identity{UID: 2000, GID: 1337})
	user := asUser(app, netns.Identity{UID: 2000, GID: 2000})
	cap := func(addr string) string { return "outbound " + addr }

	steps := []struct {
		name  string
		mod   func(*iptables.Config)
		cases []captureCase
	}{
		{"seed: everything but the proxy", func(*iptables.Config) {}, []captureCase{
			{"app to a VIP", app.DialContext, "240.240.0.10:80", cap("240.240.0.10:80")},
			{"app to a pod", app.DialContext, peerIP + ":9000", cap(peerIP + ":9000")},
			{"other user to a pod", user, peerIP + ":9000", cap(peerIP + ":9000")},
			{"uid 1337 not captured", proxyUID, peerIP + ":9000", "peer -"},
			{"gid 1337 not captured", proxyGID, peerIP + ":9000", "peer -"},
		}},
		{"-x excludes CIDRs", func(c *iptables.Config) { c.OutboundIPRangesExclude = peerNet + ",10.255.0.0/16" }, []captureCase{
			{"excluded pod", app.DialContext, peerIP + ":9000", "peer -"},
			{"VIP still captured", app.DialContext, "240.240.0.10:80", cap("240.240.0.10:80")},
		}},
		{"-o excludes ports", func(c *iptables.Config) { c.OutboundPortsExclude = "3306" }, []captureCase{
			{"excluded port", app.DialContext, peerIP + ":3306", "peer3306 -"},
			{"other port captured", app.DialContext, peerIP + ":9000", cap(peerIP + ":9000")},
		}},
		{"-i captures only its CIDRs", func(c *iptables.Config) { c.OutboundIPRangesInclude = "240.240.0.0/16" }, []captureCase{
			{"in -i", app.DialContext, "240.240.0.10:80", cap("240.240.0.10:80")},
			{"not in -i", app.DialContext, peerIP + ":9000", "peer -"},
		}},
		{"-q captures only its ports", func(c *iptables.Config) {
			c.OutboundIPRangesInclude = ""
			c.OutboundPortsInclude = "80"
		}, []captureCase{
			{"port in -q", app.DialContext, peerIP + ":80", cap(peerIP + ":80")},
			{"port not in -q", app.DialContext, peerIP + ":9000", "peer -"},
		}},
	}
	sys := podSystem(ctx, t, app)
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			cfg := seedConfig()
			st.mod(&cfg)
			// Each step replaces the previous one's rules.
			install(ctx, t, app, cfg)
			checkNoDuplicates(ctx, t, sys)
			expectAll(ctx, t, st.cases)
		})
	}
}

// checkNoDuplicates checks that no rule appears twice in any table.
func checkNoDuplicates(ctx context.Context, t *testing.T, sys iptables.System) {
	t.Helper()
	saved, err := sys.IPv4.Save(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	table := ""
	for _, line := range strings.Split(saved, "\n") {
		if strings.HasPrefix(line, "*") {
			table = line
		}
		if strings.HasPrefix(line, "-A ") {
			if seen[table+line] {
				t.Errorf("two copies of %q in %s", line, table)
			}
			seen[table+line] = true
		}
	}
}

// TestInboundInNetns checks inbound capture in both modes: any port but -d
// reaches 15006 with the original destination (SO_ORIGINAL_DST for
// REDIRECT, the local address for TPROXY); -b captures only its ports; the
// tunnel port is left alone; outbound still goes to 15001.
func TestInboundInNetns(t *testing.T) {
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
			listen(t, app, ":15021", "health")
			listen(t, app, ":8080", "app")
			appIP, peerIP := app.IP.String(), peer.IP.String()
			expectAll(ctx, t, []captureCase{
				{"inbound to the app port", peer.DialContext, appIP + ":8080", "inbound " + appIP + ":8080 from " + peerIP},
				{"inbound to any port", peer.DialContext, appIP + ":12345", "inbound " + appIP + ":12345 from " + peerIP},
				{"inbound to -d 15021 is not captured", peer.DialContext, appIP + ":15021", "health -"},
				{"inbound tunnel port 15008 is not captured", peer.DialContext, appIP + ":15008", "refused"},
				{"outbound still captured", app.DialContext, peerIP + ":9000", "outbound " + peerIP + ":9000"},
				{"app to localhost is not captured", app.DialContext, "127.0.0.1:8080", "app -"},
				{"app to its own pod IP is not captured", app.DialContext, appIP + ":8080", "app -"},
			})

			// -b with a list captures only those ports.
			cfg.InboundPortsInclude = "8080"
			install(ctx, t, app, cfg)
			expectAll(ctx, t, []captureCase{
				{"-b port captured", peer.DialContext, appIP + ":8080", "inbound " + appIP + ":8080 from " + peerIP},
				{"port not in -b", peer.DialContext, appIP + ":15021", "health -"},
				{"port not in -b, nothing there", peer.DialContext, appIP + ":12345", "refused"},
			})
		})
	}
}

// serveInbound answers "inbound ORIGINAL_DST from CLIENT_IP": the
// original destination is SO_ORIGINAL_DST after REDIRECT, or the local
// address after TPROXY.
func serveInbound(t *testing.T, l net.Listener) {
	t.Helper()
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			fmt.Fprintf(c, "inbound %s from %s\n", originalDst(c), remoteIP(c))
			c.Close()
		}
	}()
}

func originalDst(c net.Conn) netip.AddrPort {
	if a, err := origdst.Get(c); err == nil && a.Addr().IsValid() && !a.Addr().IsUnspecified() {
		return a
	}
	a := c.LocalAddr().(*net.TCPAddr).AddrPort()
	return netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
}

func remoteIP(c net.Conn) netip.Addr {
	return c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap()
}

// TestClientIPReachesApp is issue #5679 solved: a tiny transparent proxy
// (the data plane's job, in test code) sits on 15006. In TPROXY mode it
// dials the app as the client (transparent.DialFrom: the client's IP,
// mark 1337) as the proxy user, and the app sees the client pod's IP; in
// REDIRECT mode it dials from 127.0.0.6 and the app sees 127.0.0.6. No
// self-request loop either way: the proxy's connection to the app is not
// captured again.
func TestClientIPReachesApp(t *testing.T) {
	needIptables(t)
	for _, mode := range []string{iptables.ModeTProxy, iptables.ModeRedirect} {
		t.Run(mode, func(t *testing.T) {
			n := netns.NewTestNetwork(t)
			app := n.AddTestPod(t, "app")
			client := n.AddTestPod(t, "client")
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cfg := seedConfig()
			cfg.InboundInterceptionMode = mode
			install(ctx, t, app, cfg)

			// The app says who it sees.
			appL, err := app.Listen(ctx, "tcp", ":8080")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { appL.Close() })
			go func() {
				for {
					c, err := appL.Accept()
					if err != nil {
						return
					}
					fmt.Fprintf(c, "app sees %s\n", remoteIP(c))
					c.Close()
				}
			}()
			startTinyProxy(ctx, t, app, mode)

			want := "app sees " + client.IP.String()
			if mode == iptables.ModeRedirect {
				want = "app sees 127.0.0.6"
			}
			for i := 0; i < 3; i++ { // several connections: no stale state
				got, err := ask(ctx, client.DialContext, app.IP.String()+":8080")
				if err != nil || got != want {
					t.Fatalf("request %d: %q, %v; want %q", i, got, err, want)
				}
			}
		})
	}
}

// startTinyProxy listens on 15006 in pod and relays each connection to its
// original destination: as the client (TPROXY) or from 127.0.0.6
// (REDIRECT), always as the proxy user 1337.
func startTinyProxy(ctx context.Context, t *testing.T, pod *netns.Pod, mode string) {
	t.Helper()
	var l net.Listener
	if err := pod.Do(nil, func() error {
		var err error
		if mode == iptables.ModeTProxy {
			l, err = transparent.ListenTransparent(ctx, "tcp4", ":15006")
		} else {
			l, err = (&net.ListenConfig{}).Listen(ctx, "tcp4", ":15006")
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			down, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer down.Close()
				dst := originalDst(down)
				src := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.6"), 0)
				var mark uint32
				if mode == iptables.ModeTProxy {
					src = netip.AddrPortFrom(remoteIP(down), 0)
					mark = 1337
				}
				var up net.Conn
				dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				err := pod.Do(&netns.Identity{UID: 1337, GID: 1337}, func() error {
					var err error
					up, err = transparent.DialFrom(dctx, src, dst, transparent.DialOptions{Mark: mark})
					return err
				})
				if err != nil {
					fmt.Fprintf(down, "proxy: %v\n", err)
					return
				}
				defer up.Close()
				go func() { _, _ = io.Copy(up, down) }()
				_, _ = io.Copy(down, up)
			}()
		}
	}()
}

// TestNginxSeesClientIP is the acceptance with nginx as the app:
// its access log shows the client pod's IP in TPROXY mode and 127.0.0.6 in
// REDIRECT mode, and the request succeeds.
func TestNginxSeesClientIP(t *testing.T) {
	needIptables(t)
	nginx := testreq.Binary(t, "nginx", "nginx-light", "/usr/sbin/nginx")
	for _, mode := range []string{iptables.ModeTProxy, iptables.ModeRedirect} {
		t.Run(mode, func(t *testing.T) {
			n := netns.NewTestNetwork(t)
			app := n.AddTestPod(t, "nginx")
			client := n.AddTestPod(t, "client")
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cfg := seedConfig()
			cfg.InboundInterceptionMode = mode
			install(ctx, t, app, cfg)
			startTinyProxy(ctx, t, app, mode)

			dir := t.TempDir()
			conf := fmt.Sprintf(`daemon off; master_process off; pid %[1]s/nginx.pid; error_log stderr;
events {}
http {
  access_log %[1]s/access.log;
  client_body_temp_path %[1]s; proxy_temp_path %[1]s; fastcgi_temp_path %[1]s; uwsgi_temp_path %[1]s; scgi_temp_path %[1]s;
  server { listen 8080; location / { return 200 "hello from nginx\n"; } }
}
`, dir)
			if err := writeFile(dir+"/nginx.conf", conf); err != nil {
				t.Fatal(err)
			}
			var stderr strings.Builder
			if _, err := app.Start(ctx, netns.ExecOptions{Stderr: &stderr}, nginx, "-p", dir, "-c", dir+"/nginx.conf"); err != nil {
				t.Fatal(err)
			}
			url := "http://" + app.IP.String() + ":8080/"
			var status int
			var err error
			var body []byte
			for { // until nginx listens
				status, body, err = client.HTTPGet(ctx, url)
				if err == nil && status == 200 {
					break
				}
				if ctx.Err() != nil {
					t.Fatalf("GET %s: %d %q %v\nnginx: %s", url, status, body, err, stderr.String())
				}
				select {
				case <-ctx.Done():
				case <-time.After(50 * time.Millisecond):
				}
			}
			if string(body) != "hello from nginx\n" {
				t.Fatalf("body %q", body)
			}
			want := client.IP.String()
			if mode == iptables.ModeRedirect {
				want = "127.0.0.6"
			}
			// nginx logs after it has answered: wait for the line.
			var last string
			for last == "" {
				log, _ := readFile(dir + "/access.log")
				if last = lastLine(log); last != "" {
					break
				}
				select {
				case <-ctx.Done():
					t.Fatalf("nginx wrote no access log line: %v", ctx.Err())
				case <-time.After(20 * time.Millisecond):
				}
			}
			if !strings.HasPrefix(last, want+" - - ") {
				t.Fatalf("nginx access log: %q, want the client address %s", last, want)
			}
		})
	}
}

// TestDNSCaptureInNetns: the app's UDP and TCP DNS queries to the resolver
// go to 15053; the proxy's (UID 1337) reach the resolver.
func TestDNSCaptureInNetns(t *testing.T) {
	needIptables(t)
	for _, all := range []bool{false, true} {
		t.Run(fmt.Sprintf("capture-all-dns=%v", all), func(t *testing.T) {
			n := netns.NewTestNetwork(t)
			app := n.AddTestPod(t, "app")
			dns := n.AddTestPod(t, "dns")
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cfg := seedConfig()
			cfg.RedirectDNS = true
			cfg.CaptureAllDNS = all
			cfg.DNSServers = []string{dns.IP.String()}
			install(ctx, t, app, cfg)

			// The agent runs as the proxy user (its replies are put back in
			// the app's conntrack zone by owner) and listens on localhost,
			// where REDIRECT delivers (so replies leave from 127.0.0.1).
			udpEcho(ctx, t, app, &netns.Identity{UID: 1337, GID: 1337}, "127.0.0.1:15053", "agent")
			udpEcho(ctx, t, dns, nil, ":53", "resolver")
			listen(t, app, ":15053", "agent-tcp")
			listen(t, dns, ":53", "resolver-tcp")
			resolver := dns.IP.String() + ":53"
			proxy := netns.Identity{UID: 1337, GID: 1337}

			for _, tc := range []struct {
				name string
				id   *netns.Identity
				want string
			}{
				{"app query goes to the agent", nil, "agent"},
				{"proxy query goes to the resolver", &proxy, "resolver"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					got, from, err := udpAsk(ctx, app, tc.id, resolver)
					if err != nil || got != tc.want {
						t.Fatalf("UDP %s: %q, %v; want %q", resolver, got, err, tc.want)
					}
					if from != resolver {
						t.Errorf("UDP reply from %s, want %s (un-NATed)", from, resolver)
					}
					dial := app.DialContext
					if tc.id != nil {
						dial = asUser(app, *tc.id)
					}
					got, err = ask(ctx, dial, resolver)
					want := tc.want + "-tcp -"
					if tc.want == "agent" {
						want = "agent-tcp " + resolver
					}
					if err != nil || got != want {
						t.Fatalf("TCP %s: %q, %v; want %q", resolver, got, err, want)
					}
				})
			}
		})
	}
}

func udpEcho(ctx context.Context, t *testing.T, pod *netns.Pod, id *netns.Identity, addr, name string) {
	t.Helper()
	var pc net.PacketConn
	if err := pod.Do(id, func() error {
		var err error
		pc, err = (&net.ListenConfig{}).ListenPacket(ctx, "udp4", addr)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 512)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo([]byte(name), from)
		}
	}()
}

// udpAsk sends one datagram from pod (as id) to addr and returns the
// reply and its source.
func udpAsk(ctx context.Context, pod *netns.Pod, id *netns.Identity, addr string) (string, string, error) {
	var c net.Conn
	if err := pod.Do(id, func() error {
		var err error
		c, err = (&net.Dialer{}).DialContext(ctx, "udp4", addr)
		return err
	}); err != nil {
		return "", "", err
	}
	defer c.Close()
	pc := c.(*net.UDPConn)
	deadline := time.Now().Add(5 * time.Second)
	_ = pc.SetDeadline(deadline)
	buf := make([]byte, 512)
	for time.Now().Before(deadline) {
		if _, err := pc.Write([]byte("query")); err != nil {
			return "", "", err
		}
		_ = pc.SetReadDeadline(time.Now().Add(time.Second))
		n, from, err := pc.ReadFrom(buf)
		if err == nil {
			return string(buf[:n]), from.String(), nil
		}
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			return "", "", err
		}
	}
	return "", "", errors.New("no reply")
}

var counters = regexp.MustCompile(`\[\d+:\d+\]`)

// normalizedSave is iptables-save (or another listing) without comment
// lines and counters.
func normalizedSave(ctx context.Context, t *testing.T, pod *netns.Pod, name string, args ...string) string {
	t.Helper()
	out, err := pod.Run(ctx, netns.ExecOptions{}, name, args...)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, line := range strings.Split(string(out), "\n") {
		// IPv6 link-local addresses appear on their own, after DAD.
		if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" || strings.Contains(line, "fe80::") {
			continue
		}
		b.WriteString(counters.ReplaceAllString(line, "[0:0]") + "\n")
	}
	return b.String()
}

// TestCleanupRestoresEverything applies the fullest configuration (TPROXY,
// DNS, dual-stack, --drop-invalid, -c, -k) twice on a namespace that has
// rules, ip rules and routes of its own, in each backend, and checks that
// --cleanup-only leaves iptables-save, ip6tables-save, `ip rule` and
// `ip route show table all` exactly as they were.
func TestCleanupRestoresEverything(t *testing.T) {
	needIptables(t)
	for _, backend := range []string{"nft", "legacy"} {
		t.Run(backend, func(t *testing.T) {
			testreq.Binary(t, "iptables-"+backend+"-restore", "iptables")
			n := netns.NewTestNetwork(t)
			pod := n.AddTestPod(t, "app")
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			// The namespace's own state, which must survive.
			foreign := "*mangle\n:KEEP - [0:0]\n-A PREROUTING -i eth0 -j KEEP\n-A OUTPUT -p udp -j MARK --set-mark 7\nCOMMIT\n" +
				"*nat\n:KEEP_NAT - [0:0]\n-A OUTPUT -d 192.0.2.0/24 -j KEEP_NAT\n-A POSTROUTING -o eth0 -j RETURN\nCOMMIT\n" +
				"*raw\n-A PREROUTING -p udp --dport 9 -j NOTRACK\nCOMMIT\n"
			for bin, input := range map[string]string{
				"iptables-" + backend + "-restore":  foreign,
				"ip6tables-" + backend + "-restore": strings.ReplaceAll(foreign, "192.0.2.0/24", "2001:db8::/64"),
			} {
				cmd := pod.Command(ctx, netns.ExecOptions{}, bin, "--noflush")
				cmd.Stdin = strings.NewReader(input)
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("%s: %v\n%s", bin, err, out)
				}
			}
			for _, args := range [][]string{
				{"-4", "rule", "add", "fwmark", "7", "lookup", "70"},
				{"-4", "route", "add", "local", "default", "dev", "lo", "table", "70"},
			} {
				if _, err := pod.Run(ctx, netns.ExecOptions{}, "ip", args...); err != nil {
					t.Fatal(err)
				}
			}
			if b, why := iptables.DetectBackend(ctx, podCommand(pod)); string(b) != backend {
				t.Fatalf("DetectBackend = %q (%s), want %s", b, why, backend)
			}
			listings := [][]string{
				{"iptables-" + backend + "-save"}, {"ip6tables-" + backend + "-save"},
				{"ip", "-4", "rule"}, {"ip", "-6", "rule"},
				{"ip", "-4", "route", "show", "table", "all"}, {"ip", "-6", "route", "show", "table", "all"},
				{"ip", "-6", "addr", "show", "dev", "lo"},
			}
			before := map[int]string{}
			for i, l := range listings {
				before[i] = normalizedSave(ctx, t, pod, l[0], l[1:]...)
			}

			cfg := seedConfig()
			cfg.InboundInterceptionMode = iptables.ModeTProxy
			cfg.RedirectDNS = true
			cfg.DualStack = true
			cfg.DropInvalid = true
			cfg.ExcludeInterfaces = "eth9"
			cfg.KubeVirtInterfaces = "vnet0"
			cfg.DNSServers = []string{"10.96.0.10", "fd00::a"}
			install(ctx, t, pod, cfg)
			install(ctx, t, pod, cfg)
			sys := podSystem(ctx, t, pod)
			checkNoDuplicates(ctx, t, sys)
			saved := normalizedSave(ctx, t, pod, "iptables-"+backend+"-save")
			for _, s := range []string{":ISTIO_DIVERT", "CONNMARK --save-mark", "--zone 2", ":KEEP"} {
				if !strings.Contains(saved, s) {
					t.Errorf("after install, %s lacks %q:\n%s", backend, s, saved)
				}
			}
			other := "nft"
			if backend == "nft" {
				other = "legacy"
			}
			if s := normalizedSave(ctx, t, pod, "iptables-"+other+"-save"); strings.Contains(s, "ISTIO") {
				t.Errorf("rules went to iptables-%s too:\n%s", other, s)
			}
			rules := normalizedSave(ctx, t, pod, "ip", "-4", "rule")
			if strings.Count(rules, "fwmark 0x539 lookup 133") != 1 {
				t.Errorf("ip rule after two installs:\n%s", rules)
			}
			if a := normalizedSave(ctx, t, pod, "ip", "-6", "addr", "show", "dev", "lo"); !strings.Contains(a, "::6/128") {
				t.Errorf("::6 not on lo:\n%s", a)
			}

			if rep, err := iptables.Cleanup(ctx, sys); err != nil {
				t.Fatalf("cleanup: %v\n%s", err, rep)
			}
			for i, l := range listings {
				if after := normalizedSave(ctx, t, pod, l[0], l[1:]...); after != before[i] {
					t.Errorf("%s changed:\n--- before\n%s--- after\n%s", strings.Join(l, " "), before[i], after)
				}
			}
			// A second cleanup has nothing to do.
			if rep, err := iptables.Cleanup(ctx, sys); err != nil || len(rep.Restores) != 0 || len(rep.IPCommands) != 0 {
				t.Errorf("second cleanup: %v\n%s", err, rep)
			}
		})
	}
}

// TestCheckCaptureInNetns: --run-validation's probes pass with the rules in
// place, in both modes, and fail clearly without them.
func TestCheckCaptureInNetns(t *testing.T) {
	needIptables(t)
	n := netns.NewTestNetwork(t)
	pod := n.AddTestPod(t, "app")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	opts := iptables.CheckOptions{Timeout: 2 * time.Second, Enter: func(fn func() error) error { return pod.Do(nil, fn) }}

	err := iptables.CheckCapture(ctx, seedConfig(), opts)
	var ce *iptables.CaptureError
	if !errors.As(err, &ce) || ce.Path != "outbound" {
		t.Fatalf("without rules: %v, want an outbound CaptureError", err)
	}
	for _, mode := range []string{iptables.ModeRedirect, iptables.ModeTProxy} {
		cfg := seedConfig()
		cfg.InboundInterceptionMode = mode
		install(ctx, t, pod, cfg)
		// No Timeout: each probe gets the default (5s), not none at all.
		working := opts
		working.Timeout = 0
		if err := iptables.CheckCapture(ctx, cfg, working); err != nil {
			t.Errorf("%s: %v", mode, err)
		}
	}
	// Inbound broken: capture to a port nobody will probe.
	cfg := seedConfig()
	broken := cfg
	broken.InboundCapturePort = "15007"
	install(ctx, t, pod, broken)
	// A second address after the pod's own: the probe dials the first.
	if out, err := pod.Run(ctx, netns.ExecOptions{}, "ip", "addr", "add", "10.250.0.9/32", "dev", "eth0"); err != nil {
		t.Fatalf("ip addr add: %v: %s", err, out)
	}
	err = iptables.CheckCapture(ctx, cfg, opts)
	if !errors.As(err, &ce) || ce.Path != "inbound" {
		t.Fatalf("with inbound going elsewhere: %v, want an inbound CaptureError", err)
	}
	if !strings.Contains(ce.Detail, "a connection to "+pod.IP.String()+":") {
		t.Errorf("the inbound probe did not dial the pod's address %s: %s", pod.IP, ce.Detail)
	}
	t.Log(err)
	if _, err := iptables.Cleanup(ctx, podSystem(ctx, t, pod)); err != nil {
		t.Fatal(err)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func writeFile(path, data string) error { return os.WriteFile(path, []byte(data), 0o644) }

func readFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	return string(b), err
}
