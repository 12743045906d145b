package istioconfig

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	networking "istio.io/api/networking/v1alpha3"
	"sigs.k8s.io/yaml"

	"github.com/straitmesh/strait/internal/istioconfig/schema"
	"github.com/straitmesh/strait/internal/proxypush"
)

// The tests in this file pin down the loading that mutation testing
// (make mutate PKG=./internal/istioconfig) found untested: each case fails
// when the check it names is removed or inverted. The validation's own
// are in package validate (mutation_test.go).

// doc returns a one-document file of kind with the given metadata and spec
// (YAML flow or block text indented by two spaces).
func doc(kind, meta, spec string) string {
	return "apiVersion: networking.istio.io/v1\nkind: " + kind + "\nmetadata: " + meta + "\nspec:\n" + spec
}

func vs(spec string) string { return doc("VirtualService", "{name: vs}", spec) }
func dr(spec string) string { return doc("DestinationRule", "{name: dr}", spec) }
func se(spec string) string { return doc("ServiceEntry", "{name: se}", spec) }
func sc(spec string) string { return doc("Sidecar", "{name: sc}", spec) }
func we(spec string) string { return doc("WorkloadEntry", "{name: we}", spec) }

const route = "  - route:\n    - destination: {host: echo}\n"

// validationCase is one document and the exact field errors it must
// produce, each as "FIELD: problem substring"; none means it is valid.
type validationCase struct {
	name string
	yaml string
	errs []string
}

func runValidation(t *testing.T, tests []validationCase) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := ParseFile("t.yaml", []byte(tc.yaml))
			// Validation of a field Strait refuses still runs (it is
			// what users get once the field is honoured); the refusal
			// itself is TestRefusals' business.
			var fes []*FieldError
			refused := 0
			for _, fe := range FieldErrors(res.Err) {
				if errors.Is(fe, ErrNotSupported) {
					refused++
					continue
				}
				fes = append(fes, fe)
			}
			var got []string
			for _, fe := range fes {
				got = append(got, fe.Field+": "+fe.Problem)
			}
			ok := len(got) == len(tc.errs)
			for i := 0; ok && i < len(got); i++ {
				field, problem, _ := strings.Cut(tc.errs[i], ": ")
				ok = fes[i].Field == field && strings.Contains(fes[i].Problem, problem)
			}
			if !ok {
				t.Fatalf("errors:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(tc.errs, "\n  "))
			}
			if len(tc.errs) == 0 && refused == 0 && len(res.Configs) != 1 {
				t.Fatalf("%d configs, want 1 (warnings %q)", len(res.Configs), res.Warnings)
			}
			if len(tc.errs) > 0 && len(res.Configs) != 0 {
				t.Fatalf("an invalid document was returned as a config")
			}
		})
	}
}

