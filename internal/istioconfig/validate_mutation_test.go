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

	"github.com/straitmesh/strait/internal/proxypush"
)

// The tests in this file pin down validation that mutation testing
// (make mutate PKG=./internal/istioconfig) found untested: each case fails
// when the check it names is removed or inverted.

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

func TestValidateVirtualService(t *testing.T) {
	runValidation(t, []validationCase{
		{name: "minimal", yaml: vs("  hosts: [echo]\n  http:\n" + route)},
		{name: "tcp only", yaml: vs("  hosts: [echo]\n  tcp:\n" + route)},
		{name: "tls only", yaml: vs("  hosts: [echo]\n  tls:\n  - match: [{sniHosts: [echo]}]\n" + "    route:\n    - destination: {host: echo}\n")},
		{name: "no hosts: a delegate", yaml: vs("  http:\n" + route)},
		{name: "delegate with gateways", yaml: vs("  gateways: [gw]\n  http:\n" + route), errs: []string{"spec.gateways: a delegate VirtualService (one without hosts) must not set gateways"}},
		{name: "delegate with tcp", yaml: vs("  tcp:\n  - route: [{destination: {host: a}}]\n"), errs: []string{"spec: a delegate VirtualService (one without hosts) may only have http routes"}},
		{name: "delegate delegating", yaml: vs("  http:\n  - delegate: {name: d}\n"), errs: []string{"spec.http[0].delegate: a delegate VirtualService (one without hosts) cannot delegate again"}},
		{name: "delegate with a route", yaml: vs("  hosts: [echo]\n  http:\n  - delegate: {name: d}\n    route: [{destination: {host: a}}]\n"), errs: []string{"spec.http[0].delegate: cannot be combined with route"}},
		{name: "delegate without a name", yaml: vs("  hosts: [echo]\n  http:\n  - delegate: {namespace: x}\n"), errs: []string{"spec.http[0].delegate.name: must name the delegate VirtualService"}},
		{name: "bad host", yaml: vs("  hosts: [echo, 'a b']\n  http:\n" + route), errs: []string{`spec.hosts[1]: "a b" is not a valid host name`}},
		{name: "no routes", yaml: vs("  hosts: [echo]\n  exportTo: ['.']\n"), errs: []string{"spec: must have at least one of http, tcp or tls routes"}},
		{name: "http rule without destination", yaml: vs("  hosts: [echo]\n  http:\n  - name: r\n"), errs: []string{"spec.http[0].route: must list at least one destination"}},
		{name: "redirect", yaml: vs("  hosts: [echo]\n  http:\n  - redirect: {uri: /x}\n")},
		{name: "direct response", yaml: vs("  hosts: [echo]\n  http:\n  - directResponse: {status: 503}\n")},
		{name: "delegate", yaml: vs("  hosts: [echo]\n  http:\n  - delegate: {name: d}\n")},
		{name: "null http rule", yaml: vs("  hosts: [echo]\n  http: [null]\n"), errs: []string{"spec.http[0]: must not be null"}},
		{name: "null destination", yaml: vs("  hosts: [echo]\n  http:\n  - route: [null]\n"), errs: []string{"spec.http[0].route[0]: must not be null"}},
		{name: "route without destination", yaml: vs("  hosts: [echo]\n  http:\n  - route: [{weight: 100}]\n"), errs: []string{"spec.http[0].route[0].destination: must be set"}},
		{name: "null match", yaml: vs("  hosts: [echo]\n  http:\n  - match: [null]\n    route:\n    - destination: {host: echo}\n"), errs: []string{"spec.http[0].match[0]: must not be null"}},

		// String matches as Istio reads them: an empty match is a
		// presence match (any uri), a regex must compile.
		{name: "uri prefix", yaml: vs("  hosts: [echo]\n  http:\n  - match: [{uri: {prefix: /a}}, {uri: {exact: /b}}, {uri: {regex: '/c.*'}}]\n    route:\n    - destination: {host: echo}\n")},
		{name: "empty uri match", yaml: vs("  hosts: [echo]\n  http:\n  - match: [{uri: {}}]\n    route:\n    - destination: {host: echo}\n")},
		{name: "bad uri regex", yaml: vs("  hosts: [echo]\n  http:\n  - match: [{uri: {prefix: /}}, {uri: {regex: 'a('}}]\n    route:\n    - destination: {host: echo}\n"),
			errs: []string{`spec.http[0].match[1].uri.regex: "a(" is not a valid RE2 regular expression`}},
		{name: "header matches", yaml: vs("  hosts: [echo]\n  http:\n  - match: [{headers: {x-a: {exact: v}, x-b: {regex: '^v[0-9]+$'}}}]\n    route:\n    - destination: {host: echo}\n")},
		{name: "header presence match", yaml: vs("  hosts: [echo]\n  http:\n  - match: [{headers: {x-a: {exact: v}, x-b: {}}}]\n    route:\n    - destination: {host: echo}\n")},
		{name: "empty header prefix", yaml: vs("  hosts: [echo]\n  http:\n  - match: [{headers: {x-a: {prefix: ''}}}]\n    route:\n    - destination: {host: echo}\n"),
			errs: []string{"spec.http[0].match[0].headers[x-a].prefix: must not be empty"}},
		{name: "empty uri prefix", yaml: vs("  hosts: [echo]\n  http:\n  - match: [{uri: {prefix: ''}}]\n    route:\n    - destination: {host: echo}\n")},
		{name: "headers regex star", yaml: vs("  hosts: [echo]\n  http:\n  - match: [{headers: {x-a: {regex: '*'}}}]\n    route:\n    - destination: {host: echo}\n"),
			errs: []string{`spec.http[0].match[0].headers[x-a].regex: "*" is not a valid RE2 regular expression`}},
		{name: "withoutHeaders regex star", yaml: vs("  hosts: [echo]\n  http:\n  - match: [{withoutHeaders: {x-a: {regex: '*'}, x-b: {}}}]\n    route:\n    - destination: {host: echo}\n")},
		{name: "long regex", yaml: vs("  hosts: [echo]\n  http:\n  - match: [{queryParams: {q: {regex: '" + strings.Repeat("a", 1025) + "'}}}]\n    route:\n    - destination: {host: echo}\n"),
			errs: []string{"spec.http[0].match[0].queryParams[q].regex: is 1025 characters; at most 1024"}},
		{name: "match fields", yaml: vs("  hosts: [echo]\n  http:\n  - match: [{method: {exact: GET}, scheme: {exact: http}, authority: {prefix: echo}, queryParams: {v: {exact: '2'}, d: {}}, sourceLabels: {app: a}, sourceNamespace: demo, gateways: [mesh], name: m, ignoreUriCase: true, port: 80}]\n    route:\n    - destination: {host: echo}\n")},
		{name: "sourceNamespace of 63 characters", yaml: vs("  hosts: [echo]\n  http:\n  - match: [{sourceNamespace: " + strings.Repeat("a", 63) + "}]\n    route:\n    - destination: {host: echo}\n")},
		{name: "sourceNamespace of 64 characters", yaml: vs("  hosts: [echo]\n  http:\n  - match: [{sourceNamespace: " + strings.Repeat("a", 64) + "}]\n    route:\n    - destination: {host: echo}\n"),
			errs: []string{"spec.http[0].match[0].sourceNamespace: \"" + strings.Repeat("a", 64) + "\" is not a valid namespace"}},
		{name: "bad match fields", yaml: vs("  hosts: [echo]\n  http:\n  - match: [{method: {regex: 'G('}, headers: {':status': {exact: '200'}, 'a b': {exact: x}}, sourceLabels: {'a b': x}, sourceNamespace: Demo, gateways: ['']}]\n    route:\n    - destination: {host: echo}\n"),
			errs: []string{
				`spec.http[0].match[0].method.regex: "G(" is not a valid RE2 regular expression`,
				`spec.http[0].match[0].headers[:status]: ":status" is not a request pseudo-header`,
				`spec.http[0].match[0].headers[a b]: "a b" is not a valid header name`,
				`spec.http[0].match[0].sourceLabels: "a b" is not a valid label key`,
				`spec.http[0].match[0].sourceNamespace: "Demo" is not a valid namespace`,
				`spec.http[0].match[0].gateways[0]: must not be empty`,
			}},
		{name: "bad header regex", yaml: vs("  hosts: [echo]\n  http:\n  - match: [{headers: {x-a: {regex: '[z-a]'}}}]\n    route:\n    - destination: {host: echo}\n"),
			errs: []string{`spec.http[0].match[0].headers[x-a].regex: "[z-a]" is not a valid RE2 regular expression`}},
		{name: "empty header name", yaml: vs("  hosts: [echo]\n  http:\n  - match: [{headers: {'': {exact: v}}}]\n    route:\n    - destination: {host: echo}\n"),
			errs: []string{"spec.http[0].match[0].headers[]: header name must not be empty"}},
		{name: "match ports", yaml: vs("  hosts: [echo]\n  http:\n  - match: [{port: 1}, {port: 65535}, {port: 0}]\n    route:\n    - destination: {host: echo}\n")},
		{name: "bad match port", yaml: vs("  hosts: [echo]\n  http:\n  - match: [{port: 65536}]\n    route:\n    - destination: {host: echo}\n"),
			errs: []string{"spec.http[0].match[0].port: 65536 is not a valid port"}},

		// Destinations.
		{name: "destination port and subset", yaml: vs("  hosts: [echo]\n  http:\n  - route:\n    - destination: {host: echo, subset: v1, port: {number: 65535}}\n")},
		{name: "subset with upper case and underscore", yaml: vs("  hosts: [echo]\n  http:\n  - route:\n    - destination: {host: echo, subset: V_1}\n"),
			errs: []string{`spec.http[0].route[0].destination.subset: "V_1" is not a valid subset name (a DNS label`}},
		{name: "bad subset", yaml: vs("  hosts: [echo]\n  http:\n  - route:\n    - destination: {host: echo, subset: 'v 1'}\n"),
			errs: []string{`spec.http[0].route[0].destination.subset: "v 1" is not a valid subset name`}},
		{name: "bad destination port", yaml: vs("  hosts: [echo]\n  http:\n  - route:\n    - destination: {host: echo, port: {number: 0}}\n"),
			errs: []string{"spec.http[0].route[0].destination.port.number: 0 is not a valid port"}},
		{name: "bad destination host", yaml: vs("  hosts: [echo]\n  http:\n  - route:\n    - destination: {host: 'e/x'}\n"),
			errs: []string{`spec.http[0].route[0].destination.host: "e/x" is not a valid host name`}},

		// Weights.
		{name: "weights 0 and 100", yaml: vs("  hosts: [echo]\n  http:\n  - route:\n    - destination: {host: a}\n      weight: 0\n    - destination: {host: b}\n      weight: 100\n")},
		{name: "single destination any weight", yaml: vs("  hosts: [echo]\n  http:\n  - route:\n    - destination: {host: a}\n      weight: 30\n")},
		{name: "negative weight", yaml: vs("  hosts: [echo]\n  http:\n  - route:\n    - destination: {host: a}\n      weight: -1\n    - destination: {host: b}\n      weight: 101\n"),
			errs: []string{"spec.http[0].route[0].weight: -1 is negative"}},
		{name: "weights 99 are relative", yaml: vs("  hosts: [echo]\n  http:\n  - route:\n    - destination: {host: a}\n      weight: 49\n    - destination: {host: b}\n      weight: 50\n")},
		{name: "weights all 0", yaml: vs("  hosts: [echo]\n  http:\n  - route:\n    - destination: {host: a}\n      weight: 0\n    - destination: {host: b}\n      weight: 0\n"),
			errs: []string{"spec.http[0].route: the destinations' weights add up to 0"}},
		{name: "weights beyond uint32", yaml: vs("  hosts: [echo]\n  http:\n  - route:\n    - destination: {host: a}\n      weight: 2147483647\n    - destination: {host: b}\n      weight: 2147483647\n    - destination: {host: c}\n      weight: 2\n"),
			errs: []string{"spec.http[0].route: the destinations' weights add up to 4294967296, more than Envoy's limit"}},
		{name: "tcp weights 0 and 100", yaml: vs("  hosts: [echo]\n  tcp:\n  - route:\n    - destination: {host: a}\n      weight: 0\n    - destination: {host: b}\n      weight: 100\n")},
		{name: "tcp weights", yaml: vs("  hosts: [echo]\n  tcp:\n  - route:\n    - destination: {host: a}\n      weight: 40\n    - destination: {host: b}\n      weight: 60\n")},
		{name: "tcp bad weights", yaml: vs("  hosts: [echo]\n  tcp:\n  - route:\n    - destination: {host: a}\n      weight: 40\n    - destination: {host: b}\n      weight: 101\n  - route:\n    - destination: {host: a}\n      weight: -5\n"),
			errs: []string{"spec.tcp[1].route[0].weight: -5 is negative"}},
		{name: "tcp null rule", yaml: vs("  hosts: [echo]\n  tcp: [null]\n"), errs: []string{"spec.tcp[0]: must not be null"}},
		{name: "tcp null destination", yaml: vs("  hosts: [echo]\n  tcp: [{route: [{destination: {host: a}}, null]}]\n"), errs: []string{"spec.tcp[0].route[1]: must not be null"}},
		{name: "tcp destination without host", yaml: vs("  hosts: [echo]\n  tcp:\n  - route:\n    - destination: {subset: v1}\n"),
			errs: []string{"spec.tcp[0].route[0].destination.host: must be set"}},
	})
}

