package e2e

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// binDir holds the binaries under test: $STRAIT_BIN_DIR (make test sets it)
// or a directory this package builds them into.
var binDir string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	flag.Parse()
	if *grpcServe != "" {
		return serveGRPC(*grpcServe)
	}
	if *wsServe != "" {
		return serveWebSocket(*wsServe)
	}
	if *l4Serve != "" {
		return serveL4(*l4Serve)
	}
	if *trailerServe != "" {
		return serveTrailerEcho(*trailerServe)
	}
	if *dnsServe != "" {
		return serveDNS(*dnsServe, *dnsZone)
	}
	if *podAttack {
		return runPodAttack(flag.Args())
	}
	if testing.Short() {
		// Every test here runs the real binaries, most as root in network
		// namespaces: none is a unit test (make test-unit).
		fmt.Println("e2e: skipped under -short (make test-unit)")
		return 0
	}
	binDir = os.Getenv("STRAIT_BIN_DIR")
	if binDir == "" && os.Geteuid() == 0 {
		dir, err := os.MkdirTemp("", "strait-e2e-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		if err := os.Chmod(dir, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..")
		cmd := exec.Command("go", "build", "-tags", "grpcnotrace", "-o", dir+"/", "./cmd/straitd", "./cmd/strait-agent", "./cmd/strait-proxy", "./cmd/strait-echo", "./cmd/straitctl")
		cmd.Dir = root
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build binaries:", err)
			return 1
		}
		binDir = dir
	}
	return m.Run()
}

func examplesDir(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "examples", "demo")
}
