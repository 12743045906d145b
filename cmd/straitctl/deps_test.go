package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/straitmesh/strait/internal/testreq"
)

// straitctl reads straitd's debug JSON through internal/debugapi; it must
// not link the xDS server, the registries or the generators to do so.
func TestDoesNotLinkTheControlPlane(t *testing.T) {
	goTool := testreq.Binary(t, "go", "golang-go", "/usr/local/go/bin/go")
	out, err := exec.Command(goTool, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"internal/xds", "internal/registry", "internal/mesh"} {
			pkg := "github.com/straitmesh/strait/" + banned
			if dep == pkg || strings.HasPrefix(dep, pkg+"/") {
				t.Errorf("straitctl depends on %s", dep)
			}
		}
	}
}