func TestValidateDestinationRule(t *testing.T) {
	runValidation(t, []validationCase{
		{name: "subsets", yaml: dr("  host: echo\n  subsets:\n  - {name: v1, labels: {version: v1}}\n  - {name: v2}\n")},
		{name: "duplicate subset names", yaml: dr("  host: echo\n  subsets:\n  - {name: v1, labels: {version: v1}}\n  - {name: v2, labels: {version: v2}}\n  - {name: v1, labels: {version: v3}}\n"),
			errs: []string{`spec.subsets[2].name: "v1" is already used by spec.subsets[0]`}},
		{name: "three of a kind", yaml: dr("  host: echo\n  subsets:\n  - {name: a}\n  - {name: a}\n  - {name: a}\n"),
			errs: []string{`spec.subsets[1].name: "a" is already used by spec.subsets[0]`, `spec.subsets[2].name: "a" is already used by spec.subsets[`}},
		{name: "bad subset name", yaml: dr("  host: echo\n  subsets:\n  - {name: 'v 1'}\n"), errs: []string{`spec.subsets[0].name: "v 1" is not a valid subset name`}},
		{name: "null subset", yaml: dr("  host: echo\n  subsets: [null]\n"), errs: []string{"spec.subsets[0]: must not be null"}},
		{name: "bad labels", yaml: dr("  host: echo\n  subsets:\n  - {name: v1, labels: {'-x': v, z: '-v'}}\n"),
			errs: []string{`spec.subsets[0].labels: "-x" is not a valid label key`, `spec.subsets[0].labels[z]: "-v" is not a valid label value`}},
		{name: "no host", yaml: dr("  subsets: []\n"), errs: []string{"spec.host: must not be empty"}},
		{name: "wildcard host", yaml: dr("  host: '*.example.com'\n")},
	})
}

