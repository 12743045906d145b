package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/golden"
	"github.com/straitmesh/strait/internal/iptables"
	"github.com/straitmesh/strait/internal/iptables/iptablestest"
	"github.com/straitmesh/strait/internal/netns"
	"github.com/straitmesh/strait/internal/testreq"
)

// runIptablesCmd runs the command with runner as the IPv4 iptables (and,
// when it is also a Router, as `ip`).
func runIptablesCmd(t *testing.T, env map[string]string, runner iptables.Runner, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	sys := iptables.System{IPv4: runner}
	if r, ok := runner.(iptables.Router); ok {
		sys.Router = r
	}
	return runIptablesCmdWith(t, testDeps(env, sys), args...)
}

func testDeps(env map[string]string, sys iptables.System) iptablesDeps {
	return iptablesDeps{
		getenv: func(k string) string { return env[k] },
		system: func(context.Context) (iptables.System, string) { return sys, "iptables backend: test" },
		readFile: func(string) ([]byte, error) {
			return []byte("search example.com\nnameserver 10.96.0.10\nnameserver fd00::a\n"), nil
		},
		check: func(context.Context, iptables.Config, iptables.CheckOptions) error {
			return errors.New("check not expected")
		},
		now: func() time.Time { return time.Date(2022, 8, 26, 0, 34, 38, 813305000, time.UTC) },
	}
}

func runIptablesCmdWith(t *testing.T, deps iptablesDeps, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := iptablesCommand(deps)
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	err = cmd.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

var seedArgs = []string{"-p", "15001", "-z", "15006", "-u", "1337", "-m", "REDIRECT", "-i", "*", "-x", "", "-b", "*", "-d", "15090,15021,15020"}

func TestIptablesDryRunPrintsSeedRules(t *testing.T) {
	want, err := os.ReadFile("../../internal/iptables/testdata/seed.golden")
	if err != nil {
		t.Fatal(err)
	}
	fake := &iptablestest.RecordingRunner{}
	stdout, stderr, err := runIptablesCmd(t, nil, fake, append(seedArgs, "--dry-run")...)
	if err != nil {
		t.Fatal(err)
	}
	// istio-iptables' own output, then the IPv6 guard (not --dual-stack),
	// golden-tested in internal/iptables.
	guard, _, ok := strings.Cut(stdout, "# ip6tables-restore --noflush\n")
	if !ok || guard != string(want) {
		t.Errorf("--dry-run stdout does not start with seed.golden and then the ip6tables input:\n%s", golden.Diff(want, []byte(stdout)))
	}
	if !strings.HasSuffix(stdout, "-A INPUT -m comment --comment strait -j REJECT\n"+
		"-A OUTPUT -m conntrack --ctstate RELATED,ESTABLISHED -m comment --comment strait -j ACCEPT\n"+
		"-A OUTPUT -o lo -m comment --comment strait -j ACCEPT\n"+
		"-A OUTPUT -p ipv6-icmp -m comment --comment strait -j ACCEPT\n"+
		"-A OUTPUT -p tcp -m comment --comment strait -j REJECT --reject-with tcp-reset\n"+
		"-A OUTPUT -m comment --comment strait -j REJECT\nCOMMIT\n") {
		t.Errorf("--dry-run stdout does not end with the IPv6 guard:\n%s", stdout)
	}
	if len(fake.Restores) != 0 {
		t.Errorf("--dry-run ran iptables-restore: %q", fake.Restores)
	}
	for _, s := range []string{
		"2022-08-26T00:34:38.813305Z\tinfo\tIstio iptables environment:\nENVOY_PORT=\n",
		"\tinfo\tIstio iptables variables:\nPROXY_PORT=15001\n",
		"PROXY_GID=1337\n",
		"INBOUND_PORTS_EXCLUDE=15090,15021,15020\n",
	} {
		if !strings.Contains(stderr, s) {
			t.Errorf("stderr lacks %q:\n%s", s, stderr)
		}
	}
}

func TestIptablesEnvDefaults(t *testing.T) {
	env := map[string]string{
		"ENVOY_PORT": "16001", "INBOUND_CAPTURE_PORT": "16006", "PROXY_UID": "2000", "PROXY_GID": "2001",
		"ISTIO_SERVICE_CIDR": "240.240.0.0/16", "ISTIO_INBOUND_PORTS": "8080",
	}
	stdout, stderr, err := runIptablesCmd(t, env, &iptablestest.RecordingRunner{}, "--dry-run")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		"--to-ports 16001\n", "--to-ports 16006\n", "--uid-owner 2000 ", "--gid-owner 2001 ",
		"-A ISTIO_OUTPUT -d 240.240.0.0/16 -j ISTIO_REDIRECT\n", "-A ISTIO_INBOUND -p tcp --dport 8080 -j ISTIO_IN_REDIRECT\n",
	} {
		if !strings.Contains(stdout, s) {
			t.Errorf("rules lack %q:\n%s", s, stdout)
		}
	}
	if !strings.Contains(stderr, "ENVOY_PORT=16001\n") {
		t.Errorf("environment block lacks ENVOY_PORT=16001:\n%s", stderr)
	}
}

