package validate_test

import (
	"strings"
	"testing"
)

// The cases below are what Istio's admission webhook refuses (or accepts
// where Strait once refused): each fails when the check it names in
// validateHTTPRouteActions or validateTrafficPolicies is removed.

func httpRule(rule string) string { return vs("  hosts: [echo]\n  http:\n  - " + rule + "\n") }

func TestValidateHTTPRouteLikeIstio(t *testing.T) {
	const to = "route: [{destination: {host: echo}}]"
	runValidation(t, []validationCase{
		// Weights are relative, as in Istio and Envoy.
		{name: "weights 60/30", yaml: httpRule("route: [{destination: {host: a}, weight: 60}, {destination: {host: b}, weight: 30}]")},
		{name: "weight above 100", yaml: httpRule("route: [{destination: {host: a}, weight: 150}, {destination: {host: b}, weight: 50}]")},
		{name: "single destination weight 0", yaml: httpRule("route: [{destination: {host: a}, weight: 0}]")},
		{name: "tls weights all 0", yaml: vs("  hosts: [echo]\n  tls:\n  - match: [{sniHosts: [echo]}]\n    route: [{destination: {host: a}, weight: 0}, {destination: {host: b}}]\n"),
			errs: []string{"spec.tls[0].route: the destinations' weights add up to 0"}},

		// Actions that do not combine.
		{name: "redirect and route", yaml: httpRule("redirect: {uri: /x}\n    " + to), errs: []string{"spec.http[0].redirect: cannot be combined with route"}},
		{name: "redirect and fault", yaml: httpRule("redirect: {uri: /x}\n    fault: {abort: {httpStatus: 500}}"), errs: []string{"spec.http[0].redirect: cannot be combined with fault"}},
		{name: "redirect and rewrite", yaml: httpRule("redirect: {uri: /x}\n    rewrite: {uri: /y}"), errs: []string{"spec.http[0].redirect: cannot be combined with rewrite"}},
		{name: "redirect and directResponse", yaml: httpRule("redirect: {uri: /x}\n    directResponse: {status: 200}"), errs: []string{"spec.http[0].redirect: cannot be combined with directResponse"}},
		{name: "directResponse and route", yaml: httpRule("directResponse: {status: 200}\n    " + to), errs: []string{"spec.http[0].directResponse: cannot be combined with route"}},
		{name: "directResponse and fault", yaml: httpRule("directResponse: {status: 200}\n    fault: {abort: {httpStatus: 500}}"), errs: []string{"spec.http[0].directResponse: cannot be combined with fault"}},
		{name: "directResponse and rewrite", yaml: httpRule("directResponse: {status: 200}\n    rewrite: {uri: /y}"), errs: []string{"spec.http[0].directResponse: cannot be combined with rewrite"}},
		{name: "mirror and mirrors", yaml: httpRule("mirror: {host: m}\n    mirrors: [{destination: {host: mm}}]\n    " + to), errs: []string{"spec.http[0].mirrors: cannot be combined with mirror"}},

		// Header operations.
		{name: "header ops", yaml: httpRule("headers: {request: {set: {host: a.example.com, x-a: b}, add: {x-b: c}, remove: [x-c]}, response: {set: {x-d: e}, remove: [x-e]}}\n    " + to)},
		{name: "bad header ops", yaml: httpRule("headers: {request: {set: {':path': /x}, remove: [host]}, response: {add: {Host: a, x-f: \"a\\nb\"}, remove: ['']}}\n    " + to),
			errs: []string{
				`spec.http[0].headers.request.set[:path]: ":path": a pseudo-header`,
				"spec.http[0].headers.request.remove[0]: the Host header cannot be changed by request.remove",
				"spec.http[0].headers.response.add[Host]: the Host header cannot be changed by response.add",
				"spec.http[0].headers.response.add[x-f]: the value has a control character",
				"spec.http[0].headers.response.remove[0]: header name must not be empty",
			}},
		{name: "destination header ops", yaml: httpRule("route: [{destination: {host: a}, headers: {response: {set: {':status': '200'}}}}]"),
			errs: []string{`spec.http[0].route[0].headers.response.set[:status]: ":status": a pseudo-header`}},
		{name: "authority twice", yaml: httpRule("rewrite: {authority: a.example.com}\n    headers: {request: {set: {':authority': b.example.com}}}\n    " + to),
			errs: []string{"spec.http[0]: the authority is set more than once"}},

		// CORS.
		{name: "cors", yaml: httpRule("corsPolicy: {allowOrigins: [{exact: 'https://a.example.com'}, {regex: 'https://.*\\.example\\.com'}], allowMethods: [GET, '*'], allowHeaders: [x-a, '*'], exposeHeaders: [x-b], maxAge: 24h}\n    " + to)},
		{name: "bad cors", yaml: httpRule("corsPolicy: {allowOrigins: [{exact: ''}, {regex: '('}], allowMethods: [get, FOO], allowHeaders: ['x a'], exposeHeaders: ['']}\n    " + to),
			errs: []string{
				"spec.http[0].corsPolicy.allowOrigins[0]: must set a non-empty exact, prefix or regex",
				`spec.http[0].corsPolicy.allowOrigins[1].regex: "(" is not a valid RE2`,
				`spec.http[0].corsPolicy.allowMethods[0]: "get" is not an HTTP method`,
				`spec.http[0].corsPolicy.allowMethods[1]: "FOO" is not an HTTP method`,
				`spec.http[0].corsPolicy.allowHeaders[0]: "x a" is not a header name`,
				`spec.http[0].corsPolicy.exposeHeaders[0]: "" is not a header name`,
			}},

		// Fault injection.
		{name: "fault", yaml: httpRule("fault: {delay: {fixedDelay: 5s, percentage: {value: 0.0001}}, abort: {grpcStatus: UNAVAILABLE, percentage: {value: 100}}}\n    " + to)},
		{name: "empty fault", yaml: httpRule("fault: {}\n    " + to), errs: []string{"spec.http[0].fault: must set abort, delay or both"}},
		{name: "bad fault", yaml: httpRule("fault: {delay: {percentage: {value: 0.00001}}, abort: {percentage: {value: 101}}}\n    " + to),
			errs: []string{
				"spec.http[0].fault.abort.percentage.value: 101 is not a percentage",
				"spec.http[0].fault.abort: must set httpStatus or grpcStatus",
				"spec.http[0].fault.delay.percentage.value: 1e-05 is finer than 0.0001",
				"spec.http[0].fault.delay: must set fixedDelay",
			}},
		{name: "abort status", yaml: httpRule("fault: {abort: {httpStatus: 199}}\n    " + to), errs: []string{"spec.http[0].fault.abort.httpStatus: 199 is not an HTTP status"}},
		{name: "abort status 600", yaml: httpRule("fault: {abort: {httpStatus: 600}}\n    " + to), errs: []string{"spec.http[0].fault.abort.httpStatus: 600 is not an HTTP status"}},
		{name: "abort grpc status", yaml: httpRule("fault: {abort: {grpcStatus: unavailable}}\n    " + to), errs: []string{`spec.http[0].fault.abort.grpcStatus: "unavailable" is not a gRPC status name`}},
		// Istio does not check the legacy integer percent (Envoy caps it at 100).
		{name: "delay percent", yaml: httpRule("fault: {delay: {fixedDelay: 1s, percent: 101}}\n    " + to)},

		// Mirrors.
		{name: "mirrors", yaml: httpRule("mirrors: [{destination: {host: m}, percentage: {value: 50}}]\n    mirrorPercentage: {value: 0}\n    " + to)},
		{name: "bad mirrors", yaml: httpRule("mirrors: [{}, {destination: {host: m, subset: A}, percentage: {value: -1}}]\n    " + to),
			errs: []string{
				"spec.http[0].mirrors[0].destination: is required",
				`spec.http[0].mirrors[1].destination.subset: "A" is not a valid subset name`,
				"spec.http[0].mirrors[1].percentage.value: -1 is not a percentage",
			}},
		{name: "bad mirror", yaml: httpRule("mirror: {host: m, port: {number: 0}}\n    mirrorPercent: 101\n    mirrorPercentage: {value: 100.5}\n    " + to),
			errs: []string{"spec.http[0].mirrorPercent: must be at most 100, got 101", "spec.http[0].mirrorPercentage.value: 100.5 is not a percentage", "spec.http[0].mirror.port.number: 0 is not a valid port"}},

		// Redirect and direct response.
		{name: "redirect parts", yaml: httpRule("redirect: {authority: a.example.com, port: 8443, scheme: https, redirectCode: 302}")},
		{name: "empty redirect", yaml: httpRule("redirect: {redirectCode: 301}"), errs: []string{"spec.http[0].redirect: must set at least one of uri"}},
		{name: "bad redirect", yaml: httpRule("redirect: {uri: /a, prefixRewrite: /b, scheme: ftp, port: 70000, redirectCode: 404}"),
			errs: []string{
				"spec.http[0].redirect: set uri or prefixRewrite, not both",
				"spec.http[0].redirect.redirectCode: 404 is not a redirect code",
				`spec.http[0].redirect.scheme: "ftp": must be http or https`,
				"spec.http[0].redirect.port: 70000 is not a valid port",
			}},
		{name: "prefixRewrite with exact match", yaml: httpRule("match: [{uri: {prefix: /a}}, {uri: {exact: /b}}]\n    redirect: {prefixRewrite: /c}"),
			errs: []string{"spec.http[0].redirect.prefixRewrite: needs every uri match to be a prefix match (match[1].uri is not)"}},
		{name: "prefixRewrite with prefix matches", yaml: httpRule("match: [{uri: {prefix: /a}}, {headers: {x-a: {exact: b}}}]\n    redirect: {prefixRewrite: /c}")},
		{name: "direct response status", yaml: httpRule("directResponse: {status: 199}"), errs: []string{"spec.http[0].directResponse.status: 199 is not an HTTP status"}},
		{name: "direct response body", yaml: httpRule("directResponse: {status: 200, body: {string: '" + strings.Repeat("a", 1<<20+1) + "'}}"),
			errs: []string{"spec.http[0].directResponse.body: is 1048577 bytes; at most 1 MiB"}},

		// Retries.
		{name: "retries", yaml: httpRule("retries: {attempts: 3, perTryTimeout: 2s, retryOn: '5xx,gateway-error,503,unavailable,retriable-status-codes'}\n    " + to)},
		{name: "retries off", yaml: httpRule("retries: {attempts: 0}\n    " + to)},
		{name: "bad retries", yaml: httpRule("retries: {attempts: -1, retryOn: '5xx,sometimes,999'}\n    " + to),
			errs: []string{"spec.http[0].retries.attempts: -1 is negative", `spec.http[0].retries.retryOn: "sometimes" is not a retry condition`, `spec.http[0].retries.retryOn: "999" is not a retry condition`}},
		{name: "retries 0 with settings", yaml: httpRule("retries: {attempts: 0, perTryTimeout: 1s}\n    " + to), errs: []string{"spec.http[0].retries.attempts: is 0 (retries disabled) but perTryTimeout"}},

		// Rewrite.
		{name: "rewrite both", yaml: httpRule("rewrite: {uri: /a, uriRegexRewrite: {match: '^/b', rewrite: /c}}\n    " + to), errs: []string{"spec.http[0].rewrite: set uri or uriRegexRewrite, not both"}},
		{name: "rewrite nothing", yaml: httpRule("rewrite: {}\n    " + to), errs: []string{"spec.http[0].rewrite: must set uri, uriRegexRewrite or authority"}},
		{name: "regex rewrite half", yaml: httpRule("rewrite: {uriRegexRewrite: {match: '('}}\n    " + to),
			errs: []string{"spec.http[0].rewrite.uriRegexRewrite: needs both match and rewrite", `spec.http[0].rewrite.uriRegexRewrite.regex: "(" is not a valid RE2`}},

		// Hosts and destinations.
		{name: "star host for the mesh", yaml: vs("  hosts: ['*']\n  http:\n" + route), errs: []string{`spec.hosts[0]: "*" is not allowed for the sidecars`}},
		{name: "star host for a gateway", yaml: vs("  hosts: ['*']\n  gateways: [gw]\n  http:\n" + route)},
		{name: "star host for a gateway and the mesh", yaml: vs("  hosts: ['*']\n  gateways: [gw, mesh]\n  http:\n" + route), errs: []string{`spec.hosts[0]: "*" is not allowed for the sidecars`}},
		{name: "overlapping hosts", yaml: vs("  hosts: [a.example.com, '*.example.com', b.example.org, B.example.org]\n  http:\n" + route),
			errs: []string{`spec.hosts[1]: "*.example.com" overlaps spec.hosts[0] "a.example.com"`, `spec.hosts[3]: "B.example.org" overlaps spec.hosts[2] "b.example.org"`}},
		{name: "star destination", yaml: httpRule("route: [{destination: {host: '*'}}]"), errs: []string{`spec.http[0].route[0].destination.host: "*" is not a destination`}},
		{name: "long subset", yaml: httpRule("route: [{destination: {host: a, subset: " + strings.Repeat("s", 64) + "}}]"), errs: []string{"spec.http[0].route[0].destination.subset: "}},

		// tls and tcp rules.
		{name: "sni within hosts", yaml: vs("  hosts: ['*.example.com', b.example.org]\n  tls:\n  - match: [{sniHosts: [a.example.com, '*.a.example.com', b.example.org], port: 443}]\n    route: [{destination: {host: a}}]\n")},
		{name: "sni outside hosts", yaml: vs("  hosts: [a.example.com]\n  tls:\n  - match: [{sniHosts: [b.example.com, '*.example.com']}]\n    route: [{destination: {host: a}}]\n"),
			errs: []string{`spec.tls[0].match[0].sniHosts[0]: "b.example.com" is not within the VirtualService's hosts [a.example.com]`, `spec.tls[0].match[0].sniHosts[1]: "*.example.com" is not within`}},
		{name: "tls rule without match", yaml: vs("  hosts: [a]\n  tls:\n  - route: [{destination: {host: a}}]\n  - match: [{port: 443}]\n"),
			errs: []string{"spec.tls[0].match: a tls rule needs at least one match", "spec.tls[1].match[0].sniHosts: must list at least one SNI host", "spec.tls[1].route: must list at least one destination"}},
		{name: "bad tls match", yaml: vs("  hosts: [a]\n  tls:\n  - match: [{sniHosts: [a], port: 70000, destinationSubnets: [x], sourceLabels: {'a b': c}}]\n    route: [{destination: {host: a}}]\n"),
			errs: []string{`spec.tls[0].match[0].destinationSubnets[0]: "x" is not an IP address or CIDR`, "spec.tls[0].match[0].port: 70000 is not a valid port", `spec.tls[0].match[0].sourceLabels: "a b" is not a valid label key`}},
		{name: "bad tcp match", yaml: vs("  hosts: [a]\n  tcp:\n  - match: [{port: 70000, destinationSubnets: [10.0.0.0/33]}]\n    route: [{destination: {host: a}}]\n  - match: [{port: 80}]\n"),
			errs: []string{`spec.tcp[0].match[0].destinationSubnets[0]: "10.0.0.0/33" is not an IP address or CIDR`, "spec.tcp[0].match[0].port: 70000 is not a valid port", "spec.tcp[1].route: must list at least one destination"}},

		// exportTo.
		{name: "exportTo", yaml: doc("VirtualService", "{name: vs, namespace: ns}", "  hosts: [echo]\n  exportTo: ['.', other]\n  http:\n"+route)},
		{name: "bad exportTo", yaml: doc("VirtualService", "{name: vs, namespace: ns}", "  hosts: [echo]\n  exportTo: ['.', ns, '~', Bad, '*']\n  http:\n"+route),
			errs: []string{
				`spec.exportTo[1]: "ns" is listed twice`,
				`spec.exportTo[2]: "~" (no namespace) is only allowed on a ServiceEntry`,
				`spec.exportTo[3]: "Bad" is not ".", "*" or a namespace name`,
				`spec.exportTo: "*" and "~" cannot be combined`,
			}},
	})
}

