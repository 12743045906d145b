// Package testreq decides what a test does when the machine lacks something
// it needs (root, a binary on PATH, a built test environment): it skips, or,
// when STRAIT_REQUIRE_ALL is set (CI sets it, and `make test` installs
// everything the tests need), it fails, so that a run can never pass by
// skipping.
//
// Tests must not call t.Skip for such reasons themselves; a repository test
// (TestSkipsGoThroughTestreq) enforces that. A skip under testing.Short()
// is not an environment skip and stays allowed.
//
// Under `go test -short` (`make test-unit`) every test that needs root,
// network namespaces, a real binary or a built test environment is skipped
// (Privileged), whatever the machine has: -short selects the unprivileged
// tests that run in minutes.
package testreq

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// EnvRequireAll is the variable that turns missing requirements into
// failures ("1" or "true").
const EnvRequireAll = "STRAIT_REQUIRE_ALL"

// RequireAll reports whether missing requirements fail tests.
func RequireAll() bool {
	v := os.Getenv(EnvRequireAll)
	return v == "1" || v == "true"
}

// Missing ends t because the environment lacks something: t is skipped with
// the reason, or fails under STRAIT_REQUIRE_ALL.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if RequireAll() {
		t.Fatalf("missing test requirement (%s is set, so this fails instead of skipping): %s", EnvRequireAll, msg)
	}
	t.Skipf("skipping: %s", msg)
}

// Privileged skips t under `go test -short` (make test-unit): t needs root,
// network namespaces, a real binary or a built test environment, which
// only the full run (make test) provides. It is not a missing requirement,
// so STRAIT_REQUIRE_ALL does not turn it into a failure.
func Privileged(t testing.TB, why string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("skipping under -short (make test-unit): needs %s", why)
	}
}

// Root ends t (see Missing) unless the test runs as root; under -short it
// skips t (see Privileged).
func Root(t testing.TB, why string) {
	t.Helper()
	Privileged(t, "root: "+why)
	if os.Geteuid() != 0 {
		Missing(t, "needs root: %s", why)
	}
}

// Binary returns the path of the named program, looked up on PATH and then
// in the given fallback paths, or ends t (see Missing) naming the Debian
// package that provides it. Under -short it skips t (see Privileged).
func Binary(t testing.TB, name, debianPackage string, fallbacks ...string) string {
	t.Helper()
	Privileged(t, "the real "+name)
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, p := range fallbacks {
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	Missing(t, "%s is not installed (apt-get install %s; make test installs it)", name, debianPackage)
	return ""
}
