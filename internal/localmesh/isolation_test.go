package localmesh

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/straitmesh/strait/internal/testreq"
)

// A process wrapped in a PodView, as a pod's app user, sees its own pod's
// directory, the proxy binaries and its bound app binary in the work dir,
// and nothing else of it (another pod's directory, the CA directory); the
// host's view is unchanged afterwards (no mount is left).
func TestPodViewHidesTheRestOfTheWorkDir(t *testing.T) {
	if os.Geteuid() != 0 {
		testreq.Missing(t, "mount namespaces need root")
	}
	for _, tool := range []string{"unshare", "mount", "setpriv"} {
		if _, err := exec.LookPath(tool); err != nil {
			testreq.Missing(t, "%s (util-linux) not found", tool)
		}
	}
	// 0700, as Start's, in the system's temp dir (t.TempDir's parent is
	// 0700, which the pod's user could not walk through).
	work, err := os.MkdirTemp("", "strait-view-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(work) })
	private := t.TempDir()
	for _, d := range []string{"pods/a", "pods/b", "bin", "ca", stageDir} {
		if err := os.MkdirAll(filepath.Join(work, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{"pods/a/mine": "a", "pods/b/theirs": "b", "ca/ca-key.pem": "key", "bin/strait-agent": "agent"}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(work, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// An app binary below a private directory: bound into the view.
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(sh)
	if err != nil {
		t.Fatal(err)
	}
	hidden := filepath.Join(private, "app-sh")
	if err := os.WriteFile(hidden, data, 0o755); err != nil {
		t.Fatal(err)
	}
	appBin, bind := AppBinary(work, hidden)
	if bind == nil || appBin != filepath.Join(work, "app", "app-sh") {
		t.Fatalf("AppBinary(%s) = %s, %v: want a bind at WORKDIR/app/app-sh", hidden, appBin, bind)
	}
	if p, b := AppBinary(work, sh); p != sh || b != nil {
		t.Errorf("AppBinary(%s) = %s, %v: want the path itself, any user may run it", sh, p, b)
	}

	view := PodView{WorkDir: work, PodDir: filepath.Join(work, "pods/a"), ProxyBinDir: filepath.Join(work, "bin"), Binds: []Bind{*bind}}
	const uid = "1338002"
	script := `cd /; for f in "$@"; do if cat "$f" >/dev/null 2>&1; then echo "$f read"; else echo "$f denied"; fi; done`
	targets := []string{"pods/a/mine", "bin/strait-agent", "pods/b/theirs", "ca/ca-key.pem"}
	args := []string{"--reuid", uid, "--regid", uid, "--clear-groups", "--", appBin, "-c", script, "sh"}
	for _, f := range targets {
		args = append(args, filepath.Join(work, f))
	}
	out, err := view.Wrap(exec.Command("setpriv", args...)).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want := []string{"read", "read", "denied", "denied"}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(targets) {
		t.Fatalf("output %q, want one line per target", out)
	}
	for i, f := range targets {
		if lines[i] != filepath.Join(work, f)+" "+want[i] {
			t.Errorf("%s: %q, want %s", f, lines[i], want[i])
		}
	}
	// The host still sees the whole work dir, and the stage is empty.
	for name := range files {
		if _, err := os.Stat(filepath.Join(work, name)); err != nil {
			t.Errorf("after the view: %v", err)
		}
	}
	if entries, err := os.ReadDir(filepath.Join(work, stageDir)); err != nil || len(entries) != 0 {
		t.Errorf("stage dir after the view: %v %v, want empty", entries, err)
	}
}
