package istioconfig

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	yamlv3 "go.yaml.in/yaml/v3"

	"github.com/straitmesh/strait/internal/proxypush"
)

// kindSeeds are one valid spec per kind, the starting points of the fuzz
// tests below.
var kindSeeds = map[proxypush.Kind]string{
	KindServiceEntry: `hosts: [echo.demo.svc.cluster.local]
addresses: [240.240.0.10]
ports:
- {number: 80, name: http, protocol: HTTP, targetPort: 8080}
location: MESH_INTERNAL
resolution: STATIC
workloadSelector: {labels: {app: echo}}
`,
	KindWorkloadEntry: "address: 10.0.0.1\nlabels: {app: a}\nports: {http: 8080}\n",
	KindVirtualService: `hosts: [echo]
http:
- match:
  - uri: {prefix: /a}
    headers: {x-user: {exact: bob}}
  route:
  - destination: {host: echo, subset: v1}
    weight: 80
  - destination: {host: echo, subset: v2}
    weight: 20
  timeout: 1.5s
  retries: {attempts: 3, perTryTimeout: 250ms, retryOn: "5xx,reset"}
  fault: {abort: {percentage: {value: 10}, httpStatus: 503}}
tcp:
- route:
  - destination: {host: echo, port: {number: 9000}}
`,
	KindDestinationRule: `host: echo
trafficPolicy:
  connectionPool: {tcp: {maxConnections: 10, connectTimeout: 1s}, http: {http1MaxPendingRequests: 5}}
  outlierDetection: {consecutive5xxErrors: 3, interval: 10s, baseEjectionTime: 30s}
  loadBalancer: {simple: ROUND_ROBIN}
  tls: {mode: ISTIO_MUTUAL}
subsets:
- name: v1
  labels: {version: v1}
`,
	KindSidecar: "egress:\n- hosts: [\"./*\", \"istio-system/*\"]\n",
	KindAuthorizationPolicy: `selector: {matchLabels: {app: echo}}
action: ALLOW
rules:
- from:
  - source: {principals: ["cluster.local/ns/demo/sa/client"]}
  to:
  - operation: {methods: [GET], paths: ["/api/*"]}
  when:
  - key: request.headers[x-token]
    values: ["abc"]
`,
	KindPeerAuthentication: "selector: {matchLabels: {app: echo}}\nmtls: {mode: STRICT}\nportLevelMtls: {8080: {mode: PERMISSIVE}}\n",
	KindRequestAuthentication: `selector: {matchLabels: {app: echo}}
jwtRules:
- issuer: https://issuer.example.com
  jwksUri: https://issuer.example.com/jwks
  forwardOriginalToken: true
`,
}

// wrapSpec makes a whole document of one kind around a spec.
func wrapSpec(kind proxypush.Kind, name, spec string) string {
	group := GroupOf(kind)
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: %s/v1\nkind: %s\nmetadata:\n  name: %s\n  namespace: demo\nspec:\n", group, kind, name)
	for _, line := range strings.Split(strings.TrimRight(spec, "\n"), "\n") {
		b.WriteString("  " + line + "\n")
	}
	return b.String()
}

// addFileSeeds adds every YAML file of the repository's examples and
// end-to-end test data as a seed: real configs users write.
func addFileSeeds(f *testing.F) {
	for _, pattern := range []string{"../../examples/*/*.yaml", "../../test/e2e/testdata/*/*.yaml", "../../test/e2e/testdata/*/*/*.yaml"} {
		paths, _ := filepath.Glob(pattern)
		for _, p := range paths {
			data, err := os.ReadFile(p)
			if err == nil && len(data) < 64<<10 {
				f.Add(data)
			}
		}
	}
}

// FuzzParseFile feeds whole files to the loader. Whatever the input, it
// must not panic, every problem must name the file (and a document number
// in range), every loaded config must be complete, and a loaded config
// written back out must load again to the same config.
func FuzzParseFile(f *testing.F) {
	var all strings.Builder
	i := 0
	for _, kind := range Kinds {
		doc := wrapSpec(kind, fmt.Sprintf("n%d", i), kindSeeds[kind])
		f.Add([]byte(doc))
		all.WriteString(doc + "---\n")
		i++
	}
	f.Add([]byte(all.String()))
	f.Add([]byte(strings.ReplaceAll(all.String(), "\n", "\r\n")))
	f.Add([]byte("\xef\xbb\xbf" + all.String()))
	f.Add([]byte(`{"apiVersion":"networking.istio.io/v1","kind":"WorkloadEntry","metadata":{"name":"w"},"spec":{"address":"10.0.0.1"}}`))
	f.Add([]byte("apiVersion: v1\nkind: List\nitems:\n- apiVersion: networking.istio.io/v1\n  kind: Sidecar\n  metadata: {name: s}\n  spec: {}\n"))
	f.Add([]byte("a: &a [x, x]\nb: &b [*a, *a]\nc: [*b, *b]\n"))
	f.Add([]byte("apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: a}\nmetadata: {name: b}\nspec: {}\n"))
	f.Add([]byte("\x00\x01\xff"))
	// Boundaries the splitter once missed, losing the second document.
	f.Add([]byte(wrapSpec(KindSidecar, "a", kindSeeds[KindSidecar]) + "...\n" + wrapSpec(KindSidecar, "b", kindSeeds[KindSidecar])))
	f.Add([]byte("\xff\xfea\x00:\x00 \x001\x00\n\x00-\x00-\x00-\x00\n\x00b\x00:\x00 \x002\x00\n\x00"))
	f.Add([]byte("---\n---\n# only comments\n"))
	addFileSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		checkParse(t, data)
	})
}

