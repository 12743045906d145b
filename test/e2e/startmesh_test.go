package e2e

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/straitmesh/strait/internal/localmesh"
	"github.com/straitmesh/strait/internal/netns"
	"github.com/straitmesh/strait/internal/testreq"
)

// requireMesh reports as missing (see testreq) what a local mesh needs:
// network namespaces and the binaries under test.
func requireMesh(t *testing.T) {
	t.Helper()
	if err := netns.Available(); err != nil {
		testreq.Missing(t, "network namespaces unavailable: %v", err)
	}
	if binDir == "" {
		testreq.Missing(t, "no binaries: run as root or set STRAIT_BIN_DIR")
	}
}

// startMesh starts the one local mesh of a test function: the binaries
// under test, the config of testdata/AREA unless opts names a ConfigDir.
// The mesh is closed when the test ends; when the test failed, the tails
// of straitd's, every agent's and every app's logs are logged first.
// Start returns once every sidecar is ready (its first config applied)
// and every app with an AppPort accepts connections: a workload whose app
// serves should name its port, or its first request races the app.
func startMesh(ctx context.Context, t *testing.T, area string, opts localmesh.Options) *localmesh.Mesh {
	t.Helper()
	requireMesh(t)
	opts.BinDir = binDir
	if opts.ConfigDir == "" {
		_, file, _, _ := runtime.Caller(0)
		opts.ConfigDir = filepath.Join(filepath.Dir(file), "testdata", area)
	}
	m, err := localmesh.Start(ctx, opts)
	if err != nil {
		t.Fatalf("start mesh: %v", err)
	}
	t.Cleanup(func() { //nolint:contextcheck // the mesh must be removed even when ctx ran out
		if t.Failed() {
			names := []string{"straitd"}
			for _, w := range opts.Workloads {
				names = append(names, w.Name+"-agent")
				if len(w.App) > 0 {
					names = append(names, w.Name+"-app")
				}
			}
			for _, name := range names {
				if data, err := os.ReadFile(m.LogPath(name)); err == nil {
					t.Logf("--- %s ---\n%s", name, tail(string(data), 40))
				}
			}
		}
		if err := m.Close(); err != nil {
			t.Errorf("close mesh: %v", err)
		}
	})
	return m
}

// configDir writes files (name → content) into a new directory that the
// test removes, for Options.ConfigDir.
func configDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// echoPod is a pod whose app is strait-echo on :8080 with --version
// version and any further flags (e.g. "--status", "500"); Start waits
// until it listens.
func echoPod(name, namespace, configIP, version string, flags ...string) localmesh.Workload {
	return localmesh.Workload{Name: name, Namespace: namespace, ConfigIP: configIP,
		App: append([]string{"strait-echo", "--addr", ":8080", "--version", version}, flags...), AppPort: 8080}
}
