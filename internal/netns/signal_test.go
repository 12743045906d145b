package netns

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/testreq"
)

// TestCloseOnSignal starts this test binary as a helper that makes a
// network and a pod and then waits; SIGTERM must remove both.
func TestCloseOnSignal(t *testing.T) {
	if os.Getenv("TESTENV_SIGNAL_HELPER") == "1" {
		signalHelper()
		return
	}
	testreq.Privileged(t, "network namespaces")
	if err := Available(); err != nil {
		testreq.Missing(t, "%v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestCloseOnSignal$", "-test.v=false")
	cmd.Env = append(os.Environ(), "TESTENV_SIGNAL_HELPER=1")
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		t.Fatalf("helper: %v", err)
	}
	var runID, netns, bridge string
	if _, err := fmt.Sscan(line, &runID, &netns, &bridge); err != nil {
		_ = cmd.Process.Kill()
		t.Fatalf("helper said %q: %v", line, err)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Errorf("helper exit: %v, want death by SIGTERM", err)
	}
	ns, _ := ipCmd(context.Background(), "netns", "list")
	links, _ := ipCmd(context.Background(), "-o", "link")
	if strings.Contains(string(ns), netns) {
		t.Errorf("netns %s left behind", netns)
	}
	if strings.Contains(string(links), bridge) || strings.Contains(string(links), "stv"+runID) {
		t.Errorf("links of run %s left behind:\n%s", runID, links)
	}
}

func signalHelper() {
	ctx := context.Background()
	n, err := NewNetwork(ctx, NetworkOptions{Prefix: "stsig"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	n.CloseOnSignal()
	p, err := n.AddPod(ctx, "p")
	if err != nil {
		_ = n.Close()
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if _, err := p.Start(ctx, ExecOptions{}, "sleep", "300"); err != nil {
		_ = n.Close()
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println(n.RunID, p.Netns, n.Bridge)
	time.Sleep(time.Minute) // killed by the parent's SIGTERM long before
	_ = n.Close()
	os.Exit(3)
}