func TestParseDocumentEnvelope(t *testing.T) {
	runValidation(t, []validationCase{
		{name: "no apiVersion", yaml: "kind: ServiceEntry\nmetadata: {name: a}\nspec: {}\n", errs: []string{"apiVersion: must be set"}},
		{name: "no kind", yaml: "apiVersion: networking.istio.io/v1\nmetadata: {name: a}\nspec: {}\n", errs: []string{"kind: must be set"}},
		{name: "neither", yaml: "metadata: {name: a}\n", errs: []string{"apiVersion: must be set", "kind: must be set"}},
		{name: "null metadata", yaml: "apiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: null\nspec: {address: 10.0.0.1}\n", errs: []string{"metadata.name: must be set"}},
		{name: "no metadata", yaml: "apiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nspec: {address: 10.0.0.1}\n", errs: []string{"metadata.name: must be set"}},
		{name: "bad metadata", yaml: "apiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {name: [a]}\nspec: {address: 10.0.0.1}\n", errs: []string{"metadata.name: must be a string"}},
		{name: "no spec", yaml: "apiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {name: a}\n", errs: []string{"spec: must be set"}},
		{name: "null spec", yaml: "apiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {name: a}\nspec: null\n", errs: []string{"spec: must be set"}},
		{name: "spec not a mapping", yaml: "apiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {name: a}\nspec: [1]\n", errs: []string{"spec: must be a mapping of fields"}},
		{name: "list field not a list", yaml: vs("  hosts: [echo]\n  http: {route: []}\n"), errs: []string{"spec.http: must be a list"}},
		{name: "nested message null", yaml: vs("  hosts: [echo]\n  http:\n  - match: [{uri: null}]\n    route:\n    - destination: {host: echo}\n")},
		{name: "error after a nested message", yaml: dr("  host: a\n  trafficPolicy: {}\n  workloadSelector: {matchLabels: {a: [1]}}\n"),
			errs: []string{"spec.workloadSelector.matchLabels: invalid value for string field value"}},
		{name: "error after a null nested message", yaml: dr("  host: a\n  trafficPolicy: null\n  workloadSelector: {matchLabels: {a: [1]}}\n"),
			errs: []string{"spec.workloadSelector.matchLabels: invalid value for string field value"}},
		{name: "error after a list of messages", yaml: dr("  host: a\n  subsets: [{name: v1}]\n  trafficPolicy: {loadBalancer: {simple: FASTEST}}\n"),
			errs: []string{"spec.trafficPolicy.loadBalancer.simple: invalid value for enum field simple"}},
		{name: "proto snake_case name", yaml: se("  hosts: [a]\n  ports:\n  - {number: 80, name: a, target_port: 8080}\n")},
		{name: "well-known type", yaml: vs("  hosts: [echo]\n  http:\n  - timeout: soon\n" + "    route:\n    - destination: {host: echo}\n"),
			errs: []string{"spec.http[0].timeout: \"soon\" is not a duration (write e.g. 250ms, 1.5s, 1m or 1h)"}},
		{name: "map field", yaml: we("  address: 10.0.0.1\n  ports: {http: eighty}\n"), errs: []string{"spec.ports: invalid value for uint32 field value"}},
		{name: "scalar after a good one", yaml: se("  hosts: [a]\n  ports:\n  - {number: 80, name: a}\n  - {number: x, name: b}\n"), errs: []string{"spec.ports[1].number: invalid value for uint32 field number"}},
		{name: "unversioned group", yaml: "apiVersion: networking.istio.io\nkind: WorkloadEntry\nmetadata: {name: a}\nspec: {address: 10.0.0.1}\n",
			errs: []string{`apiVersion: "networking.istio.io" has no version; use networking.istio.io/v1`}},
		{name: "unknown version", yaml: "apiVersion: networking.istio.io/v2\nkind: WorkloadEntry\nmetadata: {name: a}\nspec: {address: 10.0.0.1}\n",
			errs: []string{`apiVersion: "networking.istio.io/v2" is not supported`}},
		{name: "null list element located", yaml: se("  hosts: [a, null]\n  ports: [{number: 80, name: a}]\n"), errs: []string{"spec.hosts: invalid value for string field hosts: null"}},
	})
	// A core kind with no group ("v1") is skipped with a warning.
	res := ParseFile("t.yaml", []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {}\n"))
	if res.Err != nil || len(res.Warnings) != 1 {
		// A document of another group may have any top-level fields: it
		// is skipped like a Service, not refused for its "data".
		t.Fatalf("ConfigMap with data: warnings %q err %v", res.Warnings, res.Err)
	}
	res = ParseFile("t.yaml", []byte("apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {}\n"))
	if res.Err != nil || len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "t.yaml: document 1: skipping v1 Service: only networking.istio.io, security.istio.io and telemetry.istio.io kinds are supported") {
		t.Fatalf("core Service: warnings %q err %v", res.Warnings, res.Err)
	}
}

