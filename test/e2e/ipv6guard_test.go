package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/localmesh"
)

// ipv6LinkLocal waits (bounded) until interface dev in network namespace
// ns (a name under /run/netns; "" is the test's own) has an IPv6
// link-local address past duplicate address detection, and returns it.
func ipv6LinkLocal(ctx context.Context, t *testing.T, ns, dev string) netip.Addr {
	t.Helper()
	args := []string{"-6", "-o", "addr", "show", "dev", dev, "scope", "link"}
	if ns != "" {
		args = append([]string{"-n", ns}, args...)
	}
	var addr netip.Addr
	waitFor(ctx, t, 20*time.Second, fmt.Sprintf("an IPv6 link-local address on %s in netns %q", dev, ns), func() error {
		out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, out)
		}
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			if len(f) < 4 || f[2] != "inet6" || strings.Contains(line, "tentative") {
				continue
			}
			if p, err := netip.ParsePrefix(f[3]); err == nil {
				addr = p.Addr()
				return nil
			}
		}
		return fmt.Errorf("none yet: %q", out)
	})
	return addr
}

// linkIndex is the index of interface dev in network namespace ns ("" is
// the test's own): a numeric IPv6 zone, which needs no name lookup.
func linkIndex(ctx context.Context, t *testing.T, ns, dev string) string {
	t.Helper()
	args := []string{"-o", "link", "show", "dev", dev}
	if ns != "" {
		args = append([]string{"-n", ns}, args...)
	}
	out, err := exec.CommandContext(ctx, "ip", args...).Output()
	if err != nil {
		t.Fatalf("ip %s: %v", strings.Join(args, " "), err)
	}
	idx, _, _ := strings.Cut(string(out), ":")
	return strings.TrimSpace(idx)
}

// plaintextGet sends one plaintext HTTP/1.1 request to addr from this
// process and returns the status line, or the error.
func plaintextGet(ctx context.Context, addr string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: echo\r\nConnection: close\r\n\r\n"); err != nil {
		return "", err
	}
	buf := make([]byte, 256)
	n, err := c.Read(buf)
	if n == 0 {
		return "", fmt.Errorf("no answer: %w", err)
	}
	line, _, _ := strings.Cut(string(buf[:n]), "\r\n")
	return line, nil
}

// outsiderNetns makes a network namespace with one veth on bridge and no
// IPv4 address, no capture and no sidecar: a pod outside the mesh on the
// same link. It is removed when the test ends, even when it fails.
func outsiderNetns(ctx context.Context, t *testing.T, bridge string) string {
	t.Helper()
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	id := hex.EncodeToString(b)
	ns, hostEnd := "st-v6out-"+id, "stv6o"+id
	t.Cleanup(func() {
		_ = exec.Command("ip", "link", "del", hostEnd).Run()
		_ = exec.Command("ip", "netns", "del", ns).Run()
	})
	for _, args := range [][]string{
		{"netns", "add", ns},
		{"link", "add", hostEnd, "type", "veth", "peer", "name", "eth0", "netns", ns},
		{"link", "set", hostEnd, "master", bridge, "up"},
		{"-n", ns, "link", "set", "lo", "up"},
		{"-n", ns, "link", "set", "eth0", "up"},
	} {
		if out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	return ns
}

// checkIPv6Refused is issue #20 item 1 against a running `straitctl local
// up` mesh whose PeerAuthentication is STRICT: the server pod (netns
// serverNS, app on port) has only IPv4 capture, yet an IPv6 link-local
// address. A plaintext request to [fe80::…%if]:port from the host, from
// a pod outside the mesh on the same bridge, and from a mesh pod
// (clientExec runs a command there) must not reach the app: before the
// fix each was answered 200 by the app, past STRICT mTLS.
func checkIPv6Refused(ctx context.Context, t *testing.T, bridge, serverNS string, port int, clientExec func(args ...string) (string, error)) {
	t.Helper()
	serverLL := ipv6LinkLocal(ctx, t, serverNS, "eth0")
	ipv6LinkLocal(ctx, t, "", bridge) // the host's own address on the link

	refused := func(t *testing.T, from string, err error, answer string) {
		t.Helper()
		if err == nil {
			t.Errorf("plaintext from %s to [%s]:%d answered %q; it must not reach the app", from, serverLL, port, answer)
		}
	}

	t.Run("from the host", func(t *testing.T) {
		addr := net.JoinHostPort(serverLL.WithZone(linkIndex(ctx, t, "", bridge)).String(), fmt.Sprint(port))
		line, err := plaintextGet(ctx, addr)
		refused(t, "the host", err, line)
		if err != nil && !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("from the host: %v, want connection refused (REJECT), not a timeout", err)
		}
	})

	// strait-echo get prints {"status":…} or {"error":…}.
	getFrom := func(t *testing.T, from string, run func(args ...string) (string, error), zone string) {
		t.Helper()
		url := fmt.Sprintf("http://[%s%%25%s]:%d/", serverLL, zone, port)
		out, err := run("strait-echo", "get", "-n", "1", url)
		if err != nil {
			t.Fatalf("strait-echo get in %s: %v: %s", from, err, out)
		}
		var g struct {
			Status int    `json:"status"`
			Error  string `json:"error"`
		}
		if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &g); err != nil {
			t.Fatalf("strait-echo get in %s said %q: %v", from, out, err)
		}
		if g.Error == "" {
			refused(t, from, nil, fmt.Sprint(g.Status))
		} else if !strings.Contains(g.Error, "connection refused") {
			t.Errorf("from %s: %s, want connection refused (REJECT), not a timeout", from, g.Error)
		}
	}

	t.Run("from a pod outside the mesh", func(t *testing.T) {
		ns := outsiderNetns(ctx, t, bridge)
		ipv6LinkLocal(ctx, t, ns, "eth0")
		getFrom(t, "a pod outside the mesh", func(args ...string) (string, error) {
			args[0] = filepath.Join(binDir, args[0])
			out, err := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns}, args...)...).CombinedOutput()
			return string(out), err
		}, "eth0")
	})

	t.Run("from a mesh pod", func(t *testing.T) {
		getFrom(t, "a mesh pod", clientExec, "eth0")
	})
}

