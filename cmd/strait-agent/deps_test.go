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

// strait-agent, built with the Makefile's tags, links no package whose
// reflect-by-name method calls (text/template's, html/template's, pulled
// in by gRPC's golang.org/x/net/trace without the grpcnotrace tag) make
// the linker keep every exported method of every linked type: that was
// 8 MB of the binary and ~4 MiB of an idle sidecar's resident file
// pages (bench/README.md, issue #24). cobra links text/template, but
// only html/template's Execute reached its method calls.
func TestLinksNoTemplates(t *testing.T) {
	goTool := testreq.Binary(t, "go", "golang-go", "/usr/local/go/bin/go")
	tags := makefileTags(t)
	out, err := exec.Command(goTool, "list", "-deps", "-tags", tags, ".").Output()
	if err != nil {
		t.Fatalf("go list -deps -tags %s: %v", tags, err)
	}
	for _, dep := range strings.Fields(string(out)) {
		switch dep {
		case "html/template", "golang.org/x/net/trace":
			t.Errorf("strait-agent (-tags %s) depends on %s", tags, dep)
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