func TestSplitDocuments(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{name: "one", in: "a: 1\n", want: []string{"a: 1\n"}},
		{name: "separator with comment", in: "a: 1\n--- # next\nb: 2\n", want: []string{"a: 1\n", "b: 2\n"}},
		{name: "CRLF separator", in: "a: 1\r\n---\r\nb: 2\r\n", want: []string{"a: 1\n", "b: 2\n"}},
		{name: "not a separator", in: "a: 1\n----\nb: ---\n", want: []string{"a: 1\n----\nb: ---\n"}},
		{name: "comments and blanks dropped", in: "---\n  # c\n\n---\na: 1\n---\n \t\n", want: []string{"a: 1\n"}},
		{name: "comment then content", in: "# c\na: 1\n", want: []string{"# c\na: 1\n"}},
		{name: "no final newline", in: "a: 1", want: []string{"a: 1\n"}},
	}
	for _, tc := range tests {
		var got []string
		docs, err := splitDocuments([]byte(tc.in))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for _, d := range docs {
			got = append(got, string(d.text))
		}
		if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestLongLines checks the line limit: a line longer than bufio's default
// 64 KiB is read, one longer than maxLineBytes refuses the whole file.
func TestLongLines(t *testing.T) {
	long := "# " + strings.Repeat("x", 100<<10) + "\n"
	res := ParseFile("long.yaml", []byte(long+goodSE+"---\n"+long+strings.Replace(goodSE, "name: echo", "name: echo2", 1)))
	if res.Err != nil || len(res.Configs) != 2 {
		t.Fatalf("100 KiB comment lines: %d configs, err %v", len(res.Configs), res.Err)
	}
	huge := goodSE + "---\n# " + strings.Repeat("x", maxLineBytes) + "\n" + goodSE
	res = ParseFile("huge.yaml", []byte(huge))
	fes := FieldErrors(res.Err)
	if len(res.Configs) != 0 || len(fes) != 1 || !strings.HasPrefix(fes[0].Error(), "huge.yaml: line 16: ") {
		t.Fatalf("a line over the limit: %d configs, err %v", len(res.Configs), res.Err)
	}
}

func TestLoadFileMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing.yaml")
	res := LoadFile(path)
	fes := FieldErrors(res.Err)
	if len(fes) != 1 || fes[0].File != path || !errors.Is(res.Err, res.Err) || !strings.HasPrefix(res.Err.Error(), path+": ") {
		t.Fatalf("err = %v", res.Err)
	}
	good := filepath.Join(t.TempDir(), "good.yaml")
	if err := os.WriteFile(good, []byte(goodSE), 0o644); err != nil {
		t.Fatal(err)
	}
	if res := LoadFile(good); res.Err != nil || len(res.Configs) != 1 || res.Configs[0].Source.File != good {
		t.Fatalf("good file: %+v", res)
	}
}

func TestFieldError(t *testing.T) {
	tests := []struct {
		e    FieldError
		want string
	}{
		{FieldError{File: "f", Document: 2, Field: "spec", Problem: "p"}, "f: document 2: spec: p"},
		{FieldError{File: "f", Problem: "p"}, "f: p"},
		{FieldError{Document: 1, Problem: "p"}, "document 1: p"},
		{FieldError{Field: "x", Problem: "p"}, "x: p"},
		{FieldError{Problem: "p"}, "p"},
	}
	for _, tc := range tests {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.e, got, tc.want)
		}
	}
	a, b, c := &FieldError{Problem: "a"}, &FieldError{Problem: "b"}, &FieldError{Problem: "c"}
	joined := errors.Join(a, fmt.Errorf("wrapped: %w", b), errors.Join(c))
	got := FieldErrors(joined)
	if len(got) != 3 || got[0] != a || got[1] != b || got[2] != c {
		t.Fatalf("FieldErrors = %v", got)
	}
	if FieldErrors(nil) != nil || len(FieldErrors(errors.New("plain"))) != 0 {
		t.Fatal("FieldErrors of nil or a plain error")
	}
	flat := joinErrors([]error{errors.Join(a, b), c})
	if j, ok := flat.(interface{ Unwrap() []error }); !ok || len(j.Unwrap()) != 3 {
		t.Fatalf("joinErrors did not flatten: %v", flat)
	}
	if strings.Count(flat.Error(), "\n") != 2 {
		t.Fatalf("joined message %q, want one line per problem", flat.Error())
	}
}

