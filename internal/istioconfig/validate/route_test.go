package validate_test

import (
	"encoding/base64"
	"strings"
	"testing"
)

// TestValidateHTTPRouteBounds pins the edges of the http route checks in
// validateHTTPRouteActions and its helpers: each bound is tried on both sides, and loops that
// report one problem per item are given two bad items.
func TestValidateHTTPRouteBounds(t *testing.T) {
	const to = "route: [{destination: {host: echo}}]"
	mib := 1 << 20
	runValidation(t, []validationCase{
		// mirrorPercent: at most 100.
		{name: "mirrorPercent 100", yaml: httpRule("mirror: {host: m}\n    mirrorPercent: 100\n    " + to)},
		{name: "mirrorPercent 101", yaml: httpRule("mirror: {host: m}\n    mirrorPercent: 101\n    " + to),
			errs: []string{"spec.http[0].mirrorPercent: must be at most 100, got 101"}},

		// directResponse status 200-599 and a body of at most 1 MiB,
		// counted from the string or the bytes form.
		{name: "directResponse 599", yaml: httpRule("directResponse: {status: 599}")},
		{name: "directResponse 600", yaml: httpRule("directResponse: {status: 600}"),
			errs: []string{"spec.http[0].directResponse.status: 600 is not an HTTP status (200-599)"}},
		{name: "directResponse body of 1 MiB", yaml: httpRule("directResponse: {status: 200, body: {string: " + strings.Repeat("a", mib) + "}}")},
		{name: "directResponse body of 1 MiB + 1", yaml: httpRule("directResponse: {status: 200, body: {string: " + strings.Repeat("a", mib+1) + "}}"),
			errs: []string{"spec.http[0].directResponse.body: is 1048577 bytes; at most 1 MiB is allowed"}},
		{name: "directResponse bytes of 1 MiB + 1", yaml: httpRule("directResponse: {status: 200, body: {bytes: " + base64.StdEncoding.EncodeToString(make([]byte, mib+1)) + "}}"),
			errs: []string{"spec.http[0].directResponse.body: is 1048577 bytes; at most 1 MiB is allowed"}},

		// Header values: control characters are NUL-0x1F but tab, and
		// DEL; a space (0x20) is an ordinary character.
		{name: "header value with space and tab", yaml: httpRule("headers: {request: {set: {x-a: \"a b\\tc\"}}}\n    " + to)},
		{name: "header value with 0x1f", yaml: httpRule("headers: {request: {set: {x-a: \"a\\x1fb\"}}}\n    " + to),
			errs: []string{"spec.http[0].headers.request.set[x-a]: the value has a control character"}},
		{name: "header value with DEL", yaml: httpRule("headers: {request: {set: {x-a: \"a\\x7fb\"}}}\n    " + to),
			errs: []string{"spec.http[0].headers.request.set[x-a]: the value has a control character"}},

		// Fault percentages 0-100, abort status 200-599.
		{name: "fault percentage 0", yaml: httpRule("fault: {abort: {httpStatus: 503, percentage: {value: 0}}}\n    " + to)},
		{name: "fault percentage 100", yaml: httpRule("fault: {abort: {httpStatus: 503, percentage: {value: 100}}}\n    " + to)},
		{name: "fault percentage 100.5", yaml: httpRule("fault: {abort: {httpStatus: 503, percentage: {value: 100.5}}}\n    " + to),
			errs: []string{"spec.http[0].fault.abort.percentage.value: 100.5 is not a percentage (0 to 100)"}},
		{name: "abort status 200", yaml: httpRule("fault: {abort: {httpStatus: 200}}\n    " + to)},
		{name: "abort status 599", yaml: httpRule("fault: {abort: {httpStatus: 599}}\n    " + to)},
		{name: "abort status 199", yaml: httpRule("fault: {abort: {httpStatus: 199}}\n    " + to),
			errs: []string{"spec.http[0].fault.abort.httpStatus: 199 is not an HTTP status (200-599)"}},
		{name: "abort status 600", yaml: httpRule("fault: {abort: {httpStatus: 600}}\n    " + to),
			errs: []string{"spec.http[0].fault.abort.httpStatus: 600 is not an HTTP status (200-599)"}},

		// Redirects: prefixRewrite needs prefix uri matches (reported
		// once, for the first that is not), codes 300-399.
		{name: "redirect prefixRewrite after two exact matches", yaml: httpRule("match: [{uri: {prefix: /a}}, {uri: {exact: /b}}, {uri: {regex: /c}}]\n    redirect: {prefixRewrite: /x}"),
			errs: []string{"spec.http[0].redirect.prefixRewrite: needs every uri match to be a prefix match (match[1].uri is not)"}},
		// 300 and 399 are redirect codes, though not ones Strait sends.
		{name: "redirect code 300", yaml: httpRule("redirect: {uri: /x, redirectCode: 300}"),
			errs: []string{"spec.http[0].redirect.redirectCode: 300: not supported by Strait yet (use 301, 302, 303, 307 or 308)"}},
		{name: "redirect code 399", yaml: httpRule("redirect: {uri: /x, redirectCode: 399}"),
			errs: []string{"spec.http[0].redirect.redirectCode: 399: not supported by Strait yet"}},
		{name: "redirect code 308", yaml: httpRule("redirect: {uri: /x, redirectCode: 308}")},
		{name: "redirect code 400", yaml: httpRule("redirect: {uri: /x, redirectCode: 400}"),
			errs: []string{"spec.http[0].redirect.redirectCode: 400 is not a redirect code"}},

		// Retries: attempts 0 alone disables retries; with any of
		// perTryTimeout, retryOn it is a contradiction. Every retryOn
		// item is checked, also after a status code.
		{name: "retries attempts 0", yaml: httpRule("retries: {attempts: 0}\n    " + to)},
		{name: "retries attempts 0 with retryOn", yaml: httpRule("retries: {attempts: 0, retryOn: 5xx}\n    " + to),
			errs: []string{"spec.http[0].retries.attempts: is 0 (retries disabled) but perTryTimeout, retryOn or retryRemoteLocalities is set"}},
		{name: "retries attempts 0 with perTryTimeout", yaml: httpRule("retries: {attempts: 0, perTryTimeout: 1s}\n    " + to),
			errs: []string{"spec.http[0].retries.attempts: is 0 (retries disabled) but perTryTimeout, retryOn or retryRemoteLocalities is set"}},
		{name: "retryOn code then bad", yaml: httpRule("retries: {attempts: 2, retryOn: '503,bogus,5xx,worse'}\n    " + to),
			errs: []string{
				`spec.http[0].retries.retryOn: "bogus" is not a retry condition`,
				`spec.http[0].retries.retryOn: "worse" is not a retry condition`,
			}},

		// A subset name is a DNS label: at most 63 characters.
		{name: "subset of 63", yaml: httpRule("route: [{destination: {host: a, subset: " + strings.Repeat("s", 63) + "}}]")},
		{name: "subset of 64", yaml: httpRule("route: [{destination: {host: a, subset: " + strings.Repeat("s", 64) + "}}]"),
			errs: []string{`spec.http[0].route[0].destination.subset: "` + strings.Repeat("s", 64) + `" is not a valid subset name`}},

		// Weights: the sum may reach Envoy's uint32 limit, not pass it.
		{name: "weights add up to MaxUint32", yaml: httpRule("route: [{destination: {host: a}, weight: 2147483647}, {destination: {host: b}, weight: 2147483647}, {destination: {host: c}, weight: 1}]")},
	})
}

// TestValidateTLSRouteSNI: every SNI host of a tls match is checked, a
// bad one as a host name and a good one against the VirtualService's
// hosts.
func TestValidateTLSRouteSNI(t *testing.T) {
	tls := func(sni string) string {
		return vs("  hosts: [echo.example.com]\n  tls:\n  - match: [{sniHosts: " + sni + "}]\n    route: [{destination: {host: echo}}]\n")
	}
	runValidation(t, []validationCase{
		{name: "within hosts", yaml: tls("[echo.example.com]")},
		{name: "bad then outside", yaml: tls("['a b', other.example.com]"), errs: []string{
			`spec.tls[0].match[0].sniHosts[0]: "a b" is not a host name`,
			`spec.tls[0].match[0].sniHosts[1]: "other.example.com" is not within the VirtualService's hosts [echo.example.com]`,
		}},
		{name: "empty", yaml: tls("['']"), errs: []string{`spec.tls[0].match[0].sniHosts[0]: "" is not a host name`}},
	})
}
