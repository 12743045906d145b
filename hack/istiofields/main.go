// Command istiofields writes docs/istio-fields.md, the table of every
// istio.io/api field Strait loads and whether it is honoured or refused,
// from the registry in internal/istioconfig/support. Run it from the
// repository root: go run ./hack/istiofields
package main

import (
	"fmt"
	"os"

	"github.com/straitmesh/strait/internal/istioconfig/support"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "istiofields:", err)
		os.Exit(1)
	}
}

func run() error {
	out := "docs/istio-fields.md"
	if len(os.Args) > 1 {
		out = os.Args[1]
	}
	if err := os.WriteFile(out, support.FieldsMarkdown(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	return nil
}