func TestConfigEqualAndAccessors(t *testing.T) {
	base := ParseFile("a.yaml", []byte(goodSE)).Configs[0]
	clone := func(f func(c *Config)) *Config {
		c := ParseFile("b.yaml", []byte(goodSE)).Configs[0]
		if f != nil {
			f(c)
		}
		return c
	}
	tests := []struct {
		name  string
		other *Config
		want  bool
	}{
		{"same pointer", base, true},
		{"same content, other source", clone(nil), true},
		{"nil", nil, false},
		{"other name", clone(func(c *Config) { c.Name = "x" }), false},
		{"other namespace", clone(func(c *Config) { c.Namespace = "x" }), false},
		{"other kind", clone(func(c *Config) { c.Kind = KindWorkloadEntry }), false},
		{"extra label", clone(func(c *Config) { c.Labels = map[string]string{"a": "b"} }), false},
		{"other label value", clone(func(c *Config) { c.Labels = map[string]string{"team": "b"} }), false},
		{"other label key", clone(func(c *Config) { c.Labels = map[string]string{"other": "a"} }), false},
		{"other spec", clone(func(c *Config) { c.ServiceEntry().Hosts = []string{"x"} }), false},
	}
	withLabels := func(c *Config) *Config { c.Labels = map[string]string{"team": "a"}; return c }
	for _, tc := range tests {
		a := base
		if strings.HasPrefix(tc.name, "other label") || tc.name == "extra label" {
			a = withLabels(clone(nil))
			if tc.name == "extra label" {
				a = clone(nil)
			}
		}
		if got := a.Equal(tc.other); got != tc.want {
			t.Errorf("%s: Equal = %v, want %v", tc.name, got, tc.want)
		}
		if tc.other != nil {
			if got := tc.other.Equal(a); got != tc.want {
				t.Errorf("%s: reverse Equal = %v, want %v", tc.name, got, tc.want)
			}
		}
	}
	var nilCfg *Config
	if !nilCfg.Equal(nil) || nilCfg.Equal(base) {
		t.Error("nil configs")
	}

	accessors := func(c *Config) []bool {
		return []bool{c.ServiceEntry() != nil, c.WorkloadEntry() != nil, c.VirtualService() != nil, c.DestinationRule() != nil, c.Sidecar() != nil,
			c.Gateway() != nil, c.AuthorizationPolicy() != nil, c.PeerAuthentication() != nil, c.RequestAuthentication() != nil, c.Telemetry() != nil}
	}
	specs := map[proxypush.Kind]string{
		KindServiceEntry: goodSE, KindWorkloadEntry: we("  address: 10.0.0.1\n"), KindVirtualService: vs("  hosts: [a]\n  http:\n" + route),
		KindDestinationRule: dr("  host: a\n"), KindSidecar: sc("  egress: [{hosts: ['./*']}]\n"),
		KindGateway:               "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {name: a}\nspec: {servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: ['*']}]}\n",
		KindAuthorizationPolicy:   "apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {name: a}\nspec: {action: DENY, rules: [{}]}\n",
		KindPeerAuthentication:    "apiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata: {name: a}\nspec: {mtls: {mode: STRICT}}\n",
		KindRequestAuthentication: "apiVersion: security.istio.io/v1\nkind: RequestAuthentication\nmetadata: {name: a}\nspec:\n  jwtRules: [{issuer: i, jwks: '{\"keys\":[]}'}]\n",
		KindTelemetry:             "apiVersion: telemetry.istio.io/v1\nkind: Telemetry\nmetadata: {name: a}\nspec: {tracing: [{randomSamplingPercentage: 5}]}\n",
	}
	for i, kind := range Kinds {
		res := ParseFile("k.yaml", []byte(specs[kind]))
		if res.Err != nil || len(res.Configs) != 1 {
			t.Fatalf("%s: %v", kind, res.Err)
		}
		got := accessors(res.Configs[0])
		for j := range got {
			if got[j] != (i == j) {
				t.Errorf("%s: accessor %d returned %v", kind, j, got[j])
			}
		}
		if schema.NewSpec(kind) == nil {
			t.Errorf("schema.NewSpec(%s) = nil", kind)
		}
	}
	if schema.NewSpec("EnvoyFilter") != nil {
		t.Error("schema.NewSpec(EnvoyFilter) is not nil")
	}
	if got := (Source{File: "f", Document: 3}).String(); got != "f: document 3" {
		t.Errorf("Source = %q", got)
	}
}