func TestValidateServiceEntry(t *testing.T) {
	const ports = "  ports:\n  - {number: 80, name: http}\n"
	runValidation(t, []validationCase{
		{name: "minimal", yaml: se("  hosts: [a.example.com]\n" + ports)},
		{name: "no hosts", yaml: se(ports), errs: []string{"spec.hosts: must list at least one host"}},
		{name: "star host", yaml: se("  hosts: ['*']\n" + ports), errs: []string{`spec.hosts[0]: "*" is not allowed in a ServiceEntry`}},
		{name: "wildcard host", yaml: se("  hosts: ['*.example.com', 'trailing.dot.']\n" + ports)},
		{name: "bad address after good ones", yaml: se("  hosts: [a]\n  addresses: [10.0.0.1, 10.0.0.0/8, bad, 10.1.0.0/33]\n" + ports),
			errs: []string{`spec.addresses[2]: "bad" is not an IP address or CIDR`, `spec.addresses[3]: "10.1.0.0/33" is not an IP address or CIDR`}},
		{name: "addresses", yaml: se("  hosts: [a]\n  addresses: ['2001:db8::1', '10.0.0.0/8', 'fd00::/8']\n" + ports)},
		{name: "no ports", yaml: se("  hosts: [a]\n"), errs: []string{"spec.ports: must list at least one port"}},
		{name: "null port", yaml: se("  hosts: [a]\n  ports: [null]\n"), errs: []string{"spec.ports[0]: must not be null"}},
		{name: "port edges", yaml: se("  hosts: [a]\n  ports:\n  - {number: 1, name: a, targetPort: 65535}\n  - {number: 65535, name: b, targetPort: 1}\n")},
		{name: "port zero", yaml: se("  hosts: [a]\n  ports:\n  - {number: 0, name: a}\n"), errs: []string{"spec.ports[0].number: 0 is not a valid port"}},
		{name: "duplicate port number", yaml: se("  hosts: [a]\n  ports:\n  - {number: 80, name: a}\n  - {number: 81, name: b}\n  - {number: 80, name: c}\n"),
			errs: []string{"spec.ports[2].number: 80 is already used by spec.ports[0]"}},
		{name: "duplicate port name", yaml: se("  hosts: [a]\n  ports:\n  - {number: 80, name: a}\n  - {number: 81, name: b}\n  - {number: 82, name: a}\n"),
			errs: []string{`spec.ports[2].name: "a" is already used by spec.ports[0]`}},
		{name: "no port name", yaml: se("  hosts: [a]\n  ports:\n  - {number: 80}\n"), errs: []string{"spec.ports[0].name: must be set"}},
		{name: "bad port name", yaml: se("  hosts: [a]\n  ports:\n  - {number: 80, name: '-http'}\n"), errs: []string{`spec.ports[0].name: "-http" is not a valid port name`}},
		{name: "protocols any case", yaml: se("  hosts: [a]\n  ports:\n  - {number: 80, name: a, protocol: http}\n  - {number: 81, name: b, protocol: GRPC-Web}\n  - {number: 82, name: c, protocol: TCP}\n")},
		{name: "unknown protocol", yaml: se("  hosts: [a]\n  ports:\n  - {number: 80, name: a, protocol: QUIC}\n"),
			errs: []string{`spec.ports[0].protocol: "QUIC" is not a known protocol (one of GRPC, GRPC-WEB, HTTP, HTTP2, HTTPS, MONGO, MYSQL, REDIS, TCP, TLS, UDP)`}},
		{name: "bad target port", yaml: se("  hosts: [a]\n  ports:\n  - {number: 80, name: a, targetPort: 65536}\n"), errs: []string{"spec.ports[0].targetPort: 65536 is not a valid port"}},
		{name: "selector and endpoints", yaml: se("  hosts: [a]\n" + ports + "  resolution: STATIC\n  workloadSelector: {labels: {app: a}}\n  endpoints: [{address: 10.0.0.1}]\n"),
			errs: []string{"spec.workloadSelector: cannot be used together with spec.endpoints"}},
		{name: "bad selector labels", yaml: se("  hosts: [a]\n" + ports + "  workloadSelector: {labels: {'a b': x}}\n"),
			errs: []string{`spec.workloadSelector.labels: "a b" is not a valid label key`}},
		{name: "null endpoint", yaml: se("  hosts: [a]\n" + ports + "  endpoints: [null]\n"), errs: []string{"spec.endpoints[0]: must not be null"}},
		{name: "endpoint hostname with DNS", yaml: se("  hosts: [a]\n" + ports + "  resolution: DNS\n  endpoints: [{address: b.example.com}]\n")},
		{name: "endpoint hostname with DNS_ROUND_ROBIN", yaml: se("  hosts: [a]\n" + ports + "  resolution: DNS_ROUND_ROBIN\n  endpoints: [{address: b.example.com}]\n")},
		{name: "endpoint hostname with STATIC", yaml: se("  hosts: [a]\n" + ports + "  resolution: STATIC\n  endpoints: [{address: b.example.com}]\n"),
			errs: []string{`spec.endpoints[0].address: "b.example.com" is not an IP address (host names are only supported with resolution DNS)`}},
		{name: "endpoint bad hostname with DNS", yaml: se("  hosts: [a]\n" + ports + "  resolution: DNS\n  endpoints: [{address: 'b example'}]\n"),
			errs: []string{`spec.endpoints[0].address: "b example" is not an IP address or host name`}},
		{name: "endpoint unix socket", yaml: se("  hosts: [a]\n" + ports + "  resolution: STATIC\n  endpoints: [{address: 'unix:///var/run/a.sock'}]\n")},
		{name: "endpoint port names", yaml: se("  hosts: [a]\n" + ports + "  resolution: STATIC\n  endpoints: [{address: 10.0.0.1, ports: {http: 8080, grpc: 9090}}]\n"),
			errs: []string{`spec.endpoints[0].ports[grpc]: no port named "grpc" in spec.ports`}},
		{name: "endpoint port number", yaml: se("  hosts: [a]\n" + ports + "  resolution: STATIC\n  endpoints: [{address: 10.0.0.1, ports: {http: 0}}]\n"),
			errs: []string{"spec.endpoints[0].ports[http]: 0 is not a valid port"}},
	})
}

