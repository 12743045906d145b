package netns

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/testreq"
)

func TestTwoPodsTalkAndCleanUp(t *testing.T) {
	testreq.Privileged(t, "network namespaces")
	if err := Available(); err != nil {
		testreq.Missing(t, "%v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n, err := NewNetwork(ctx, NetworkOptions{Prefix: "sttest"})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = n.Close()
		}
	})
	if len(n.Bridge) > 15 || !n.Subnet.Contains(n.HostIP) {
		t.Fatalf("bridge %q subnet %s host %s", n.Bridge, n.Subnet, n.HostIP)
	}
	a, err := n.AddPod(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := n.AddPod(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if a.IP == b.IP || !n.Subnet.Contains(a.IP) || !n.Subnet.Contains(b.IP) {
		t.Fatalf("pod IPs a=%s b=%s subnet %s", a.IP, b.IP, n.Subnet)
	}

	// Routes: the /24 and the VIP range, no default.
	out, err := a.Run(ctx, ExecOptions{}, "ip", "-4", "route")
	if err != nil {
		t.Fatal(err)
	}
	routes := string(out)
	if !strings.Contains(routes, "240.240.0.0/16 dev eth0") || !strings.Contains(routes, n.Subnet.String()+" dev eth0") ||
		strings.Contains(routes, "default") {
		t.Fatalf("pod routes:\n%s", routes)
	}

	pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
	defer pcancel()
	if err := a.Ping(pctx, b.IP); err != nil {
		t.Fatalf("ping a -> b: %v", err)
	}
	if err := b.Ping(pctx, n.HostIP); err != nil {
		t.Fatalf("ping b -> host: %v", err)
	}
	if _, err := exec.LookPath("ping"); err == nil {
		if out, err := a.Run(ctx, ExecOptions{}, "ping", "-c", "1", "-W", "5", b.IP.String()); err != nil {
			t.Fatalf("ping a -> b: %v\n%s", err, out)
		}
	}
	// Nobody answers outside the /24: no default route.
	short, scancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer scancel()
	if err := a.Ping(short, netip.MustParseAddr("192.0.2.77")); err == nil {
		t.Fatal("ping to an address outside the pod network got a reply")
	}

	// TCP from pod a to pod b, with the socket made in-process.
	l, err := b.Listen(ctx, "tcp", ":7000")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		fmt.Fprintf(c, "hello %s", c.RemoteAddr())
	}()
	c, err := a.DialContext(ctx, "tcp", net.JoinHostPort(b.IP.String(), "7000"))
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(c)
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	if want := "hello " + a.IP.String() + ":"; !strings.HasPrefix(string(got), want) {
		t.Fatalf("got %q, want prefix %q", got, want)
	}

	// The listener is only in pod b: the host cannot reach b's :7000 on
	// its own loopback, but can reach it through the bridge.
	if _, err := net.DialTimeout("tcp", "127.0.0.1:7000", time.Second); err == nil {
		t.Fatal("pod b's listener is reachable on the host's loopback")
	}

	// HTTP from a pod to a server on the host's bridge IP.
	hl, err := net.Listen("tcp", net.JoinHostPort(n.HostIP.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "from %s", r.RemoteAddr)
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(hl) }()
	defer srv.Close()
	status, body, err := a.HTTPGet(ctx, "http://"+hl.Addr().String()+"/")
	if err != nil || status != 200 || !strings.HasPrefix(string(body), "from "+a.IP.String()+":") {
		t.Fatalf("HTTPGet host = %d %q %v", status, body, err)
	}

	// A long-running process is killed by Close.
	proc, err := b.Start(ctx, ExecOptions{UID: 1337, GID: 1337}, "sleep", "300")
	if err != nil {
		t.Fatal(err)
	}
	out, err = a.Run(ctx, ExecOptions{UID: 1337, GID: 1337}, "id", "-u")
	if err != nil || strings.TrimSpace(string(out)) != "1337" {
		t.Fatalf("id -u as 1337 = %q, %v", out, err)
	}

	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	closed = true
	select {
	case <-proc.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not kill the started process")
	}
	if err := n.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	assertGone(t, n, a, b)
}

func assertGone(t *testing.T, n *Network, pods ...*Pod) {
	t.Helper()
	ctx := context.Background()
	ns, err := ipCmd(ctx, "netns", "list")
	if err != nil {
		t.Fatal(err)
	}
	links, err := ipCmd(ctx, "-o", "link")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if strings.Contains(string(ns), p.Netns) {
			t.Errorf("netns %s left behind:\n%s", p.Netns, ns)
		}
		if strings.Contains(string(links), p.HostVeth+"@") {
			t.Errorf("veth %s left behind", p.HostVeth)
		}
	}
	if strings.Contains(string(links), n.Bridge+":") {
		t.Errorf("bridge %s left behind", n.Bridge)
	}
	if strings.Contains(string(links), "stv"+n.RunID) {
		t.Errorf("links of run %s left behind:\n%s", n.RunID, links)
	}
}

func TestNewTestNetworkCleansUpOnFailure(t *testing.T) {
	var n *Network
	var pods []*Pod
	// A subtest that fails half way still cleans up.
	t.Run("failing", func(t *testing.T) {
		ft := &fakeFail{T: t}
		n = NewTestNetwork(t)
		pods = append(pods, n.AddTestPod(t, "x"), n.AddTestPod(t, "y"))
		ft.pretendFailure()
	})
	if n == nil {
		testreq.Missing(t, "network not available")
	}
	assertGone(t, n, pods...)
}

// fakeFail stands for a test that gives up half way (runtime.Goexit via
// SkipNow, which runs cleanups like FailNow does but keeps this test green).
type fakeFail struct{ *testing.T }

func (f *fakeFail) pretendFailure() { f.SkipNow() } // testreq:ok, a test of cleanup, not of the environment

func TestCloseOnClosedNetworkAndBadNames(t *testing.T) {
	n := NewTestNetwork(t)
	ctx := context.Background()
	if _, err := n.AddPod(ctx, "bad name"); err == nil {
		t.Fatal("AddPod accepted a name with a space")
	}
	n.AddTestPod(t, "p")
	if _, err := n.AddPod(ctx, "p"); err == nil {
		t.Fatal("AddPod accepted a duplicate name")
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := n.AddPod(ctx, "q"); err == nil {
		t.Fatal("AddPod worked on a closed network")
	}
}
