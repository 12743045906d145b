// Package linkcheck holds the checks of what a command's binary links,
// for the tests of the commands whose size is a goal (strait-agent and
// strait-proxy, issue #24): the packages it depends on and the symbols it
// keeps, built with the Makefile's tags.
package linkcheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/straitmesh/strait/internal/testreq"
)

// MakefileTags is the GO_TAGS the Makefile builds the binaries with; the
// calling test runs in cmd/NAME.
func MakefileTags(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^GO_TAGS\s*\?=\s*(\S+)`).FindSubmatch(b)
	if m == nil {
		t.Fatal("the Makefile sets no GO_TAGS")
	}
	return string(m[1])
}

// NoDeps fails t for each of forbidden that the package in the current
// directory (the command named name) depends on, built with the
// Makefile's tags.
func NoDeps(t *testing.T, name string, forbidden ...string) {
	t.Helper()
	goTool := testreq.Binary(t, "go", "golang-go", "/usr/local/go/bin/go")
	tags := MakefileTags(t)
	out, err := exec.Command(goTool, "list", "-deps", "-tags", tags, ".").Output()
	if err != nil {
		t.Fatalf("go list -deps -tags %s: %v", tags, err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if dep == f {
				t.Errorf("%s (-tags %s) depends on %s", name, tags, dep)
			}
		}
	}
}

// NoSymbols builds the command in the current directory (named name)
// with the Makefile's tags and fails t for the symbols of its binary that
// match pattern (the first five, then their count); what says what they
// are, for the message.
func NoSymbols(t *testing.T, name string, pattern *regexp.Regexp, what string) {
	t.Helper()
	goTool := testreq.Binary(t, "go", "golang-go", "/usr/local/go/bin/go")
	bin := filepath.Join(t.TempDir(), name)
	build := exec.Command(goTool, "build", "-tags", MakefileTags(t), "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(goTool, "tool", "nm", bin).Output()
	if err != nil {
		t.Fatalf("go tool nm: %v", err)
	}
	n := 0
	for _, line := range strings.Split(string(out), "\n") {
		if pattern.MatchString(line) {
			if n++; n <= 5 {
				t.Errorf("%s links %s", name, strings.TrimSpace(line))
			}
		}
	}
	if n > 5 {
		t.Errorf("... %d %s symbols in all", n, what)
	}
}

// GeneratedValidators matches the validators protoc-gen-validate
// generated for go-control-plane and cncf/xds.
var GeneratedValidators = regexp.MustCompile(`(go-control-plane|cncf/xds)/.*\)\.(validate|ValidateAll)$`)
