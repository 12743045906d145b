package istioconfig

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
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
		{name: "content on the separator line", in: sidecar("a") + `--- {"apiVersion": "networking.istio.io/v1", "kind": "Sidecar", "metadata": {"name": "b"}, "spec": {"egress": [{"hosts": ["./*"]}]}}` + "\n---\n" + sidecar("c"), wantN: 3},
		{name: "tab indentation", in: sidecar("a") + "---\n# comment\n" + strings.Replace(sidecar("b"), "metadata: {name: b}", "metadata:\n\tname: b", 1), wantN: 1,
			wantErr: "f.yaml: document 2: invalid YAML: line 10: found character that cannot start any token (indent with spaces: YAML does not allow tabs)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := ParseFile("f.yaml", []byte(tc.in))
			if len(res.Configs) != tc.wantN {
				t.Errorf("%d configs loaded, want %d", len(res.Configs), tc.wantN)
			}
			if tc.wantErr == "" {
				if res.Err != nil {
					t.Errorf("err = %v", res.Err)
				}
				return
			}
			if res.Err == nil || !strings.HasPrefix(res.Err.Error(), tc.wantErr) {
				t.Errorf("err = %v\nwant prefix %s", res.Err, tc.wantErr)
			}
		})
	}
}

// TestEnvelopeMistakes: a misspelt kind of an Istio group, a List holding
// configs, a stray top-level field and an envelope of the wrong shape are
// refused by field; Istio kinds Strait does not serve and other groups'
// objects, whatever their fields, are skipped with a warning.
func TestEnvelopeMistakes(t *testing.T) {
	for _, tc := range []struct {
		name, in, wantErr, wantWarn string
	}{
		{name: "misspelt kind", in: "apiVersion: networking.istio.io/v1\nkind: ServiceEntri\nmetadata: {name: a}\nspec: {}\n",
			wantErr: `f.yaml: document 1: kind: "ServiceEntri" is not a networking.istio.io kind; did you mean ServiceEntry?`},
		{name: "lower-case kind", in: "apiVersion: security.istio.io/v1\nkind: authorizationpolicy\nmetadata: {name: a}\nspec: {}\n",
			wantErr: `f.yaml: document 1: kind: "authorizationpolicy" is not a security.istio.io kind; did you mean AuthorizationPolicy?`},
		{name: "made-up kind", in: "apiVersion: security.istio.io/v1\nkind: Firewall\nmetadata: {name: a}\nspec: {}\n",
			wantErr: `f.yaml: document 1: kind: "Firewall" is not a security.istio.io kind (its kinds are AuthorizationPolicy, PeerAuthentication, RequestAuthentication)`},
		{name: "kind not a string", in: "apiVersion: networking.istio.io/v1\nkind: [Sidecar]\nmetadata: {name: a}\nspec: {}\n",
			wantErr: "f.yaml: document 1: kind: must be a string"},
		{name: "List of configs", in: "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Service, metadata: {name: s}}\n- {apiVersion: networking.istio.io/v1, kind: Sidecar, metadata: {name: s}, spec: {}}\n",
			wantErr: `f.yaml: document 1: items[1]: a List holding networking.istio.io/v1 Sidecar is not read; write each item as its own document, the documents separated by "---" lines`},
		{name: "stray top-level field", in: "apiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {name: a}\nspec: {egress: [{hosts: [\"./*\"]}]}\negress: []\n",
			wantErr: "f.yaml: document 1: egress: unknown field; a config has apiVersion, kind, metadata and spec (and status)"},
		{name: "top level is a list", in: "- apiVersion: networking.istio.io/v1\n", wantErr: "f.yaml: document 1: not a Kubernetes-style object: a document is a mapping with apiVersion, kind, metadata and spec"},
		{name: "misspelt group", in: "apiVersion: networking.isito.io/v1\nkind: ServiceEntry\nmetadata: {name: a}\nspec: {}\n",
			wantErr: `f.yaml: document 1: apiVersion: "networking.isito.io" is not an Istio API group; did you mean networking.istio.io/v1?`},
		{name: "made-up Istio group", in: "apiVersion: securities.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {name: a}\nspec: {}\n",
			wantErr: `f.yaml: document 1: apiVersion: "securities.istio.io" is not an Istio API group; did you mean security.istio.io/v1?`},
		{name: "WasmPlugin skipped", in: "apiVersion: extensions.istio.io/v1alpha1\nkind: WasmPlugin\nmetadata: {name: a}\nspec: {}\n",
			wantWarn: "f.yaml: document 1: skipping extensions.istio.io/v1alpha1 WasmPlugin"},
		{name: "Telemetry of an old version", in: "apiVersion: telemetry.istio.io/v1beta1\nkind: Telemetry\nmetadata: {name: a}\nspec: {}\n",
			wantErr: `f.yaml: document 1: apiVersion: "telemetry.istio.io/v1beta1" is not supported; use telemetry.istio.io/v1 or v1alpha1`},
		{name: "misspelt telemetry group", in: "apiVersion: telemetry.isito.io/v1\nkind: Telemetry\nmetadata: {name: a}\nspec: {}\n",
			wantErr: `f.yaml: document 1: apiVersion: "telemetry.isito.io" is not an Istio API group; did you mean telemetry.istio.io/v1?`},
		{name: "EnvoyFilter skipped", in: "apiVersion: networking.istio.io/v1alpha3\nkind: EnvoyFilter\nmetadata: {name: a}\nspec: {}\n",
			wantWarn: "f.yaml: document 1: skipping networking.istio.io/v1alpha3 EnvoyFilter: kind not supported yet"},
		{name: "List of Services skipped", in: "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Service, metadata: {name: s}}\n",
			wantWarn: "f.yaml: document 1: skipping v1 List: only networking.istio.io, security.istio.io and telemetry.istio.io kinds are supported"},
		{name: "ConfigMap skipped", in: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {a: b}\n",
			wantWarn: "f.yaml: document 1: skipping v1 ConfigMap"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := ParseFile("f.yaml", []byte(tc.in))
			if len(res.Configs) != 0 {
				t.Errorf("%d configs loaded", len(res.Configs))
			}
			switch {
			case tc.wantErr != "":
				if res.Err == nil || res.Err.Error() != tc.wantErr || len(res.Warnings) != 0 {
					t.Errorf("err = %v, warnings %q\nwant err %s", res.Err, res.Warnings, tc.wantErr)
				}
			default:
				if res.Err != nil || len(res.Warnings) != 1 || !strings.HasPrefix(res.Warnings[0], tc.wantWarn) {
					t.Errorf("err = %v, warnings %q\nwant one warning %s", res.Err, res.Warnings, tc.wantWarn)
				}
			}
		})
	}
}

