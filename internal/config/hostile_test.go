package config

import (
	"strings"
	"testing"
)

// TestHostileYAML: malformed YAML is refused with the file, the document,
// the line counted from the top of the file and how to fix it; the good
// documents of the same file still load.
func TestHostileYAML(t *testing.T) {
	sidecar := func(name string) string {
		return "apiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {name: " + name + "}\nspec: {egress: [{hosts: [\"./*\"]}]}\n"
	}
	for _, tc := range []struct {
		name    string
		in      string
		wantN   int
		wantErr string
	}{
		{name: "duplicate key", in: sidecar("a") + "---\n" + sidecar("b") + "metadata: {name: c}\n", wantN: 1,
			wantErr: `f.yaml: document 2: invalid YAML: line 10: key "metadata" already set in map (a key may appear once in a mapping; remove or merge the repeated one)`},
		{name: "duplicate key in spec", in: strings.Replace(sidecar("a"), "spec: {", "spec: {egress: [], ", 1),
			wantErr: `f.yaml: document 1: invalid YAML: line 4: key "egress" already set in map`},
		{name: "duplicate JSON key", in: `{"apiVersion": "networking.istio.io/v1", "kind": "Sidecar", "kind": "Sidecar", "metadata": {"name": "a"}, "spec": {}}`,
			wantErr: `f.yaml: document 1: invalid YAML: line 1: key "kind" already set in map`},
		{name: "tab indentation", in: sidecar("a") + "---\n# comment\n" + strings.Replace(sidecar("b"), "metadata: {name: b}", "metadata:\n\tname: b", 1), wantN: 1,
			wantErr: "f.yaml: document 2: invalid YAML: line 10: found character that cannot start any token (indent with spaces: YAML does not allow tabs)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := ParseFile("f.yaml", []byte(tc.in))
			if len(res.Configs) != tc.wantN {
				t.Errorf("%d configs loaded, want %d", len(res.Configs), tc.wantN)
			}
			if res.Err == nil || !strings.HasPrefix(res.Err.Error(), tc.wantErr) {
				t.Errorf("err = %v\nwant prefix %s", res.Err, tc.wantErr)
			}
		})
	}
}
