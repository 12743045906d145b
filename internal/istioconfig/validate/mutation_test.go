package validate_test

import (
	"strings"
	"testing"
)

// The cases below pin down validation that mutation testing
// (make mutate PKG=./internal/istioconfig/validate) found untested: each
// fails when the check it names is removed or inverted.

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