func TestStoreListAndDiff(t *testing.T) {
	mk := func(ns, name, host string) *Config {
		res := ParseFile("s.yaml", []byte(doc("ServiceEntry", "{name: "+name+", namespace: "+ns+"}", "  hosts: ["+host+"]\n  ports: [{number: 80, name: http}]\n")))
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		return res.Configs[0]
	}
	s := NewStore()
	for _, c := range []*Config{mk("b", "a", "x"), mk("a", "b", "x"), mk("a", "a", "x"), mk("b", "9a", "x")} {
		if err := s.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	wl := ParseFile("w.yaml", []byte(we("  address: 10.0.0.1\n"))).Configs[0]
	if err := s.Add(wl); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range s.List(KindServiceEntry) {
		names = append(names, c.Namespace+"/"+c.Name)
	}
	if strings.Join(names, " ") != "a/a a/b b/9a b/a" {
		t.Fatalf("List = %v", names)
	}
	if s.Len() != 5 || len(s.List(KindWorkloadEntry)) != 1 || len(s.List(KindSidecar)) != 0 {
		t.Fatalf("Len %d", s.Len())
	}
	var nilStore *Store
	if nilStore.Get(wl.Key()) != nil || nilStore.List(KindServiceEntry) != nil || nilStore.Len() != 0 {
		t.Fatal("nil store")
	}
	if d := Diff(s, nil); len(d) != 5 {
		t.Fatalf("Diff to nil = %v", d)
	}
	if d := Diff(nil, nil); len(d) != 0 {
		t.Fatalf("Diff(nil, nil) = %v", d)
	}
	changed := s.With(map[proxypush.ConfigKey]*Config{
		mk("a", "a", "x").Key(): mk("a", "a", "x2"), // changed
		mk("a", "b", "x").Key(): mk("a", "b", "x"),  // same content
		mk("b", "a", "x").Key(): nil,                // removed
		mk("c", "c", "x").Key(): mk("c", "c", "x"),  // added
	})
	d := Diff(s, changed)
	var keys []string
	for k := range d {
		keys = append(keys, k.Namespace+"/"+k.Name)
	}
	if len(d) != 3 {
		t.Fatalf("Diff = %v, want a/a, b/a and c/c", keys)
	}
	for _, k := range []string{"a/a", "b/a", "c/c"} {
		ns, name, _ := strings.Cut(k, "/")
		if _, ok := d[proxypush.ConfigKey{Kind: KindServiceEntry, Namespace: ns, Name: name}]; !ok {
			t.Errorf("Diff = %v misses %s", keys, k)
		}
	}
	// The kinds With did not touch are shared, the touched one copied.
	if len(s.List(KindServiceEntry)) != 4 || changed.Get(wl.Key()) != wl {
		t.Fatal("With changed the original or lost an untouched kind")
	}
}

// marshalDocument writes c back out as a YAML document.
func marshalDocument(t *testing.T, c *Config) []byte {
	t.Helper()
	spec, err := protojson.Marshal(c.Spec)
	if err != nil {
		t.Fatal(err)
	}
	md := map[string]any{"name": c.Name, "namespace": c.Namespace}
	if len(c.Labels) > 0 {
		md["labels"] = c.Labels
	}
	if len(c.Annotations) > 0 {
		md["annotations"] = c.Annotations
	}
	if !c.CreationTime.IsZero() {
		md["creationTimestamp"] = c.CreationTime
	}
	js, err := yaml.Marshal(map[string]any{"apiVersion": c.APIVersion, "kind": string(c.Kind), "metadata": md, "spec": jsonRaw(spec)})
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// jsonRaw embeds JSON in a value that sigs.k8s.io/yaml marshals as it is.
type jsonRaw []byte

func (j jsonRaw) MarshalJSON() ([]byte, error) { return j, nil }

// FuzzValidatedRoundTrip checks that every document ParseFile accepts,
// written back out from the parsed config, parses again, without error,
// to an equal config: validation does not depend on how a document was
// spelled, and nothing it accepted is lost in parsing.
//
//	go test -run '^$' -fuzz FuzzValidatedRoundTrip -fuzztime 60s ./internal/istioconfig/
func FuzzValidatedRoundTrip(f *testing.F) {
	f.Add([]byte(goodSE))
	f.Add([]byte(vs("  hosts: [echo]\n  http:\n  - match: [{uri: {regex: 'a.*'}, headers: {x: {prefix: p}}, port: 80}]\n    route:\n    - destination: {host: a, subset: v1}\n      weight: 50\n    - destination: {host: b}\n      weight: 50\n")))
	f.Add([]byte(dr("  host: echo\n  subsets:\n  - {name: v1, labels: {version: v1}}\n")))
	f.Add([]byte(sc("  egress:\n  - hosts: ['./*']\n")))
	f.Add([]byte(we("  address: 10.0.0.1\n  ports: {http: 8080}\n  weight: 3\n")))
	f.Fuzz(func(t *testing.T, data []byte) {
		res := ParseFile("fuzz.yaml", data)
		for _, c := range res.Configs {
			out := marshalDocument(t, c)
			again := ParseFile("again.yaml", out)
			if again.Err != nil || len(again.Configs) != 1 {
				t.Fatalf("accepted %q, but not its re-serialisation %q: %v", data, out, again.Err)
			}
			if !c.Equal(again.Configs[0]) {
				t.Fatalf("%q re-serialised as %q parses to a different config", data, out)
			}
		}
	})
}

// TestRoundTripExamples runs the round-trip property over the examples.
func TestRoundTripExamples(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join("..", "..", "examples", "*", "*.yaml"))
	if len(paths) == 0 {
		t.Fatal("no examples")
	}
	for _, p := range paths {
		for _, c := range LoadFile(p).Configs {
			out := marshalDocument(t, c)
			again := ParseFile(p, out)
			if again.Err != nil || len(again.Configs) != 1 || !c.Equal(again.Configs[0]) {
				t.Errorf("%s %s: re-serialised as %s: %v", p, c.Name, out, again.Err)
			}
		}
	}
	// The spec survives the trip exactly.
	c := ParseFile("a.yaml", []byte(goodSE)).Configs[0]
	again := ParseFile("b.yaml", marshalDocument(t, c)).Configs[0]
	if again.ServiceEntry().Ports[0].TargetPort != 8080 || again.ServiceEntry().Resolution != networking.ServiceEntry_STATIC {
		t.Fatalf("round trip lost fields: %v", again.Spec)
	}
}

// TestParseFileGoesOn checks that a bad, skipped or duplicate document
// does not stop the documents after it from loading.
func TestParseFileGoesOn(t *testing.T) {
	other := func(name string) string { return strings.Replace(goodSE, "name: echo", "name: "+name, 1) }
	file := strings.Join([]string{
		goodSE,
		goodSE, // duplicate
		other("e2"),
		"apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {}\n", // skipped
		other("e3"),
		strings.Replace(other("e4"), "number: 80", "number: 0", 1), // invalid
		other("e5"),
	}, "---\n")
	res := ParseFile("f.yaml", []byte(file))
	var names []string
	for _, c := range res.Configs {
		names = append(names, c.Name)
	}
	if strings.Join(names, ",") != "echo,e2,e3,e5" || len(res.Warnings) != 1 || len(FieldErrors(res.Err)) != 2 {
		t.Fatalf("configs %q warnings %q err %v", names, res.Warnings, res.Err)
	}
}