// endless is a reader that never ends (like /dev/zero).
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	return len(p), nil
}

// TestSizeLimits: a file over MaxFileBytes is refused whole, naming the
// file, read no further than the limit; a document over MaxDocumentBytes
// is refused alone; a file of junk lists maxProblems problems and counts
// the rest.
func TestSizeLimits(t *testing.T) {
	const wantFile = "file is larger than 8 MiB, the most a config file may hold; split its documents into several files"
	big := strings.Repeat("# padding\n", MaxFileBytes/10+1)
	if res := ParseFile("big.yaml", []byte(goodSE+big)); res.Err == nil || res.Err.Error() != "big.yaml: "+wantFile || len(res.Configs) != 0 {
		t.Errorf("big file: %d configs, err %v", len(res.Configs), res.Err)
	}
	path := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(path, []byte(goodSE+big), 0o600); err != nil {
		t.Fatal(err)
	}
	if res := LoadFile(path); res.Err == nil || res.Err.Error() != path+": "+wantFile {
		t.Errorf("LoadFile of a big file: err %v", res.Err)
	}
	if data, err := ReadLimited("-", endless{}); err == nil || err.Error() != "-: "+wantFile || data != nil {
		t.Errorf("endless stream: %d bytes, err %v", len(data), err)
	}
	if data, err := ReadFile(filepath.Join(t.TempDir(), "missing.yaml")); err == nil || !errors.Is(err, fs.ErrNotExist) || data != nil {
		t.Errorf("missing file: err %v", err)
	}

	hugeDoc := "apiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {name: huge}\n" + strings.Repeat("# padding padding\n", MaxDocumentBytes/18+1) + "spec: {}\n"
	res := ParseFile("f.yaml", []byte(goodSE+"---\n"+hugeDoc+"---\n"+strings.Replace(goodSE, "name: echo", "name: echo2", 1)))
	if len(res.Configs) != 2 || res.Err == nil || res.Err.Error() != "f.yaml: document 2: document (from line 16) is larger than 2 MiB, the most a config may hold (Kubernetes stores at most 1.5 MiB per object)" {
		t.Errorf("huge document: %d configs, err %v", len(res.Configs), res.Err)
	}

	junk := strings.Repeat("---\n- 1\n", maxProblems+5)
	fes := FieldErrors(ParseFile("junk.yaml", []byte(junk)).Err)
	if len(fes) != maxProblems+1 || fes[maxProblems-1].Document != maxProblems || fes[maxProblems].Error() != "junk.yaml: 5 more problems not listed" {
		t.Errorf("junk: %d problems, last %v", len(fes), fes[len(fes)-1])
	}
}