func TestValidateTrafficPolicyLikeIstio(t *testing.T) {
	runValidation(t, []validationCase{
		{name: "bookinfo circuit breaker", yaml: dr("  host: reviews\n  trafficPolicy:\n    connectionPool: {tcp: {maxConnections: 1}, http: {http1MaxPendingRequests: 1, maxRequestsPerConnection: 1}}\n    outlierDetection: {consecutive5xxErrors: 1, interval: 1s, baseEjectionTime: 3m, maxEjectionPercent: 100}\n")},
		{name: "empty policy", yaml: dr("  host: a\n  trafficPolicy: {}\n"), errs: []string{"spec.trafficPolicy: is empty"}},
		{name: "empty subset policy", yaml: dr("  host: a\n  subsets: [{name: v1, trafficPolicy: {}}]\n"), errs: []string{"spec.subsets[0].trafficPolicy: is empty"}},
		{name: "outlier percentages", yaml: dr("  host: a\n  trafficPolicy:\n    outlierDetection: {maxEjectionPercent: 101, minHealthPercent: -1}\n"),
			errs: []string{"spec.trafficPolicy.outlierDetection.maxEjectionPercent: 101 is not a percentage", "spec.trafficPolicy.outlierDetection.minHealthPercent: -1 is not a percentage"}},
		{name: "local origin without split", yaml: dr("  host: a\n  trafficPolicy:\n    outlierDetection: {consecutiveLocalOriginFailures: 2}\n"),
			errs: []string{"spec.trafficPolicy.outlierDetection.consecutiveLocalOriginFailures: needs splitExternalLocalOriginErrors: true"}},
		{name: "local origin with split", yaml: dr("  host: a\n  trafficPolicy:\n    outlierDetection: {consecutiveLocalOriginFailures: 2, splitExternalLocalOriginErrors: true}\n")},
		{name: "empty pool", yaml: dr("  host: a\n  trafficPolicy:\n    connectionPool: {}\n"), errs: []string{"spec.trafficPolicy.connectionPool: is empty"}},
		{name: "negative pool", yaml: dr("  host: a\n  trafficPolicy:\n    connectionPool: {tcp: {maxConnections: -1}, http: {http1MaxPendingRequests: -1, http2MaxRequests: -1, maxRequestsPerConnection: -1, maxRetries: -1, maxConcurrentStreams: -1}}\n"),
			errs: []string{
				"spec.trafficPolicy.connectionPool.http.http1MaxPendingRequests: -1 is negative",
				"spec.trafficPolicy.connectionPool.http.http2MaxRequests: -1 is negative",
				"spec.trafficPolicy.connectionPool.http.maxRequestsPerConnection: -1 is negative",
				"spec.trafficPolicy.connectionPool.http.maxRetries: -1 is negative",
				"spec.trafficPolicy.connectionPool.http.maxConcurrentStreams: -1 is negative",
				"spec.trafficPolicy.connectionPool.tcp.maxConnections: -1 is negative",
			}},
		{name: "upgrade and client protocol", yaml: dr("  host: a\n  trafficPolicy:\n    connectionPool: {http: {h2UpgradePolicy: UPGRADE, useClientProtocol: true}}\n"),
			errs: []string{"spec.trafficPolicy.connectionPool.http.useClientProtocol: cannot be true with h2UpgradePolicy UPGRADE"}},
		{name: "tunnel and proxyProtocol", yaml: dr("  host: a\n  trafficPolicy:\n    tunnel: {targetHost: p.example.com, targetPort: 8080}\n    proxyProtocol: {version: V1}\n"),
			errs: []string{"spec.trafficPolicy.proxyProtocol: cannot be combined with tunnel"}},
		{name: "tunnel alone", yaml: dr("  host: a\n  trafficPolicy:\n    tunnel: {targetHost: p.example.com, targetPort: 8080}\n")},
		{name: "client protocol without upgrade", yaml: dr("  host: a\n  trafficPolicy:\n    connectionPool: {http: {h2UpgradePolicy: DO_NOT_UPGRADE, useClientProtocol: true}}\n")},
		{name: "upgrade without client protocol", yaml: dr("  host: a\n  trafficPolicy:\n    connectionPool: {http: {h2UpgradePolicy: UPGRADE}}\n")},
		{name: "warmup at 100 percent", yaml: dr("  host: a\n  trafficPolicy:\n    loadBalancer: {simple: ROUND_ROBIN, warmup: {duration: 10s, minimumPercent: 100}}\n")},
		{name: "cookie", yaml: dr("  host: a\n  trafficPolicy:\n    loadBalancer: {consistentHash: {httpCookie: {name: s, ttl: 0s}}}\n")},
		{name: "cookie without name", yaml: dr("  host: a\n  trafficPolicy:\n    loadBalancer: {consistentHash: {httpCookie: {ttl: 10s}}}\n"),
			errs: []string{"spec.trafficPolicy.loadBalancer.consistentHash.httpCookie.name: is required"}},
		{name: "maglev", yaml: dr("  host: a\n  trafficPolicy:\n    loadBalancer: {consistentHash: {httpHeaderName: x-u, maglev: {tableSize: 65537}}}\n")},
		{name: "maglev sizes", yaml: dr("  host: a\n  trafficPolicy:\n    loadBalancer: {consistentHash: {httpHeaderName: x-u, maglev: {tableSize: 65536}}}\n    portLevelSettings:\n    - port: {number: 80}\n      loadBalancer: {consistentHash: {httpHeaderName: x-u, maglev: {tableSize: 5000011}}}\n    - port: {number: 81}\n      loadBalancer: {consistentHash: {httpHeaderName: x-u, maglev: {}}}\n"),
			errs: []string{
				"spec.trafficPolicy.loadBalancer.consistentHash.maglev.tableSize: 65536 is not a prime number",
				"spec.trafficPolicy.portLevelSettings[0].loadBalancer.consistentHash.maglev.tableSize: 5000011 is too large",
				"spec.trafficPolicy.portLevelSettings[1].loadBalancer.consistentHash.maglev.tableSize: is required",
			}},
		{name: "ring size twice", yaml: dr("  host: a\n  trafficPolicy:\n    loadBalancer: {consistentHash: {httpHeaderName: x-u, minimumRingSize: 1024, ringHash: {minimumRingSize: 1024}}}\n"),
			errs: []string{"spec.trafficPolicy.loadBalancer.consistentHash.minimumRingSize: cannot be combined with ringHash or maglev"}},
		{name: "warmup", yaml: dr("  host: a\n  trafficPolicy:\n    loadBalancer: {simple: ROUND_ROBIN, warmup: {duration: 60s, minimumPercent: 10, aggression: 2}}\n")},
		{name: "bad warmup", yaml: dr("  host: a\n  trafficPolicy:\n    loadBalancer: {simple: ROUND_ROBIN, warmup: {minimumPercent: 101, aggression: 0}}\n"),
			errs: []string{"spec.trafficPolicy.loadBalancer.warmup.duration: is required", "spec.trafficPolicy.loadBalancer.warmup.minimumPercent: 101 is not a percentage", "spec.trafficPolicy.loadBalancer.warmup.aggression: 0 must be greater than 0"}},
		{name: "port level settings", yaml: dr("  host: a\n  trafficPolicy:\n    portLevelSettings:\n    - loadBalancer: {simple: RANDOM}\n    - port: {number: 80}\n    - port: {number: 0}\n      tls: {mode: DISABLE}\n"),
			errs: []string{"spec.trafficPolicy.portLevelSettings[0].port: is required", "spec.trafficPolicy.portLevelSettings[1]: sets nothing for the port", "spec.trafficPolicy.portLevelSettings[2].port.number: 0 is not a valid port"}},
		{name: "subset names are DNS labels", yaml: dr("  host: a\n  subsets: [{name: V1}, {name: v_2}, {name: v.3}]\n"),
			errs: []string{`spec.subsets[0].name: "V1" is not a valid subset name`, `spec.subsets[1].name: "v_2" is not a valid subset name`, `spec.subsets[2].name: "v.3" is not a valid subset name`}},
		{name: "dr exportTo", yaml: doc("DestinationRule", "{name: dr, namespace: ns}", "  host: a\n  exportTo: ['*', '.']\n"), errs: []string{`spec.exportTo: "*" and "~" cannot be combined`}},
	})
}

