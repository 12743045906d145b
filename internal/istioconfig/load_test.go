package istioconfig

import (
	"path/filepath"
	"strings"
	"testing"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/straitmesh/strait/internal/proxypush"
)

const goodSE = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata:
  name: echo
  namespace: demo
spec:
  hosts: [echo.demo.svc.cluster.local]
  addresses: [240.240.0.10]
  ports:
  - {number: 80, name: http, protocol: HTTP, targetPort: 8080}
  location: MESH_INTERNAL
  resolution: STATIC
  workloadSelector:
    labels: {app: echo}
`

func TestParseFile(t *testing.T) {
	tests := []struct {
		name     string
		yaml     string
		wantN    int
		wantWarn int
		wantErrs []string // substrings, one per expected error
	}{
		{name: "good", yaml: goodSE, wantN: 1},
		{name: "leading separator and empty docs", yaml: "---\n# comment\n---\n" + goodSE + "---\n", wantN: 1},
		{name: "versions", yaml: strings.Replace(goodSE, "networking.istio.io/v1", "networking.istio.io/v1alpha3", 1) + "---\n" +
			strings.NewReplacer("networking.istio.io/v1", "networking.istio.io/v1beta1", "name: echo", "name: echo2").Replace(goodSE), wantN: 2},
		{name: "bad version", yaml: strings.Replace(goodSE, "networking.istio.io/v1", "networking.istio.io/v9", 1),
			wantErrs: []string{`bad.yaml: document 1: apiVersion: "networking.istio.io/v9" is not supported`}},
		{name: "other group skipped", yaml: "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {}\n", wantWarn: 1},
		{name: "unknown networking kind skipped", yaml: "apiVersion: networking.istio.io/v1\nkind: EnvoyFilter\nmetadata: {name: x}\nspec: {}\n", wantWarn: 1},
		{name: "empty host", yaml: goodSE + "---\n" + strings.NewReplacer("name: echo", "name: e2", "hosts: [echo.demo.svc.cluster.local]", `hosts: [""]`).Replace(goodSE),
			wantN: 1, wantErrs: []string{"bad.yaml: document 2: spec.hosts[0]: must not be empty"}},
		{name: "bad port", yaml: strings.Replace(goodSE, "number: 80", "number: 70000", 1),
			wantErrs: []string{"bad.yaml: document 1: spec.ports[0].number: 70000 is not a valid port (1-65535)"}},
		{name: "bad address", yaml: strings.Replace(goodSE, "240.240.0.10", "not-an-ip", 1),
			wantErrs: []string{"spec.addresses[0]: \"not-an-ip\" is not an IP address or CIDR"}},
		{name: "cidr ok", yaml: strings.Replace(goodSE, "240.240.0.10", "10.0.0.0/16", 1), wantN: 1},
		{name: "unknown field", yaml: strings.Replace(goodSE, "location:", "locashun:", 1),
			wantErrs: []string{`document 1: spec.locashun: unknown field "locashun" in ServiceEntry`}},
		{name: "bad enum", yaml: strings.Replace(goodSE, "STATIC", "STATICK", 1),
			wantErrs: []string{`document 1: spec.resolution: invalid value for enum field resolution: "STATICK" (one of NONE, STATIC, DNS, DNS_ROUND_ROBIN, DYNAMIC_DNS)`}},
		{name: "nested type error", yaml: "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: vs}\nspec:\n  hosts: [echo]\n  http:\n  - route:\n    - destination: {host: echo}\n      weight: 80\n    - destination: {host: echo}\n      weight: twenty\n",
			wantErrs: []string{`document 1: spec.http[0].route[1].weight: invalid value for int32 field weight: "twenty"`}},
		{name: "nested unknown field", yaml: "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: vs}\nspec:\n  hosts: [echo]\n  http:\n  - match:\n    - uri: {prefixx: /a}\n    route:\n    - destination: {host: echo}\n",
			wantErrs: []string{`document 1: spec.http[0].match[0].uri.prefixx: unknown field "prefixx" in StringMatch`}},
		{name: "duplicate", yaml: goodSE + "---\n" + goodSE, wantN: 1,
			wantErrs: []string{"bad.yaml: document 2: metadata.name: duplicate ServiceEntry demo/echo (also document 1)"}},
		{name: "missing name", yaml: "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {}\nspec: {hosts: [a.b]}\n",
			wantErrs: []string{"metadata.name: must be set", "spec.ports: must list at least one port"}},
		{name: "workloadentry hostname", yaml: "apiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {name: w}\nspec: {address: foo.example.com}\n",
			wantErrs: []string{`spec.address: "foo.example.com" is not an IP address`}},
		{name: "workloadentry ok", yaml: "apiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {name: w}\nspec: {address: 10.0.0.1, labels: {app: a}, ports: {http: 8080}}\n", wantN: 1},
		{name: "vs weights", yaml: `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: vs, namespace: demo}