func TestValidateWorkloadEntry(t *testing.T) {
	runValidation(t, []validationCase{
		{name: "ipv6", yaml: we("  address: '2001:db8::5'\n")},
		{name: "no address", yaml: we("  labels: {app: a}\n"), errs: []string{"spec.address: must be set"}},
		{name: "weights", yaml: we("  address: 10.0.0.1\n  weight: 16777216\n")},
		{name: "weight too large", yaml: we("  address: 10.0.0.1\n  weight: 16777217\n"), errs: []string{"spec.weight: 16777217 is too large"}},
		{name: "label value edges", yaml: we("  address: 10.0.0.1\n  labels: {a: '', b: " + strings.Repeat("v", 63) + ", example.com/c: x, d_e.f: g}\n")},
		{name: "label value too long", yaml: we("  address: 10.0.0.1\n  labels: {a: " + strings.Repeat("v", 64) + "}\n"),
			errs: []string{"spec.labels[a]: \"" + strings.Repeat("v", 64) + "\" is not a valid label value"}},
		{name: "ports sorted", yaml: we("  address: 10.0.0.1\n  ports: {b: 70000, a: 0}\n"),
			errs: []string{"spec.ports[a]: 0 is not a valid port", "spec.ports[b]: 70000 is not a valid port"}},
	})
}