func TestIptablesAppliesThroughRunner(t *testing.T) {
	fake := &iptablestest.RecordingRunner{}
	_, stderr, err := runIptablesCmd(t, nil, fake, seedArgs...)
	if err != nil {
		t.Fatal(err)
	}
	if len(fake.Restores) != 1 || !strings.Contains(fake.Restores[0], ":ISTIO_OUTPUT - [0:0]\n") {
		t.Fatalf("Restores = %q", fake.Restores)
	}
	if !strings.Contains(stderr, "Applied:\niptables-restore --noflush <<EOF\n* nat\n") {
		t.Errorf("stderr does not show the applied input:\n%s", stderr)
	}
}

func TestIptablesRejectsBadFlagsBeforeChangingAnything(t *testing.T) {
	cases := map[string][]string{
		`-b/--istio-inbound-ports: "80,x" : "x" is not a port number`:                                    {"-b", "80,x"},
		`-i/--istio-service-cidr: "10.0.0.0/33" : "10.0.0.0/33" is not a CIDR (e.g. 10.96.0.0/12)`:       {"-i", "10.0.0.0/33"},
		`-m/--istio-inbound-interception-mode: "FOO" : is not an interception mode (REDIRECT or TPROXY)`: {"-m", "FOO"},
		`-p/--envoy-port: "x" : is not a port number (1-65535)`:                                          {"-p", "x", "-m", "TPROXY"},
		`-c/--istio-exclude-interfaces: "eth0,bad/name"`:                                                 {"-c", "eth0,bad/name"},
		`-r/--inbound-tproxy-route-table: "254" : is a reserved routing table`:                           {"-m", "TPROXY", "-r", "254"},
		`-t/--inbound-tproxy-mark: "abc" : is not a number`:                                              {"-t", "abc"},
		`-x/--istio-service-exclude-cidr: "10.0.0.1" : "10.0.0.1" is not a CIDR`:                         {"-x", "10.0.0.1", "--cleanup-only"},
	}
	for want, args := range cases {
		fake := &iptablestest.RecordingRunner{}
		_, _, err := runIptablesCmd(t, nil, fake, args...)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("args %q: error = %v, want %q", args, err, want)
		}
		if len(fake.Restores) != 0 {
			t.Errorf("args %q: ran iptables-restore", args)
		}
	}
}

