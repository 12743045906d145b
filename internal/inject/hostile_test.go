package inject

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestIntoResourceFileHostile: kube-inject refuses what kubectl would
// (a key written twice), says which document and line is wrong, keeps
// content written on a separator line, and holds no more than
// maxDocumentBytes of a huge or endless document.
func TestIntoResourceFileHostile(t *testing.T) {
	inj := New(DefaultSettings(), Options{})
	pod := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: app\n    image: app\n"
	for _, tc := range []struct {
		name, in, err string
		injected      int
	}{
		{name: "duplicate key", in: "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n---\n" + pod + "metadata: {name: q}\n",
			err: `document 2: parse YAML: line 13: key "metadata" already set in map (a key may appear once in a mapping; remove or merge the repeated one)`},
		{name: "tab", in: pod + "---\n" + strings.Replace(pod, "  name: p", "\tname: p", 1),
			err: "document 2: parse YAML: line 13: found character that cannot start any token (indent with spaces: YAML does not allow tabs)"},
		{name: "content on the separator line", in: "--- " + `{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "a", "image": "a"}]}}` + "\n", injected: 1},
		{name: "separator with a comment", in: "--- # first\n" + pod, injected: 1},
		{name: "huge document", in: pod + "---\n# " + strings.Repeat("x", maxDocumentBytes) + "\n", err: "read YAML: document from line 10: larger than 16 MiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := inj.IntoResourceFile(strings.NewReader(tc.in), &out)
			if tc.err != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
					t.Fatalf("error %v, want %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(out.String(), "name: istio-proxy"); n != tc.injected {
				t.Errorf("%d sidecars injected, want %d:\n%s", n, tc.injected, out.String())
			}
		})
	}
	// An endless stream stops at the limit instead of filling memory.
	err := inj.IntoResourceFile(io.MultiReader(strings.NewReader("a: "), endless{}), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "larger than 16 MiB") {
		t.Errorf("endless input: %v", err)
	}
}

// endless is an input that never ends.
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}

// TestSettingsFilesHostile: a ConfigMap without the expected key, another
// manifest given in place of a settings file, a key written twice or an
// oversized file is refused with what to do, never read as the defaults.
func TestSettingsFilesHostile(t *testing.T) {
	cm := func(key, value string) []byte {
		return []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio-sidecar-injector}\ndata:\n  " + key + ": " + value + "\n")
	}
	for _, tc := range []struct {
		name  string
		parse func([]byte) error
		in    []byte
		want  string
	}{
		{"config: ConfigMap without config", parseConfigErr, cm("values", "'{}'"),
			"injector config: data.config: the ConfigMap has no config key; it holds the injector config under data.config"},
		{"values: ConfigMap without values", parseValuesErr, cm("config", "'{}'"),
			"injector values: data.values: the ConfigMap has no values key; it holds the injector values under data.values"},
		{"mesh: ConfigMap without mesh", parseMeshErr, cm("meshNetworks", "'{}'"),
			"mesh config: data.mesh: the ConfigMap has no mesh key; it holds the mesh config under data.mesh"},
		{"config: not a string", parseConfigErr, cm("config", "{policy: enabled}"),
			`injector config: data.config: must be a string (write "config: |" and the injector config indented below it)`},
		{"config: a Deployment", parseConfigErr, []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n"),
			"injector config: this is a apps/v1 Deployment, not the injector config; give the file itself or the ConfigMap that holds it under data.config"},
		{"config: unknown field", parseConfigErr, []byte("polcy: enabled\n"),
			`injector config: unknown field "polcy" (the injector config has policy, defaultTemplates, templates, template, neverInjectSelector, alwaysInjectSelector, injectedAnnotations)`},
		{"config: duplicate key", parseConfigErr, []byte("policy: enabled\npolicy: disabled\n"),
			`injector config: line 2: key "policy" already set in map`},
		{"values: duplicate key", parseValuesErr, []byte("global:\n  proxy: {image: a}\n  proxy: {image: b}\n"),
			`injector values: line 3: key "proxy" already set in map`},
		{"mesh: duplicate key", parseMeshErr, []byte("trustDomain: a\ntrustDomain: b\n"),
			`mesh config: line 2: key "trustDomain" already set in map`},
		{"values: too large", parseValuesErr, []byte("# " + strings.Repeat("x", MaxSettingsBytes)),
			"injector values: larger than 4 MiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.parse(tc.in); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error %v\nwant %s", err, tc.want)
			}
		})
	}

	if _, err := ReadSettingsFile("/dev/zero"); err == nil || !strings.Contains(err.Error(), "/dev/zero: larger than 4 MiB") {
		t.Errorf("ReadSettingsFile(/dev/zero) = %v", err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ConfigFileName), cm("values", "'{}'"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadDir(dir, nil); err == nil || !strings.Contains(err.Error(), "the ConfigMap has no config key") {
		t.Errorf("LoadDir with a ConfigMap lacking config: %v", err)
	}
}

func parseConfigErr(b []byte) error { _, err := ParseConfig(b); return err }
func parseValuesErr(b []byte) error { _, err := ParseValues(b); return err }
func parseMeshErr(b []byte) error   { _, err := ParseMeshConfig(b); return err }

// TestDocumentBoundaries: a "..." end marker separates documents (else
// the YAML decoder would drop the second one), and UTF-16 input, whose
// separators cannot be seen, is refused.
func TestDocumentBoundaries(t *testing.T) {
	inj := New(DefaultSettings(), Options{})
	pod := func(name string) string {
		return "apiVersion: v1\nkind: Pod\nmetadata: {name: " + name + "}\nspec: {containers: [{name: a, image: a}]}\n"
	}
	var out bytes.Buffer
	if err := inj.IntoResourceFile(strings.NewReader(pod("a")+"...\n"+pod("b")), &out); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), "name: istio-proxy"); n != 2 {
		t.Errorf("%d pods injected, want 2:\n%s", n, out.String())
	}
	err := inj.IntoResourceFile(strings.NewReader("\xff\xfea\x00:\x00 \x001\x00\n\x00"), &out)
	if err == nil || err.Error() != "read YAML: the input is UTF-16 (by its byte order mark); save it as UTF-8" {
		t.Errorf("UTF-16 input: %v", err)
	}
}