spec:
  hosts: [echo]
  http:
  - route:
    - destination: {host: echo, subset: v1}
      weight: 80
    - destination: {host: echo, subset: v2}
      weight: 120
  - route:
    - destination: {host: echo, subset: v1}
      weight: 30
    - destination: {subset: v2}
      weight: 30
`, wantErrs: []string{
			// Weights are relative, as in Istio: 80/120 and 30/30 load.
			"spec.http[1].route[1].destination.host: must be set",
		}},
		{name: "dr subset without name", yaml: `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: dr}
spec:
  host: echo
  subsets:
  - labels: {version: v1}
`, wantErrs: []string{"spec.subsets[0].name: must be set"}},
		{name: "not yaml", yaml: "a: [b\n", wantErrs: []string{"document 1: invalid YAML"}},
		{name: "extra top-level field", yaml: goodSE + "bogus: 1\n", wantErrs: []string{"document 1: bogus: unknown field; a config has apiVersion, kind, metadata and spec (and status)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := ParseFile("bad.yaml", []byte(tt.yaml))
			if len(res.Configs) != tt.wantN {
				t.Errorf("got %d configs, want %d (err: %v)", len(res.Configs), tt.wantN, res.Err)
			}
			if len(res.Warnings) != tt.wantWarn {
				t.Errorf("got warnings %q, want %d", res.Warnings, tt.wantWarn)
			}
			fes := FieldErrors(res.Err)
			if len(fes) != len(tt.wantErrs) {
				t.Fatalf("got %d errors, want %d:\n%v", len(fes), len(tt.wantErrs), res.Err)
			}
			for i, want := range tt.wantErrs {
				if !strings.Contains(fes[i].Error(), want) {
					t.Errorf("error %d = %q, want it to contain %q", i, fes[i].Error(), want)
				}
			}
		})
	}
}

func TestParseDefaults(t *testing.T) {
	res := ParseFile("a.yaml", []byte(strings.Replace(goodSE, "  namespace: demo\n", "  labels: {team: a}\n", 1)))
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	c := res.Configs[0]
	if c.Namespace != DefaultNamespace || c.Labels["team"] != "a" || c.Source.Document != 1 {
		t.Fatalf("meta = %+v", c.Meta)
	}
	se := c.ServiceEntry()
	if se == nil || se.Ports[0].TargetPort != 8080 || se.Resolution != networking.ServiceEntry_STATIC {
		t.Fatalf("spec = %v", c.Spec)
	}
}

func TestStore(t *testing.T) {
	a := ParseFile("a.yaml", []byte(goodSE)).Configs[0]
	b := ParseFile("b.yaml", []byte(goodSE)).Configs[0]
	s := NewStore()
	if err := s.Add(a); err != nil {
		t.Fatal(err)
	}
	err := s.Add(b)
	if err == nil || !strings.Contains(err.Error(), "b.yaml: document 1: metadata.name: duplicate ServiceEntry demo/echo (also in a.yaml: document 1)") {
		t.Fatalf("duplicate across files: %v", err)
	}
	if s.Get(a.Key()) != a || len(s.List(KindServiceEntry)) != 1 || s.Len() != 1 {
		t.Fatal("store contents")
	}
	if d := Diff(nil, s); len(d) != 1 {
		t.Fatalf("diff from nil = %v", d)
	}
	if d := Diff(s, s); len(d) != 0 {
		t.Fatalf("diff with self = %v", d)
	}
	s2 := NewStore()
	c := ParseFile("a.yaml", []byte(strings.Replace(goodSE, "number: 80", "number: 81", 1))).Configs[0]
	_ = s2.Add(c)
	if d := Diff(s, s2); len(d) != 1 {
		t.Fatalf("diff changed = %v", d)
	}
	if d := Diff(s, NewStore()); len(d) != 1 {
		t.Fatalf("diff removed = %v", d)
	}
}

// TestExamplesParse keeps the example configs valid.
func TestExamplesParse(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("..", "..", "examples", "*", "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no examples found: %v", err)
	}
	for _, p := range paths {
		res := LoadFile(p)
		if res.Err != nil || len(res.Warnings) > 0 || len(res.Configs) == 0 {
			t.Errorf("%s: %d configs, warnings %q, err %v", p, len(res.Configs), res.Warnings, res.Err)
		}
	}
}

func TestStoreWith(t *testing.T) {
	a := ParseFile("a.yaml", []byte(goodSE)).Configs[0]
	replacement := ParseFile("b.yaml", []byte(goodSE)).Configs[0]
	s := NewStore()
	if err := s.Add(a); err != nil {
		t.Fatal(err)
	}
	added := *a
	added.Name = "other"
	with := s.With(map[proxypush.ConfigKey]*Config{a.Key(): replacement, added.Key(): &added})
	if with.Get(a.Key()) != replacement || with.Get(added.Key()) != &added || with.Len() != 2 {
		t.Fatalf("With: got %v, %v, len %d", with.Get(a.Key()), with.Get(added.Key()), with.Len())
	}
	if s.Get(a.Key()) != a || s.Get(added.Key()) != nil || s.Len() != 1 {
		t.Fatal("With modified the original store")
	}
	removed := with.With(map[proxypush.ConfigKey]*Config{a.Key(): nil})
	if removed.Get(a.Key()) != nil || removed.Len() != 1 || with.Get(a.Key()) == nil {
		t.Fatal("a nil replacement should remove the key from the new store only")
	}
	// The replacement has the same content, so only the added key differs.
	if d := Diff(s, with); len(d) != 1 {
		t.Errorf("Diff = %v, want only the added key", d)
	}
}

func TestHTTPActionLimitsRefused(t *testing.T) {
	for _, tc := range []struct{ spec, field string }{
		{"redirect: {uri: /x, redirectCode: 304}", "spec.http[0].redirect.redirectCode"},
		{"headers: {request: {set: {x-a: \"%START_TIME%\"}}}\n    route: [{destination: {host: a}}]", "spec.http[0].headers.request.set[x-a]"},
		{"route: [{destination: {host: a}, headers: {response: {add: {x-b: \"5%\"}}}}]", "spec.http[0].route[0].headers.response.add[x-b]"},
	} {
		doc := "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: v, namespace: ns}\nspec:\n  hosts: [a]\n  http:\n  - " + tc.spec + "\n"
		res := ParseFile("f.yaml", []byte(doc))
		if res.Err == nil || !strings.Contains(res.Err.Error(), tc.field+": ") || !strings.Contains(res.Err.Error(), "not supported by Strait yet") {
			t.Errorf("%s: err = %v, want a refusal naming %s", tc.spec, res.Err, tc.field)
		}
	}
	ok := "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: v, namespace: ns}\nspec:\n  hosts: [a]\n  http:\n  - redirect: {uri: /x, redirectCode: 308}\n"
	if res := ParseFile("f.yaml", []byte(ok)); res.Err != nil {
		t.Errorf("308 redirect refused: %v", res.Err)
	}
}

// TestTCPSourceSubnet: a tcp match's sourceSubnet is an address or a CIDR;
// anything else is refused with the field named.
func TestTCPSourceSubnet(t *testing.T) {
	doc := func(subnet string) []byte {
		return []byte("apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: v, namespace: ns}\nspec:\n  hosts: [a]\n  tcp:\n  - match: [{port: 5432}, {sourceSubnet: \"" + subnet + "\"}]\n    route: [{destination: {host: a}}]\n")
	}
	for _, ok := range []string{"10.1.0.0/16", "10.1.2.3", "fd00::/8"} {
		if res := ParseFile("f.yaml", doc(ok)); res.Err != nil {
			t.Errorf("sourceSubnet %q refused: %v", ok, res.Err)
		}
	}
	for _, bad := range []string{"10.1.0.0/33", "ten", "10.1.0.0/"} {
		res := ParseFile("f.yaml", doc(bad))
		if res.Err == nil || !strings.Contains(res.Err.Error(), "spec.tcp[0].match[1].sourceSubnet: ") {
			t.Errorf("sourceSubnet %q: err = %v, want an error naming spec.tcp[0].match[1].sourceSubnet", bad, res.Err)
		}
	}
}