// TestIptablesCommandInNetns runs the command for real, with
// iptables-restore and ip6tables-restore inside a network namespace,
// twice, then --cleanup-only.
func TestIptablesCommandInNetns(t *testing.T) {
	testreq.Binary(t, "iptables-restore", "iptables")
	n := netns.NewTestNetwork(t)
	pod := n.AddTestPod(t, "agent")
	command := func(ctx context.Context, name string, args ...string) *exec.Cmd {
		return pod.Command(ctx, netns.ExecOptions{}, name, args...)
	}
	sys := iptables.BackendDefault.System(command)
	for i := 0; i < 2; i++ {
		if _, stderr, err := runIptablesCmdWith(t, testDeps(nil, sys), seedArgs...); err != nil {
			t.Fatalf("run #%d: %v\n%s", i+1, err, stderr)
		}
	}
	// Without --dual-stack the pod's IPv6 (its eth0 has a link-local
	// address) is refused, once.
	v6, err := pod.Run(context.Background(), netns.ExecOptions{}, "ip6tables-save", "-t", "filter")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(string(v6), "--comment strait -j REJECT"); got != 3 {
		t.Errorf("ip6tables filter table has %d REJECT rules of ours after two runs, want 3:\n%s", got, v6)
	}
	defer func() {
		if _, stderr, err := runIptablesCmdWith(t, testDeps(nil, sys), "--cleanup-only"); err != nil {
			t.Fatalf("--cleanup-only: %v\n%s", err, stderr)
		}
		v6, err := pod.Run(context.Background(), netns.ExecOptions{}, "ip6tables-save")
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(v6), "strait") {
			t.Errorf("--cleanup-only left ip6tables rules:\n%s", v6)
		}
	}()
	out, err := pod.Run(context.Background(), netns.ExecOptions{}, "iptables-save", "-t", "nat")
	if err != nil {
		t.Fatal(err)
	}
	golden, err := os.ReadFile("../../internal/iptables/testdata/seed.golden")
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Count(string(golden), "\n-A ")
	if got := strings.Count(string(out), "\n-A "); got != want {
		t.Fatalf("nat table has %d rules after two runs, want %d:\n%s", got, want, out)
	}
}

// TestIptablesDryRunEveryMode checks that --dry-run prints the builder's
// plan (golden-tested in internal/iptables) for the new flags, read from
// flags and from the environment.
func TestIptablesDryRunEveryMode(t *testing.T) {
	cases := []struct {
		name   string
		env    map[string]string
		args   []string
		golden string
	}{
		{"tproxy flag", nil, []string{"-m", "TPROXY"}, "plan_tproxy"},
		{"tproxy env", map[string]string{"ISTIO_INBOUND_INTERCEPTION_MODE": "TPROXY"}, nil, "plan_tproxy"},
		{"tproxy ports", nil, []string{"-m", "TPROXY", "-b", "80,8080", "-t", "1986", "-r", "912"}, "plan_tproxy_inbound_ports"},
		{"tproxy ports env", map[string]string{"INBOUND_TPROXY_MARK": "1986", "ISTIO_INBOUND_TPROXY_ROUTE_TABLE": "912"},
			[]string{"-m", "TPROXY", "-b", "80,8080"}, "plan_tproxy_inbound_ports"},
		{"dns from resolv.conf", nil, []string{"--redirect-dns"}, "plan_dns"},
		{"dns env", map[string]string{"ISTIO_META_DNS_CAPTURE": "true"}, nil, "plan_dns"},
		{"dns dual-stack", nil, []string{"--redirect-dns", "--dual-stack"}, "plan_dns_dual_stack"},
		{"dual-stack env", map[string]string{"ISTIO_DUAL_STACK": "true"}, nil, "plan_dual_stack_all"},
		{"drop invalid env", map[string]string{"INVALID_DROP": "true"}, nil, "plan_drop_invalid"},
		{"exclude interfaces", nil, []string{"-c", "eth1,veth+"}, "plan_exclude_interfaces"},
		{"exclude interfaces env", map[string]string{"ISTIO_EXCLUDE_INTERFACES": "eth1,veth+"}, nil, "plan_exclude_interfaces"},
		{"kube-virt", nil, []string{"-k", "vnet0,vnet1"}, "plan_kube_virt"},
		{"outbound ports", nil, []string{"-o", "3306,5432"}, "plan_outbound_ports_exclude_only"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want, err := os.ReadFile("../../internal/iptables/testdata/" + tc.golden + ".golden")
			if err != nil {
				t.Fatal(err)
			}
			fake := &iptablestest.RecordingRunner{}
			// seedArgs (Istio's injected istio-init arguments) without -m, which the environment may set.
			var args []string
			for i := 0; i < len(seedArgs); i++ {
				if seedArgs[i] == "-m" {
					i++
					continue
				}
				args = append(args, seedArgs[i])
			}
			args = append(args, tc.args...)
			stdout, stderr, err := runIptablesCmd(t, tc.env, fake, append(args, "--dry-run")...)
			if err != nil {
				t.Fatalf("%v\n%s", err, stderr)
			}
			if stdout != string(want) {
				t.Errorf("--dry-run stdout differs from %s.golden:\n%s", tc.golden, golden.Diff(want, []byte(stdout)))
			}
			if len(fake.Restores) != 0 || len(fake.IPCalls) != 0 {
				t.Errorf("--dry-run changed something: %q %q", fake.Restores, fake.IPCalls)
			}
		})
	}
}

