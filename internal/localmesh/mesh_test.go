package localmesh

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/netns"
	"github.com/straitmesh/strait/internal/testreq"
)

// A mesh that fails half-way through Start removes what it made: no
// namespace, bridge or process is left behind.
func TestStartFailureCleansUp(t *testing.T) {
	if err := netns.Available(); err != nil {
		testreq.Missing(t, "network namespaces unavailable: %v", err)
	}
	bin := t.TempDir()
	// Stand-ins that let Start get as far as the pods; straitd listens on
	// nothing, so Start fails waiting for it.
	for _, b := range []string{"straitd", "strait-agent", "strait-proxy"} {
		if err := os.WriteFile(filepath.Join(bin, b), []byte("#!/bin/sh\nexec sleep 60\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg := t.TempDir()
	if err := os.WriteFile(filepath.Join(cfg, "mesh.yaml"), []byte("apiVersion: networking.istio.io/v1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("leak%06x", rand.IntN(1<<24))
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	m, err := Start(ctx, Options{BinDir: bin, ConfigDir: cfg, Workloads: []Workload{{Name: name, Namespace: "demo"}}})
	if err == nil {
		m.Close()
		t.Fatal("Start succeeded with a straitd that never listens")
	}
	out, err := exec.Command("ip", "netns", "list").CombinedOutput()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), name) {
		t.Errorf("namespace of pod %s left behind after a failed Start:\n%s", name, out)
	}
	if out, _ := exec.Command("pgrep", "-f", "exec sleep 60").CombinedOutput(); len(strings.TrimSpace(string(out))) > 0 {
		t.Logf("note: stand-in processes still running: %s", out)
	}
}

// A wait whose process has exited ends at once with that reason, not
// after its timeout (an hour here: the test would time out instead).
func TestWaitForEndsWhenTheProcessExits(t *testing.T) {
	calls := 0
	err := waitFor(context.Background(), time.Hour, func() error {
		calls++
		if calls < 3 {
			return errors.New("connection refused")
		}
		return fmt.Errorf("straitd: %w", errExited)
	})
	if !errors.Is(err, errExited) || calls != 3 {
		t.Errorf("waitFor = %v after %d checks, want the exit after 3", err, calls)
	}
}