// TestMetadataMistakes: a bad metadata field is named by its path, with
// the fix.
func TestMetadataMistakes(t *testing.T) {
	doc := func(md string) []byte {
		return []byte("apiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: " + md + "\nspec: {egress: [{hosts: [\"./*\"]}]}\n")
	}
	for md, want := range map[string]string{
		"{name: a, labels: {version: 1}}":         `f.yaml: document 1: metadata.labels.version: must be a string; quote it ("1")`,
		"{name: a, annotations: {x: [1]}}":        `f.yaml: document 1: metadata.annotations.x: must be a string; quote it ("[1]")`,
		"{name: a, labels: [a]}":                  "f.yaml: document 1: metadata.labels: must be a mapping of strings",
		"{name: a, creationTimestamp: yesterday}": `f.yaml: document 1: metadata.creationTimestamp: "yesterday" is not an RFC 3339 time (e.g. 2024-05-01T12:00:00Z)`,
		"{name: a, namespace: 7}":                 "f.yaml: document 1: metadata.namespace: must be a string",
		"[a]":                                     "f.yaml: document 1: metadata: must be a mapping (name, namespace, labels, annotations)",
	} {
		if res := ParseFile("f.yaml", doc(md)); res.Err == nil || res.Err.Error() != want || len(res.Configs) != 0 {
			t.Errorf("metadata %s: err %v\nwant %s", md, res.Err, want)
		}
	}
	res := ParseFile("f.yaml", doc("{name: a, uid: x, labels: {a: b, n: null}, creationTimestamp: '2024-05-01T12:00:00Z'}"))
	if res.Err != nil || len(res.Configs) != 1 {
		t.Fatalf("good metadata: %v", res.Err)
	}
	if c := res.Configs[0]; c.Labels["a"] != "b" || c.CreationTime.Year() != 2024 || c.Namespace != DefaultNamespace {
		t.Errorf("metadata read as %+v", c.Meta)
	}
}

// TestDocumentBoundaries: every document of a file reaches the loader, also
// when the file is UTF-16 or separates documents with "..." (the YAML
// decoder keeps only the first document of what it is given, silently).
func TestDocumentBoundaries(t *testing.T) {
	sidecar := func(name string) string {
		return "apiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {name: " + name + "}\nspec: {egress: [{hosts: [\"./*\"]}]}\n"
	}
	two := sidecar("a") + "---\n" + sidecar("b")
	utf16 := func(s string, bigEndian bool) []byte {
		out := []byte{0xff, 0xfe}
		if bigEndian {
			out = []byte{0xfe, 0xff}
		}
		for _, r := range s {
			if bigEndian {
				out = append(out, byte(r>>8), byte(r))
			} else {
				out = append(out, byte(r), byte(r>>8))
			}
		}
		return out
	}
	for _, tc := range []struct {
		name string
		in   []byte
	}{
		{"UTF-16LE", utf16(two, false)},
		{"UTF-16BE", utf16(two, true)},
		{"document end marker", []byte(sidecar("a") + "...\n" + sidecar("b"))},
		{"end marker then start", []byte(sidecar("a") + "... # end\n---\n" + sidecar("b"))},
	} {
		res := ParseFile("f.yaml", tc.in)
		if res.Err != nil || len(res.Configs) != 2 {
			t.Errorf("%s: %d configs, err %v; want both documents", tc.name, len(res.Configs), res.Err)
		}
	}
	if res := ParseFile("f.yaml", append(utf16(two, false), 'x')); res.Err == nil || res.Err.Error() != "f.yaml: UTF-16 text (by its byte order mark) with an odd number of bytes; save the file as UTF-8" {
		t.Errorf("odd UTF-16: %v", res.Err)
	}
}
