package iptables

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/testreq"
	"golang.org/x/sys/unix"
)

func TestProbePort(t *testing.T) {
	cases := []struct {
		name     string
		def      uint16
		include  []string
		excludes [][]string
		want     uint16
	}{
		{"default", 15002, nil, nil, 15002},
		{"first include", 15002, []string{"80", "443"}, nil, 80},
		{"first include not excluded", 15002, []string{"80", "443"}, [][]string{{"80"}}, 443},
		{"excluded by a later list", 15002, []string{"80", "443"}, [][]string{{"8080"}, {"80"}}, 443},
		{"default moved past excludes", 15002, nil, [][]string{{"15002", "15003"}, {"15004"}}, 15005},
		{"every include excluded", 15002, []string{"80"}, [][]string{{"80", "15002"}}, 15003},
		{"wraps to def", 65535, nil, [][]string{{"65535"}}, 65535},
	}
	for _, tc := range cases {
		if got := probePort(tc.def, tc.include, tc.excludes...); got != tc.want {
			t.Errorf("%s: probePort = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestOutboundProbeAddr(t *testing.T) {
	pfx := func(ss ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, s := range ss {
			out = append(out, netip.MustParsePrefix(s))
		}
		return out
	}
	cases := []struct {
		name             string
		include, exclude []netip.Prefix
		local            []netip.Prefix
		want             string // "" = none
	}{
		{"first include, next address", pfx("10.96.0.0/12", "240.240.0.0/16"), nil, nil, "10.96.0.1"},
		{"/31 and /32 are used as they are", pfx("10.0.0.8/31"), nil, nil, "10.0.0.8"},
		{"/32", pfx("10.0.0.9/32"), nil, nil, "10.0.0.9"},
		{"/30 is not", pfx("10.0.0.8/30"), nil, nil, "10.0.0.9"},
		{"excluded include skipped", pfx("10.96.0.0/12", "240.240.0.0/16"), pfx("10.96.0.0/16"), nil, "240.240.0.1"},
		{"own address skipped", pfx("10.96.0.0/12", "240.240.0.0/16"), nil, pfx("10.96.0.1/24"), "240.240.0.1"},
		{"loopback include skipped", pfx("127.0.0.0/8", "240.240.0.0/16"), nil, nil, "240.240.0.1"},
		{"only loopback", pfx("127.0.0.1/32"), nil, nil, ""},
		{"all excluded", pfx("10.96.0.0/12"), pfx("10.0.0.0/8"), nil, ""},
		// '*': the last host of the pod's own subnet.
		{"subnet last host", nil, nil, pfx("127.0.0.1/8", "10.1.2.3/24", "fd00::1/64", "fd01::1/16"), "10.1.2.254"},
		{"subnet last host is ours", nil, nil, pfx("10.1.2.254/24"), "10.1.2.253"},
		{"/30 subnet", nil, nil, pfx("10.1.2.1/30"), "10.1.2.2"},
		{"/31 and /32 subnets have no other host", nil, nil, pfx("10.1.2.1/31", "10.1.3.1/32"), ""},
		{"subnet excluded", nil, pfx("10.1.0.0/16"), pfx("10.1.2.3/24", "10.2.0.5/16"), "10.2.255.254"},
	}
	for _, tc := range cases {
		p := &parsed{v4: familyRanges{include: tc.include, exclude: tc.exclude}}
		got, ok := outboundProbeAddr(p, tc.local)
		if tc.want == "" {
			if ok {
				t.Errorf("%s: got %s, want none", tc.name, got)
			}
			continue
		}
		if !ok || got.String() != tc.want {
			t.Errorf("%s: got %s %v, want %s", tc.name, got, ok, tc.want)
		}
	}
}

func TestLastAddr(t *testing.T) {
	for pfx, want := range map[string]string{
		"10.1.2.0/24": "10.1.2.255", "10.0.0.0/8": "10.255.255.255", "0.0.0.0/0": "255.255.255.255",
		"10.1.2.4/30": "10.1.2.7", "10.1.2.3/32": "10.1.2.3", "172.16.0.0/12": "172.31.255.255",
	} {
		if got := lastAddr(netip.MustParsePrefix(pfx)); got.String() != want {
			t.Errorf("lastAddr(%s) = %s, want %s", pfx, got, want)
		}
	}
}

// TestCheckCaptureChoosesPaths: which paths CheckCapture probes follows
// the configuration: with only -i CIDRs, or only -q ports, outbound
// capture is on and must be checked; a path the configuration turns off is
// not. Each check runs in a new network namespace that has only loopback,
// so it fails before any connection is made (no destination routed out,
// no pod address) and says which path it was checking.
func TestCheckCaptureChoosesPaths(t *testing.T) {
	enter := loopbackNetns(t)
	cases := []struct {
		name     string
		mod      func(*Config)
		wantPath string // "" = nil error
	}{
		{"outbound '*'", func(c *Config) { c.InboundPortsInclude = "" }, "outbound"},
		{"CIDR includes only", func(c *Config) {
			c.OutboundIPRangesInclude = "127.0.0.1/32"
			c.InboundPortsInclude = ""
		}, "outbound"},
		{"ports include only", func(c *Config) {
			c.OutboundIPRangesInclude = ""
			c.OutboundPortsInclude = "80"
			c.InboundPortsInclude = ""
		}, "outbound"},
		{"inbound '*' only", func(c *Config) { c.OutboundIPRangesInclude = "" }, "inbound"},
		{"inbound ports only", func(c *Config) {
			c.OutboundIPRangesInclude = ""
			c.InboundPortsInclude = "8080"
		}, "inbound"},
		{"nothing captured", func(c *Config) {
			c.OutboundIPRangesInclude = ""
			c.InboundPortsInclude = ""
		}, ""},
		{"IPv6 includes only", func(c *Config) {
			c.OutboundIPRangesInclude = "fd00::/8"
			c.InboundPortsInclude = ""
		}, ""},
	}
	for _, tc := range cases {
		cfg := seedConfig()
		tc.mod(&cfg)
		err := CheckCapture(context.Background(), cfg, CheckOptions{Enter: enter})
		var ce *CaptureError
		switch {
		case tc.wantPath == "" && err != nil:
			t.Errorf("%s: %v, want nil", tc.name, err)
		case tc.wantPath != "" && (!errors.As(err, &ce) || ce.Path != tc.wantPath):
			t.Errorf("%s: %v, want a %s CaptureError", tc.name, err, tc.wantPath)
		}
	}
	bad := seedConfig()
	bad.ProxyPort = "x"
	var fe *FlagError
	if err := CheckCapture(context.Background(), bad, CheckOptions{Enter: enter}); !errors.As(err, &fe) {
		t.Errorf("invalid Config: %v, want its *FlagError", err)
	}
}

// loopbackNetns returns a CheckOptions.Enter that runs fn in a new network
// namespace whose only interface is loopback, up: the namespace lives on
// one locked OS thread, which serves every call and is dropped (with the
// namespace) when t ends. It skips t when namespaces cannot be made.
func loopbackNetns(t *testing.T) func(func() error) error {
	t.Helper()
	testreq.Privileged(t, "a network namespace")
	calls := make(chan func() error)
	results := make(chan error)
	ready := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the namespace
		if err := unshareLoopback(); err != nil {
			ready <- err
			return
		}
		ready <- nil
		for fn := range calls {
			results <- fn()
		}
	}()
	if err := <-ready; err != nil {
		testreq.Missing(t, "needs root for a network namespace: %v", err)
	}
	t.Cleanup(func() { close(calls) })
	return func(fn func() error) error {
		calls <- fn
		return <-results
	}
}

func unshareLoopback() error {
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("unshare: %w", err)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	ifr.SetUint16(unix.IFF_UP | unix.IFF_LOOPBACK | unix.IFF_RUNNING)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("lo up: %w", err)
	}
	return nil
}

// TestProbe runs the self-check's probe over loopback in an empty
// namespace, where no rule rewrites anything: a connection straight to the
// probe listener passes (its local address is the original destination),
// and each way of not reaching it fails with a CaptureError saying so.
func TestProbe(t *testing.T) {
	enter := loopbackNetns(t)
	ctx := context.Background()
	listenOn := func(port string) net.Listener {
		var l net.Listener
		if err := enter(func() (err error) {
			l, err = net.Listen("tcp4", "127.0.0.1:"+port)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	other := listenOn("15099") // accepts, but is not the probe listener
	go func() {
		for {
			c, err := other.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	listenOn("15098") // occupies the port the probe wants

	spec := func(listen, dst string, id *[2]int, transparent bool) probeSpec {
		return probeSpec{path: "outbound", listenPort: listen, portFlag: flagProxyPort,
			dst: netip.MustParseAddrPort(dst), id: id, timeout: 5 * time.Second, transparent: transparent}
	}
	cases := []struct {
		name string
		spec probeSpec
		want string // Detail prefix, "" = pass
	}{
		{"direct", spec("15001", "127.0.0.1:15001", nil, false), ""},
		{"direct, other loopback address", spec("15001", "127.0.0.2:15001", nil, false), ""},
		{"as the proxy's UID/GID", spec("15006", "127.0.0.1:15006", &[2]int{1337, 1337}, false), ""},
		{"transparent listener", spec("15006", "127.0.0.1:15006", nil, true), ""},
		{"port taken", spec("15098", "127.0.0.1:15098", nil, false), "cannot listen on -p/--envoy-port port 15098 for the probe (is the proxy already running?)"},
		{"nothing there", spec("15001", "127.0.0.1:15097", nil, false), "a connection to 127.0.0.1:15097 did not reach -p/--envoy-port port 15001"},
		{"something else answered", spec("15001", "127.0.0.1:15099", nil, false),
			"a connection to 127.0.0.1:15099 was made, but not through -p/--envoy-port port 15001 (something else answered)"},
	}
	for _, tc := range cases {
		if tc.name == "something else answered" {
			tc.spec.timeout = 300 * time.Millisecond // how long the probe waits for its listener
		}
		err := probe(ctx, enter, tc.spec)
		var ce *CaptureError
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (!errors.As(err, &ce) || ce.Path != "outbound" || !strings.HasPrefix(ce.Detail, tc.want)):
			t.Errorf("%s: %v, want an outbound CaptureError starting %q", tc.name, err, tc.want)
		}
	}
	// The probe's listener is gone afterwards: the port is free again.
	listenOn("15001")
}

// TestParseRanges: -i/-x CIDRs and DNS servers are split by family,
// masked and unmapped; loopback in -i (either family) marks both.
func TestParseRanges(t *testing.T) {
	cfg := seedConfig()
	cfg.OutboundIPRangesInclude = "10.1.2.3/16, fd00::1/64,,127.0.0.1/32"
	cfg.OutboundIPRangesExclude = "192.168.1.1/24,fd01::/16"
	cfg.DNSServers = []string{"::ffff:10.0.0.1", "fd00::a"}
	p, err := cfg.parse()
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(p.outboundAll, p.v4.include, p.v4.exclude, p.v4.dnsServers, p.v4.hasLoopback, "|",
		p.v6.include, p.v6.exclude, p.v6.dnsServers, p.v6.hasLoopback)
	want := "false [10.1.0.0/16 127.0.0.1/32] [192.168.1.0/24] [10.0.0.1] true|[fd00::/64] [fd01::/16] [fd00::a] true"
	if got != want {
		t.Errorf("parsed ranges:\n got %s\nwant %s", got, want)
	}

	cfg.OutboundIPRangesInclude = "::1/128"
	if p, err = cfg.parse(); err != nil || !p.v4.hasLoopback || !p.v6.hasLoopback || len(p.v4.include) != 0 {
		t.Errorf("IPv6 loopback include: %+v %v", p, err)
	}
	cfg.OutboundIPRangesInclude = " * "
	if p, err = cfg.parse(); err != nil || !p.outboundAll || p.v4.hasLoopback || len(p.v4.include) != 0 {
		t.Errorf("'*' include: %+v %v", p, err)
	}
}

// TestLocalPrefixes: the namespace's addresses with their prefix lengths,
// IPv4 ones as IPv4 (a /32 included), IPv6 as IPv6.
func TestLocalPrefixes(t *testing.T) {
	enter := loopbackNetns(t)
	if _, err := exec.LookPath("ip"); err != nil {
		testreq.Missing(t, "needs the ip command: %v", err)
	}
	var got []netip.Prefix
	err := enter(func() error {
		for _, args := range [][]string{
			{"addr", "add", "10.9.9.9/32", "dev", "lo"},
			{"addr", "add", "10.1.2.3/24", "dev", "lo"},
			{"-6", "addr", "add", "fd00::5/64", "dev", "lo", "nodad"},
		} {
			// The child inherits this locked thread's namespace.
			if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
				return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, out)
			}
		}
		var err error
		got, err = localPrefixes()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[netip.Prefix]bool{}
	for _, s := range []string{"127.0.0.1/8", "10.9.9.9/32", "10.1.2.3/24", "::1/128", "fd00::5/64"} {
		want[netip.MustParsePrefix(s)] = true
	}
	for _, p := range got {
		if !want[p] {
			t.Errorf("localPrefixes: unexpected %v (valid: %v)", p, p.IsValid())
		}
		delete(want, p)
	}
	for p := range want {
		t.Errorf("localPrefixes: %v missing", p)
	}
}
