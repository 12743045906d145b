// Package istiobin gives tests Istio's own binaries (pilot-agent,
// pilot-discovery) for interop checks. They are built from the
// istio.io/istio module outside Strait's go.mod by hack/<name>-build.sh,
// which caches them by version, so only the first run pays for the build
// (a few minutes on 2 cores), as the kube-apiserver test harness does.
package istiobin

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/straitmesh/strait/internal/testreq"
)

// Path returns the binary's path: $envVar if set, else the cached build of
// hack/<name>-build.sh, building it first if needed. If it cannot be built
// (no go toolchain or module proxy), t ends through testreq.Missing.
func Path(t testing.TB, name, envVar string) string {
	t.Helper()
	testreq.Privileged(t, "Istio's real binaries")
	if p := os.Getenv(envVar); p != "" {
		return p
	}
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "..", "hack", name+"-build.sh")
	var stderr bytes.Buffer
	cmd := exec.Command("bash", script)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		testreq.Missing(t, "Istio's %s could not be built with %s (or set %s): %v\n%s", name, script, envVar, err, tail(stderr.String(), 2000))
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	path := lines[len(lines)-1]
	if st, err := os.Stat(path); err != nil || st.Mode()&0o111 == 0 {
		testreq.Missing(t, "%s printed %q, not an executable: %v", script, path, err)
	}
	return path
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