func TestValidateSidecar(t *testing.T) {
	runValidation(t, []validationCase{
		{name: "egress", yaml: sc("  egress:\n  - hosts: ['./*', '*/*', '~/*', 'istio-system/*', 'shop/reviews.shop.svc.cluster.local', './*.example.com']\n")},
		{name: "no hosts", yaml: sc("  egress:\n  - port: {number: 80, protocol: HTTP}\n"), errs: []string{"spec.egress[0].hosts: must list at least one NAMESPACE/HOST"}},
		{name: "egress ports", yaml: sc("  egress:\n  - port: {number: 8080, protocol: HTTP, name: http-local}\n    bind: 127.0.0.2\n    captureMode: NONE\n    hosts: ['./*']\n" +
			"  - port: {number: 9000, protocol: tcp}\n    captureMode: IPTABLES\n    hosts: ['./*']\n  - hosts: ['*/*']\n")},
		{name: "bad egress ports", yaml: sc("  egress:\n  - port: {number: 0, protocol: HTTP}\n    hosts: ['./*']\n" +
			"  - port: {number: 15001, protocol: HTTP}\n    hosts: ['./*']\n" +
			"  - port: {number: 80, protocol: HTTP}\n    hosts: ['./*']\n" +
			"  - port: {number: 80, protocol: SCTP}\n    hosts: ['./*']\n" +
			"  - port: {number: 81, protocol: UDP, name: '-x'}\n    bind: unix:///tmp/s\n    hosts: ['./*']\n"),
			errs: []string{
				"spec.egress[0].port.number: must be 1-65535, got 0",
				"spec.egress[1].port.number: 15001 is a port of the sidecar's own listeners",
				"spec.egress[3].port.number: 80 is already the port of an earlier listener",
				`spec.egress[3].port.protocol: "SCTP" is not a protocol Istio defines`,
				"spec.egress[4].port.protocol: UDP listeners are not supported by Strait yet",
				`spec.egress[4].port.name: "-x" is not a port name`,
				`spec.egress[4].bind: "unix:///tmp/s" is not an IP address`,
			}},
		{name: "ingress", yaml: sc("  ingress:\n  - port: {number: 9080, protocol: HTTP, name: http}\n    defaultEndpoint: 127.0.0.1:8080\n" +
			"  - port: {number: 9081, protocol: TCP}\n    defaultEndpoint: 0.0.0.0:8080\n  - port: {number: 9082, protocol: HTTP}\n    defaultEndpoint: '[::1]:8080'\n  - port: {number: 9083, protocol: HTTP}\n" +
			"  - port: {number: 9084, protocol: TCP}\n    captureMode: NONE\n    bind: 10.0.0.5\n  - port: {number: 9085, protocol: TCP}\n    captureMode: NONE\n")},
		{name: "bad ingress", yaml: sc("  ingress:\n  - defaultEndpoint: 127.0.0.1:8080\n" +
			"  - port: {number: 9080, protocol: HTTP}\n    defaultEndpoint: unix:///var/run/app.sock\n" +
			"  - port: {number: 9080, protocol: HTTP}\n    defaultEndpoint: 127.0.0.1\n" +
			"  - port: {number: 9081, protocol: HTTP}\n    defaultEndpoint: '[::]:8080'\n" +
			"  - port: {number: 9082, protocol: HTTP}\n    defaultEndpoint: 10.0.0.1:99999\n" +
			"  - port: {number: 9083, protocol: HTTP}\n    bind: 10.0.0.5\n  - port: {number: 9084, protocol: HTTP}\n    bind: ten\n    captureMode: NONE\n"),
			errs: []string{
				"spec.ingress[0].port: is required on an ingress listener",
				`spec.ingress[1].defaultEndpoint: "unix:///var/run/app.sock": unix domain socket endpoints are not supported by Strait yet`,
				"spec.ingress[2].port.number: 9080 is already the port of an earlier listener",
				`spec.ingress[2].defaultEndpoint: "127.0.0.1" is not HOST:PORT`,
				`spec.ingress[3].defaultEndpoint: "[::]:8080": the workload's IPv6 address is not supported by Strait yet`,
				`spec.ingress[4].defaultEndpoint: "10.0.0.1:99999": port "99999" is not 1-65535`,
				`spec.ingress[4].defaultEndpoint: "10.0.0.1:99999": the host must be 127.0.0.1, [::1] or 0.0.0.0`,
				"spec.ingress[5].bind: applies only with captureMode: NONE",
				`spec.ingress[6].bind: "ten" is not an IP address`,
			}},
		{name: "catch-all not last", yaml: sc("  egress:\n  - hosts: ['./*']\n  - port: {number: 80, protocol: HTTP}\n    hosts: ['./*']\n"),
			errs: []string{"spec.egress[0].port: is required on every egress listener but the last"}},
		{name: "catch-all with bind", yaml: sc("  egress:\n  - hosts: ['./*']\n    bind: 127.0.0.1\n"),
			errs: []string{"spec.egress[0].port: is required with bind or captureMode"}},
		{name: "two bad hosts", yaml: sc("  egress:\n  - hosts: [reviews, './*', 'x/']\n"),
			errs: []string{`spec.egress[0].hosts[0]: "reviews" is not NAMESPACE/HOST`, "spec.egress[0].hosts[2]: must not be empty"}},
		{name: "no slash", yaml: sc("  egress:\n  - hosts: [reviews]\n"), errs: []string{`spec.egress[0].hosts[0]: "reviews" is not NAMESPACE/HOST`}},
		{name: "empty namespace", yaml: sc("  egress:\n  - hosts: ['/reviews']\n"), errs: []string{`spec.egress[0].hosts[0]: "/reviews" is not NAMESPACE/HOST`}},
		{name: "bad namespace", yaml: sc("  egress:\n  - hosts: ['./*', 'Shop/*']\n"), errs: []string{`spec.egress[0].hosts[1]: namespace "Shop" is not a namespace name`}},
		{name: "bad host", yaml: sc("  egress:\n  - hosts: ['./a b']\n"), errs: []string{`spec.egress[0].hosts[0]: "a b" is not a valid host name`}},
		{name: "empty host", yaml: sc("  egress:\n  - hosts: ['./']\n"), errs: []string{"spec.egress[0].hosts[0]: must not be empty"}},
		{name: "selector", yaml: sc("  workloadSelector: {labels: {app: a}}\n  egress:\n  - hosts: ['./*']\n")},
		{name: "bad selector", yaml: sc("  workloadSelector: {labels: {app: '-'}}\n  outboundTrafficPolicy: {mode: ALLOW_ANY}\n"), errs: []string{`spec.workloadSelector.labels[app]: "-" is not a valid label value`}},
	})
}