func TestIptablesVariablesBlockShowsEveryFlag(t *testing.T) {
	_, stderr, err := runIptablesCmd(t, nil, &iptablestest.RecordingRunner{}, "--dry-run", "-m", "TPROXY",
		"--redirect-dns", "--drop-invalid", "--dual-stack", "-k", "vnet0", "-c", "eth9")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		"INBOUND_INTERCEPTION_MODE=TPROXY\n", "KUBE_VIRT_INTERFACES=vnet0\n", "ENABLE_INBOUND_IPV6=true\n",
		"DNS_CAPTURE=true\n", "DROP_INVALID=true\n", "DNS_SERVERS=[10.96.0.10],[fd00::a]\n", "EXCLUDE_INTERFACES=eth9\n",
	} {
		if !strings.Contains(stderr, s) {
			t.Errorf("variables block lacks %q:\n%s", s, stderr)
		}
	}
}

func TestIptablesRejectsBadEnvironment(t *testing.T) {
	for env, want := range map[string]string{
		"INVALID_DROP":        `environment variable INVALID_DROP="yes please" is not a boolean`,
		"IPTABLES_PROBE_PORT": `environment variable IPTABLES_PROBE_PORT="yes please" is not a port number`,
		"PROBE_TIMEOUT":       `environment variable PROBE_TIMEOUT="yes please" is not a duration`,
	} {
		fake := &iptablestest.RecordingRunner{}
		_, _, err := runIptablesCmd(t, map[string]string{env: "yes please"}, fake)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", env, err, want)
		}
		if len(fake.Restores) != 0 {
			t.Errorf("%s: ran iptables-restore", env)
		}
	}
}

func TestIptablesCleanupOnlyAndValidation(t *testing.T) {
	// --cleanup-only deletes what it finds and applies nothing.
	fake := &iptablestest.RecordingRunner{Tables: map[string]string{"nat": "*nat\n:ISTIO_OUTPUT - [0:0]\n-A OUTPUT -p tcp -j ISTIO_OUTPUT\nCOMMIT\n"}}
	if _, stderr, err := runIptablesCmd(t, nil, fake, append(seedArgs, "--cleanup-only")...); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	want := "* nat\n:ISTIO_OUTPUT - [0:0]\n-D OUTPUT -p tcp -j ISTIO_OUTPUT\n-X ISTIO_OUTPUT\nCOMMIT\n"
	if len(fake.Restores) != 1 || fake.Restores[0] != want {
		t.Errorf("cleanup restores = %q, want %q", fake.Restores, want)
	}

	// --run-validation fails the command with the check's error, after
	// applying; --skip-rule-apply only validates.
	for _, skip := range []bool{false, true} {
		fake := &iptablestest.RecordingRunner{}
		deps := testDeps(nil, iptables.System{IPv4: fake, Router: fake})
		var checked iptables.Config
		deps.check = func(_ context.Context, cfg iptables.Config, opts iptables.CheckOptions) error {
			checked = cfg
			if opts.ProbePort != 15002 || opts.Timeout != 5*time.Second {
				t.Errorf("check options %+v", opts)
			}
			return &iptables.CaptureError{Path: "inbound", Detail: "boom"}
		}
		args := append(append([]string{}, seedArgs...), "--run-validation")
		if skip {
			args = append(args, "--skip-rule-apply")
		}
		_, _, err := runIptablesCmdWith(t, deps, args...)
		if err == nil || !strings.Contains(err.Error(), "iptables validation failed: inbound capture does not work: boom") {
			t.Errorf("skip=%v: error %v", skip, err)
		}
		if checked.ProxyPort != "15001" {
			t.Errorf("skip=%v: check got %+v", skip, checked)
		}
		if applied := len(fake.Restores) > 0; applied == skip {
			t.Errorf("skip=%v: restores %q", skip, fake.Restores)
		}
	}
}