// FuzzParseSpec fuzzes the spec of each kind inside a well-formed
// envelope, so that the mutations reach the per-kind decoding and
// validation rather than stopping at the envelope.
func FuzzParseSpec(f *testing.F) {
	for i, kind := range Kinds {
		f.Add(uint8(i), kindSeeds[kind])
	}
	f.Add(uint8(2), "hosts: [a]\nhttp: [{route: [{destination: {host: a}, weight: -1}]}]\n")
	f.Add(uint8(3), "host: a\ntrafficPolicy: {connectionPool: {tcp: {connectTimeout: 99999999999999h}}}\n")
	f.Add(uint8(5), "rules: [{when: [{key: \"request.auth.claims[\", values: [x]}]}]\n")
	f.Fuzz(func(t *testing.T, k uint8, spec string) {
		kind := Kinds[int(k)%len(Kinds)]
		checkParse(t, []byte(wrapSpec(kind, "fuzz", spec)))
	})
}

// checkParse parses data and checks what must hold for any input.
func checkParse(t *testing.T, data []byte) {
	t.Helper()
	const name = "fuzz.yaml"
	res := ParseFile(name, data)
	docs := bytes.Count(data, []byte("\n")) + 1
	for _, fe := range FieldErrors(res.Err) {
		if fe.File != name {
			t.Fatalf("error names file %q, want %q: %v", fe.File, name, fe)
		}
		if fe.Document < 0 || fe.Document > docs {
			t.Fatalf("error names document %d of at most %d: %v", fe.Document, docs, fe)
		}
		if fe.Problem == "" {
			t.Fatalf("error without a problem: %#v", fe)
		}
	}
	if res.Err != nil && len(FieldErrors(res.Err)) == 0 {
		t.Fatalf("error that is not a FieldError: %v", res.Err)
	}
	checkNoDocumentLost(t, data, res)
	for _, w := range res.Warnings {
		if !strings.HasPrefix(w, name+": document ") {
			t.Fatalf("warning does not name file and document: %q", w)
		}
	}
	seen := map[proxypush.ConfigKey]bool{}
	for _, c := range res.Configs {
		if c.Name == "" || c.Namespace == "" || GroupOf(c.Kind) == "" || c.Spec == nil {
			t.Fatalf("incomplete config loaded: %+v", c.Meta)
		}
		if c.Source.File != name || c.Source.Document < 1 || c.Source.Document > docs {
			t.Fatalf("config source %v out of range", c.Source)
		}
		if seen[c.Key()] {
			t.Fatalf("two configs with key %v", c.Key())
		}
		seen[c.Key()] = true
		roundTrip(t, c)
	}
}

// roundTrip writes c back out and loads it again: what the loader
// accepted once it must accept again, unchanged.
func roundTrip(t *testing.T, c *Config) {
	t.Helper()
	out := marshalDocument(t, c)
	again := ParseFile("again.yaml", out)
	if again.Err != nil || len(again.Configs) != 1 {
		t.Fatalf("config %v loaded once but not again: %v\n%s", c.Key(), again.Err, out)
	}
	if !again.Configs[0].Equal(c) {
		t.Fatalf("config %v changed on a round trip:\n%s", c.Key(), out)
	}
}

// checkNoDocumentLost compares the loader with another YAML decoder: every
// document that go-yaml v3 finds in data must have an outcome (a config,
// a warning or an error naming it). A document the splitter missed would
// reach the decoder with the one before it, which keeps only the first.
func checkNoDocumentLost(t *testing.T, data []byte, res FileResult) {
	t.Helper()
	docs := 0
	dec := yamlv3.NewDecoder(bytes.NewReader(data))
	for {
		var n yamlv3.Node
		if err := dec.Decode(&n); err != nil {
			if !errors.Is(err, io.EOF) {
				return // not YAML to go-yaml v3 either: nothing to compare
			}
			break
		}
		if len(n.Content) > 0 && !(n.Content[0].Kind == yamlv3.ScalarNode && n.Content[0].Tag == "!!null") {
			docs++
		}
	}
	outcomes := map[int]bool{}
	for _, c := range res.Configs {
		outcomes[c.Source.Document] = true
	}
	for _, w := range res.Warnings {
		var n int
		if _, err := fmt.Sscanf(strings.TrimPrefix(w, "fuzz.yaml: "), "document %d:", &n); err == nil {
			outcomes[n] = true
		}
	}
	for _, fe := range FieldErrors(res.Err) {
		if fe.Document == 0 {
			return // a file-level problem (size, a long line): the file is refused whole
		}
		outcomes[fe.Document] = true
	}
	if len(outcomes) < docs {
		t.Fatalf("go-yaml v3 finds %d documents, the loader accounts for %d (%v): a document was lost", docs, len(outcomes), outcomes)
	}
}
