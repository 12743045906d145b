package supervisor

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as a fake proxy: with fakeProxyEnv set, TestMain
// runs fakeProxy instead of the tests.
const (
	fakeProxyEnv = "STRAIT_SUPERVISOR_FAKE_PROXY_LOG"
)

func TestMain(m *testing.M) {
	if log := os.Getenv(fakeProxyEnv); log != "" {
		os.Exit(fakeProxy(log))
	}
	os.Exit(m.Run())
}

// fakeProxy appends "start ARGS" to log; the first run crashes (exit 3),
// later runs wait for SIGTERM, append "sigterm" and exit 0.
func fakeProxy(log string) int {
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	appendLine(log, "start "+strings.Join(os.Args[1:], " "))
	marker := log + ".crashed"
	if _, err := os.Stat(marker); os.IsNotExist(err) {
		_ = os.WriteFile(marker, nil, 0o644)
		fmt.Fprintln(os.Stderr, "fake proxy: crashing on purpose")
		return 3
	}
	select {
	case <-term:
		appendLine(log, "sigterm")
		return 0
	case <-time.After(time.Minute):
		return 4
	}
}

func appendLine(path, line string) {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	fmt.Fprintln(f, line)
}

func readLines(t *testing.T, path string) []string {
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Fields(strings.ReplaceAll(strings.TrimSpace(string(data)), " ", "_"))
}

func waitLines(t *testing.T, path string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		lines := readLines(t, path)
		if len(lines) >= n {
			return lines
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: want %d lines, have %q", path, n, lines)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestExecRestartAndCleanShutdown(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(t.TempDir(), "proxy.log")
	t.Setenv(fakeProxyEnv, log) // inherited by the child, not read by this process's tests
	s := New(Options{
		Command:            Command{Path: exe, Args: ProxyArgs("/tmp/envoy-rev.json", 2, 0)},
		DrainDuration:      10 * time.Millisecond,
		TerminateTimeout:   timeout,
		RestartBackoffBase: 10 * time.Millisecond,
		Logger:             quiet(),
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := runAsync(ctx, s)

	// First run crashes, second keeps running.
	lines := waitLines(t, log, 2)
	wantStart := "start_-c_/tmp/envoy-rev.json_--concurrency_2"
	if lines[0] != wantStart || lines[1] != wantStart {
		t.Fatalf("log = %q", lines)
	}
	if s.Restarts() != 1 {
		t.Errorf("Restarts() = %d, want 1", s.Restarts())
	}
	cancel()
	if err := waitRun(t, done); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if lines := readLines(t, log); len(lines) != 3 || lines[2] != "sigterm" {
		t.Fatalf("after shutdown log = %q, want the proxy to have seen SIGTERM", lines)
	}
}
