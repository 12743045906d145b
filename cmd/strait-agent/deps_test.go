package main

import (
	"testing"

	"github.com/straitmesh/strait/internal/linkcheck"
)

// strait-agent, built with the Makefile's tags, links no package whose
// reflect-by-name method calls (text/template's, html/template's, pulled
// in by gRPC's golang.org/x/net/trace without the grpcnotrace tag) make
// the linker keep every exported method of every linked type: that was
// 8 MB of the binary and ~4 MiB of an idle sidecar's resident file
// pages (bench/README.md, issue #24). cobra links text/template, but
// only html/template's Execute reached its method calls.
func TestLinksNoTemplates(t *testing.T) {
	linkcheck.NoDeps(t, "strait-agent", "html/template", "golang.org/x/net/trace")
}

// strait-agent links none of the validators protoc-gen-validate generated for
// go-control-plane and cncf/xds: the proxy checks those rules with
// internal/proxy/pgv, and one call of a generated ValidateAll would keep
// every generated validator of every linked type (~5 MiB of the loaded
// binary, bench/README.md "Fifth round").
func TestLinksNoGeneratedValidators(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	linkcheck.NoSymbols(t, "strait-agent", linkcheck.GeneratedValidators, "generated validator")
}