func TestValidateMeta(t *testing.T) {
	name253 := strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 61)
	runValidation(t, []validationCase{
		{name: "dotted name", yaml: doc("WorkloadEntry", "{name: a.b-c, namespace: ns-1}", "  address: 10.0.0.1\n")},
		{name: "253 characters", yaml: doc("WorkloadEntry", "{name: "+name253+"}", "  address: 10.0.0.1\n")},
		{name: "254 characters", yaml: doc("WorkloadEntry", "{name: "+name253+"e}", "  address: 10.0.0.1\n"),
			errs: []string{"metadata.name: \"" + name253 + "e\" is not a valid name"}},
		{name: "upper case name", yaml: doc("WorkloadEntry", "{name: A}", "  address: 10.0.0.1\n"), errs: []string{`metadata.name: "A" is not a valid name`}},
		{name: "63-character namespace", yaml: doc("WorkloadEntry", "{name: a, namespace: "+strings.Repeat("n", 63)+"}", "  address: 10.0.0.1\n")},
		{name: "64-character namespace", yaml: doc("WorkloadEntry", "{name: a, namespace: "+strings.Repeat("n", 64)+"}", "  address: 10.0.0.1\n"),
			errs: []string{"metadata.namespace: \"" + strings.Repeat("n", 64) + "\" is not a valid namespace"}},
		{name: "dotted namespace", yaml: doc("WorkloadEntry", "{name: a, namespace: a.b}", "  address: 10.0.0.1\n"), errs: []string{`metadata.namespace: "a.b" is not a valid namespace`}},
	})
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
	if res.Err != nil || len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "t.yaml: document 1: skipping v1 Service: only networking.istio.io and security.istio.io kinds are supported") {
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
			c.Gateway() != nil, c.AuthorizationPolicy() != nil, c.PeerAuthentication() != nil, c.RequestAuthentication() != nil}
	}
	specs := map[proxypush.Kind]string{
		KindServiceEntry: goodSE, KindWorkloadEntry: we("  address: 10.0.0.1\n"), KindVirtualService: vs("  hosts: [a]\n  http:\n" + route),
		KindDestinationRule: dr("  host: a\n"), KindSidecar: sc("  egress: [{hosts: ['./*']}]\n"),
		KindGateway:               "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {name: a}\nspec: {servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: ['*']}]}\n",
		KindAuthorizationPolicy:   "apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {name: a}\nspec: {action: DENY, rules: [{}]}\n",
		KindPeerAuthentication:    "apiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata: {name: a}\nspec: {mtls: {mode: STRICT}}\n",
		KindRequestAuthentication: "apiVersion: security.istio.io/v1\nkind: RequestAuthentication\nmetadata: {name: a}\nspec:\n  jwtRules: [{issuer: i, jwks: '{\"keys\":[]}'}]\n",
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
		if newSpec(kind) == nil {
			t.Errorf("newSpec(%s) = nil", kind)
		}
	}
	if newSpec("EnvoyFilter") != nil {
		t.Error("newSpec(EnvoyFilter) is not nil")
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