func TestValidateResolutionLikeIstio(t *testing.T) {
	const ports = "  ports:\n  - {number: 80, name: http}\n"
	runValidation(t, []validationCase{
		{name: "endpoints with resolution NONE", yaml: se("  hosts: [a]\n" + ports + "  endpoints: [{address: 10.0.0.1}]\n"),
			errs: []string{"spec.endpoints: must be empty with resolution NONE"}},
		{name: "CIDR with DNS", yaml: se("  hosts: [a.example.com]\n  addresses: [10.0.0.0/24, 10.0.1.1]\n" + ports + "  resolution: DNS\n"),
			errs: []string{`spec.addresses[0]: "10.0.0.0/24": CIDR addresses are allowed only with resolution NONE or STATIC`}},
		{name: "CIDR with NONE", yaml: se("  hosts: [a.example.com]\n  addresses: [10.0.0.0/24]\n  ports: [{number: 5432, name: tcp, protocol: TCP}]\n  location: MESH_EXTERNAL\n")},
		{name: "wildcard with DNS", yaml: se("  hosts: ['*.example.com']\n" + ports + "  resolution: DNS_ROUND_ROBIN\n"),
			errs: []string{`spec.hosts[0]: "*.example.com": with resolution DNS_ROUND_ROBIN and no endpoints`}},
		{name: "wildcard with DNS and an endpoint", yaml: se("  hosts: ['*.example.com']\n" + ports + "  resolution: DNS\n  endpoints: [{address: proxy.example.com}]\n")},
		{name: "DNS_ROUND_ROBIN endpoints", yaml: se("  hosts: [a.example.com]\n" + ports + "  resolution: DNS_ROUND_ROBIN\n  endpoints: [{address: b.example.com}, {address: c.example.com}]\n"),
			errs: []string{"spec.endpoints: resolution DNS_ROUND_ROBIN takes at most one endpoint"}},
		{name: "hosts on TCP", yaml: se("  hosts: [a.example.com, b.example.com]\n  ports: [{number: 443, name: https, protocol: HTTPS}, {number: 3306, name: mysql, protocol: MYSQL}]\n  resolution: DNS\n"),
			errs: []string{"spec.ports[1]: port 3306 (MYSQL) is not HTTP or TLS, so the 2 hosts cannot be told apart"}},
		{name: "one host on TCP", yaml: se("  hosts: [a.example.com]\n  ports: [{number: 3306, name: mysql, protocol: MYSQL}]\n  resolution: DNS\n")},
		{name: "hosts on two TCP ports", yaml: se("  hosts: [a.example.com, b.example.com]\n  ports: [{number: 3306, name: mysql, protocol: MYSQL}, {number: 5432, name: tcp-pg, protocol: TCP}]\n  resolution: DNS\n"),
			errs: []string{"spec.ports[0]: port 3306 (MYSQL) is not HTTP or TLS"}},
		{name: "hosts on TCP with NONE", yaml: se("  hosts: [a.example.com, b.example.com]\n  ports: [{number: 3306, name: mysql, protocol: MYSQL}]\n")},
		{name: "hosts on HTTP by port name", yaml: se("  hosts: [a.example.com, b.example.com]\n  ports: [{number: 80, name: http-web}, {number: 443, name: tls}]\n  resolution: DNS\n")},
		{name: "se exportTo", yaml: doc("ServiceEntry", "{name: se, namespace: ns}", "  hosts: [a]\n"+ports+"  exportTo: ['~']\n")},
		{name: "se exportTo none and more", yaml: doc("ServiceEntry", "{name: se, namespace: ns}", "  hosts: [a]\n"+ports+"  exportTo: ['~', '.']\n"),
			errs: []string{`spec.exportTo: "*" and "~" cannot be combined`}},
	})
}

func TestValidateSidecarLikeIstio(t *testing.T) {
	runValidation(t, []validationCase{
		{name: "empty", yaml: sc("  workloadSelector: {labels: {app: a}}\n"), errs: []string{"spec: is empty"}},
		{name: "only a pool", yaml: sc("  inboundConnectionPool: {tcp: {maxConnections: 10}}\n")},
		{name: "bad pools", yaml: sc("  inboundConnectionPool: {}\n  ingress:\n  - port: {number: 9080, protocol: HTTP, name: http}\n    connectionPool: {http: {http1MaxPendingRequests: -1}}\n"),
			errs: []string{"spec.inboundConnectionPool: is empty", "spec.ingress[0].connectionPool.http.http1MaxPendingRequests: -1 is negative"}},
	})
}
