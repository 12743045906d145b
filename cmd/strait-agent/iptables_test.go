package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/iptables"
	"github.com/straitmesh/strait/internal/testenv"
)

func runIptablesCmd(t *testing.T, env map[string]string, runner iptables.Runner, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := iptablesCommand(iptablesDeps{
		getenv: func(k string) string { return env[k] },
		runner: runner,
		now:    func() time.Time { return time.Date(2022, 8, 26, 0, 34, 38, 813305000, time.UTC) },
	})
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
	fake := &iptables.RecordingRunner{}
	stdout, stderr, err := runIptablesCmd(t, nil, fake, append(seedArgs, "--dry-run")...)
	if err != nil {
		t.Fatal(err)
	}
	if stdout != string(want) {
		t.Errorf("--dry-run stdout:\n%s\nwant:\n%s", stdout, want)
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
	stdout, stderr, err := runIptablesCmd(t, env, &iptables.RecordingRunner{}, "--dry-run")
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
	fake := &iptables.RecordingRunner{}
	_, stderr, err := runIptablesCmd(t, nil, fake, seedArgs...)
	if err != nil {
		t.Fatal(err)
	}
	if len(fake.Restores) != 1 || !strings.Contains(fake.Restores[0], ":ISTIO_OUTPUT - [0:0]\n") {
		t.Fatalf("Restores = %q", fake.Restores)
	}
	if !strings.Contains(stderr, "iptables-restore --noflush with the following input:\n* nat\n") {
		t.Errorf("stderr does not show the applied input:\n%s", stderr)
	}
}

func TestIptablesRejectsBadFlagsBeforeChangingAnything(t *testing.T) {
	cases := map[string][]string{
		`-b/--istio-inbound-ports: "80,x" : "x" is not a port number`:                                    {"-b", "80,x"},
		`-i/--istio-service-cidr: "10.0.0.0/33" : "10.0.0.0/33" is not a CIDR (e.g. 10.96.0.0/12)`:       {"-i", "10.0.0.0/33"},
		`-m/--istio-inbound-interception-mode: "FOO" : is not an interception mode (REDIRECT or TPROXY)`: {"-m", "FOO"},
		"TPROXY is not implemented yet": {"-m", "TPROXY"},
	}
	for want, args := range cases {
		fake := &iptables.RecordingRunner{}
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
// iptables-restore inside a network namespace, twice.
func TestIptablesCommandInNetns(t *testing.T) {
	if _, err := exec.LookPath("iptables-restore"); err != nil {
		t.Skip("skipping: iptables-restore not installed (make test installs it)")
	}
	n := testenv.NewTestNetwork(t)
	pod := n.AddTestPod(t, "agent")
	runner := iptables.ExecRunner{Command: func(ctx context.Context, name string, args ...string) *exec.Cmd {
		return pod.Command(ctx, testenv.ExecOptions{}, name, args...)
	}}
	for i := 0; i < 2; i++ {
		if _, stderr, err := runIptablesCmd(t, nil, runner, seedArgs...); err != nil {
			t.Fatalf("run #%d: %v\n%s", i+1, err, stderr)
		}
	}
	out, err := pod.Run(context.Background(), testenv.ExecOptions{}, "iptables-save", "-t", "nat")
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