// TestIPv6LinkLocalRefusedTPROXY is checkIPv6Refused on a mesh in TPROXY
// mode (`straitctl local up` captures with REDIRECT; TestLocalUp checks
// that), with a mesh-wide STRICT PeerAuthentication in force: plaintext
// over IPv4 from outside the mesh is refused by the sidecar, plaintext
// over link-local IPv6 by the capture rules, and the mesh request is
// served.
func TestIPv6LinkLocalRefusedTPROXY(t *testing.T) {
	requireMesh(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	m := startMesh(ctx, t, "peerauthn", localmesh.Options{SecureXDS: true, InterceptionMode: "TPROXY", Workloads: []localmesh.Workload{
		{Name: "client", Namespace: "demo", ConfigIP: "10.99.0.10"},
		echoPod("echo2", "demo", "10.99.0.12", "echo2"),
	}})
	client, echo2 := m.Pod("client"), m.Pod("echo2")
	if err := m.WriteConfig("peerauthn.yaml", []byte("apiVersion: security.istio.io/v1\nkind: PeerAuthentication\n"+
		"metadata: {name: default, namespace: istio-system}\nspec:\n  mtls: {mode: STRICT}\n")); err != nil {
		t.Fatal(err)
	}
	outsider, err := m.Network().AddPod(ctx, "v6-strict")
	if err != nil {
		t.Fatal(err)
	}
	echoAddr := net.JoinHostPort(echo2.IP, "8080")
	waitFor(ctx, t, applyTimeout, "STRICT: plaintext over IPv4 from outside the mesh closed", func() error {
		c, err := outsider.DialContext(ctx, "tcp", echoAddr)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: echo\r\n\r\n")
		buf := make([]byte, 64)
		if n, err := c.Read(buf); n > 0 || !closedByPeer(err) {
			return fmt.Errorf("plaintext to %s: %q, %w; want the connection closed", echoAddr, buf[:n], err)
		}
		return nil
	})
	waitOK(ctx, t, client.NewHTTPClient(false), "http://240.240.0.12/")

	checkIPv6Refused(ctx, t, m.Network().Bridge, filepath.Base(echo2.NetnsPath()), 8080, func(args ...string) (string, error) {
		args[0] = filepath.Join(binDir, args[0])
		out, err := client.Command(ctx, args[0], args[1:]...).CombinedOutput()
		return string(out), err
	})
	waitOK(ctx, t, client.NewHTTPClient(false), "http://240.240.0.12/")
}

// podNetnsByIP is the name (under /var/run/netns) of the network
// namespace whose eth0 has ip: how a Kubernetes pod's namespace, made by
// the node's CNI plugin (cni-…), is found from the node.
func podNetnsByIP(ctx context.Context, t *testing.T, ip string) string {
	t.Helper()
	names, err := filepath.Glob("/var/run/netns/cni-*")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range names {
		ns := filepath.Base(path)
		out, err := exec.CommandContext(ctx, "ip", "-n", ns, "-4", "-o", "addr", "show", "dev", "eth0").Output()
		if err == nil && strings.Contains(string(out), " inet "+ip+"/") {
			return ns
		}
	}
	t.Fatalf("no network namespace in /var/run/netns has %s on eth0", ip)
	return ""
}

// interfaceWithIP is the name of the test's own interface that has ip.
func interfaceWithIP(ctx context.Context, t *testing.T, ip string) string {
	t.Helper()
	out, err := exec.CommandContext(ctx, "ip", "-4", "-o", "addr", "show").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 3 && strings.HasPrefix(f[3], ip+"/") {
			return f[1]
		}
	}
	t.Fatalf("no interface has %s:\n%s", ip, out)
	return ""
}
