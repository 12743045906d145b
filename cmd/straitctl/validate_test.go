package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const validateVS = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: default}
spec:
  hosts: [reviews]
  http:
  - route:
    - destination: {host: reviews, subset: v1}
      weight: 60
    - destination: {host: reviews, subset: v2}
      weight: 30
`

// TestValidate: straitctl validate prints every problem of every file as
// FILE: document N: FIELD: problem, skipped kinds as warnings, duplicates
// across files, and fails when there was a problem.
func TestValidate(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("a.yaml", validateVS)
	write("b.yml", "apiVersion: networking.istio.io/v1alpha3\nkind: EnvoyFilter\nmetadata: {name: ef}\nspec: {}\n---\n"+
		strings.Replace(validateVS, "weight: 30", "weight: -30", 1)+"---\n"+
		"apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: r}\nspec:\n  hosts: [r]\n  http:\n  - match: [{uri: {prefix: /}, statPrefix: s}]\n    route: [{destination: {host: r}}]\n")
	write("c.yaml", validateVS)
	write(".hidden.yaml", "not: [yaml")
	write("notes.txt", "not: [yaml")

	var out bytes.Buffer
	if err := runValidate(nil, &out, []string{good}, ""); err != nil {
		t.Fatalf("a valid file: %v\n%s", err, out.String())
	}
	if out.String() != "1 document(s) valid\n" {
		t.Errorf("output %q", out.String())
	}

	out.Reset()
	err := runValidate(nil, &out, []string{dir}, "")
	if err == nil || err.Error() != "3 problem(s); 1 document(s) valid" {
		t.Errorf("error %v, want 3 problems and 1 valid document", err)
	}
	for _, want := range []string{
		filepath.Join(dir, "b.yml") + ": document 1: skipping networking.istio.io/v1alpha3 EnvoyFilter",
		filepath.Join(dir, "b.yml") + ": document 2: spec.http[0].route[1].weight: -30 is negative",
		filepath.Join(dir, "b.yml") + ": document 3: spec.http[0].match[0].statPrefix: not supported by Strait yet",
		filepath.Join(dir, "c.yaml") + ": document 1: metadata.name: duplicate VirtualService default/reviews (also in " + good + ": document 1)",
	} {
		if !strings.Contains(out.String(), want+"") {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}

	out.Reset()
	mesh := write("mesh.cfg", "connectTimeout: 1500ms\nenableEnvoyAccessLogService: true\n")
	if err := runValidate(strings.NewReader(validateVS), &out, []string{"-"}, mesh); err == nil || !strings.Contains(out.String(), "mesh config: enableEnvoyAccessLogService: not supported by Strait yet") {
		t.Errorf("mesh config with a refused field: error %v, output %q", err, out.String())
	}
}