// TestIptablesTProxyCommandInNetns runs the command for real in TPROXY
// mode with validation, twice, then --cleanup-only, in the backend the
// namespace uses.
func TestIptablesTProxyCommandInNetns(t *testing.T) {
	testreq.Binary(t, "iptables-restore", "iptables")
	n := netns.NewTestNetwork(t)
	pod := n.AddTestPod(t, "agent")
	ctx := context.Background()
	command := func(ctx context.Context, name string, args ...string) *exec.Cmd {
		return pod.Command(ctx, netns.ExecOptions{}, name, args...)
	}
	// The namespace already uses iptables-legacy.
	if out, err := pod.Run(ctx, netns.ExecOptions{}, "iptables-legacy", "-t", "nat", "-A", "POSTROUTING", "-o", "eth0", "-j", "RETURN"); err != nil {
		testreq.Missing(t, "no iptables-legacy: %v %s", err, out)
	}
	save := func() string {
		out, err := pod.Run(ctx, netns.ExecOptions{}, "iptables-legacy-save")
		if err != nil {
			t.Fatal(err)
		}
		return withoutEmptyTables(string(out))
	}
	before := save()
	deps := testDeps(nil, iptables.System{})
	deps.system = func(ctx context.Context) (iptables.System, string) {
		b, why := iptables.DetectBackend(ctx, command)
		return b.System(command), string(b) + ": " + why
	}
	deps.check = func(ctx context.Context, cfg iptables.Config, opts iptables.CheckOptions) error {
		opts.Enter = func(fn func() error) error { return pod.Do(nil, fn) }
		return iptables.CheckCapture(ctx, cfg, opts)
	}
	args := append(append([]string{}, seedArgs...), "-m", "TPROXY", "--run-validation")
	for i := 0; i < 2; i++ {
		if _, stderr, err := runIptablesCmdWith(t, deps, args...); err != nil {
			t.Fatalf("run #%d: %v\n%s", i+1, err, stderr)
		} else if !strings.Contains(stderr, "legacy: iptables-legacy holds") || !strings.Contains(stderr, "Validation passed") {
			t.Errorf("run #%d log:\n%s", i+1, stderr)
		}
	}
	if s := save(); !strings.Contains(s, "TPROXY --on-port 15006") {
		t.Fatalf("no TPROXY rule in iptables-legacy-save:\n%s", s)
	}
	if _, stderr, err := runIptablesCmdWith(t, deps, "--cleanup-only"); err != nil {
		t.Fatalf("cleanup: %v\n%s", err, stderr)
	}
	if after := save(); after != before {
		t.Errorf("iptables-legacy-save after cleanup:\n%s\nbefore:\n%s", after, before)
	}
}

// withoutEmptyTables drops comment lines and the tables that hold no rule,
// no user chain and only ACCEPT policies: a legacy table, once used, stays
// registered in the namespace (empty) after cleanup.
func withoutEmptyTables(save string) string {
	var out, table []string
	empty := true
	for _, l := range strings.Split(save, "\n") {
		switch {
		case strings.HasPrefix(l, "#") || l == "":
		case strings.HasPrefix(l, "*"):
			table, empty = []string{l}, true
		case l == "COMMIT":
			if !empty {
				out = append(out, append(table, l)...)
			}
			table = nil
		default:
			table = append(table, l)
			if strings.HasPrefix(l, "-") || strings.HasPrefix(l, ":") && !strings.Contains(l, " ACCEPT ") {
				empty = false
			}
		}
	}
	return strings.Join(out, "\n")
}
