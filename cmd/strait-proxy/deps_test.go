package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/straitmesh/strait/internal/testreq"
)

// strait-proxy, built with the Makefile's tags, links no package whose
// reflect-by-name method calls (text/template's, html/template's, pulled
// in by gRPC's golang.org/x/net/trace without the grpcnotrace tag) make
// the linker keep every exported method of every linked type: that was
// 8 MB of the binary and ~3 MiB of an idle proxy's resident file
// pages (bench/README.md, issue #24).
func TestLinksNoTemplates(t *testing.T) {
	goTool := testreq.Binary(t, "go", "golang-go", "/usr/local/go/bin/go")
	tags := makefileTags(t)
	out, err := exec.Command(goTool, "list", "-deps", "-tags", tags, ".").Output()
	if err != nil {
		t.Fatalf("go list -deps -tags %s: %v", tags, err)
	}
	for _, dep := range strings.Fields(string(out)) {
		switch dep {
		case "html/template", "text/template", "golang.org/x/net/trace":
			t.Errorf("strait-proxy (-tags %s) depends on %s", tags, dep)
		}
	}
}

// makefileTags is the GO_TAGS the Makefile builds the binaries with.
func makefileTags(t *testing.T) string {
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

// strait-proxy links none of the validators protoc-gen-validate generated for
// go-control-plane and cncf/xds: the proxy checks those rules with
// internal/proxy/pgv, and one call of a generated ValidateAll would keep
// every generated validator of every linked type (~5 MiB of the loaded
// binary, bench/README.md "Fifth round").
func TestLinksNoGeneratedValidators(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	goTool := testreq.Binary(t, "go", "golang-go", "/usr/local/go/bin/go")
	bin := filepath.Join(t.TempDir(), "strait-proxy")
	build := exec.Command(goTool, "build", "-tags", makefileTags(t), "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(goTool, "tool", "nm", bin).Output()
	if err != nil {
		t.Fatalf("go tool nm: %v", err)
	}
	generated := regexp.MustCompile(`(go-control-plane|cncf/xds)/.*\)\.(validate|ValidateAll)$`)
	n := 0
	for _, line := range strings.Split(string(out), "\n") {
		if generated.MatchString(line) {
			if n++; n <= 5 {
				t.Errorf("strait-proxy links %s", strings.TrimSpace(line))
			}
		}
	}
	if n > 5 {
		t.Errorf("... %d generated validator symbols in all", n)
	}
}
