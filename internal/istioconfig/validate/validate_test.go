package validate_test

import (
	"strings"
	"testing"
)

// TestSidecarOwnPorts: every port of the sidecar's own listeners (outbound
// 15001, inbound 15006, admin 15000, agent 15020 and 15021, telemetry
// 15090) is refused as a Sidecar listener port; the port next to one is not.
func TestSidecarOwnPorts(t *testing.T) {
	var tests []validationCase
	for _, port := range []string{"15006", "15000", "15020", "15021", "15090"} {
		tests = append(tests, validationCase{
			name: port,
			yaml: sc("  egress:\n  - port: {number: " + port + ", protocol: HTTP}\n    hosts: ['./*']\n"),
			errs: []string{"spec.egress[0].port.number: " + port + " is a port of the sidecar's own listeners; pick another"},
		})
	}
	tests = append(tests, validationCase{name: "15002", yaml: sc("  egress:\n  - port: {number: 15002, protocol: HTTP}\n    hosts: ['./*']\n")})
	runValidation(t, tests)
}

// TestDelegateCombinations: a delegating rule takes no route, redirect or
// directResponse of its own, each refused alone.
func TestDelegateCombinations(t *testing.T) {
	const msg = "spec.http[0].delegate: cannot be combined with route, redirect or directResponse: the delegate's routes answer"
	runValidation(t, []validationCase{
		{name: "redirect", yaml: httpRule("delegate: {name: d}\n    redirect: {uri: /x}"), errs: []string{msg}},
		{name: "directResponse", yaml: httpRule("delegate: {name: d}\n    directResponse: {status: 200}"), errs: []string{msg}},
	})
}

// TestValidateMatchAndSubsetBounds: the four request pseudo-headers may
// be matched, a regex may be 1024 characters long, a DestinationRule
// subset name 63; insecureSkipVerify conflicts with a CA in MUTUAL mode as
// in SIMPLE.
func TestValidateMatchAndSubsetBounds(t *testing.T) {
	const to = "\n    route: [{destination: {host: echo}}]"
	runValidation(t, []validationCase{
		{name: "pseudo-header matches", yaml: httpRule("match: [{headers: {':method': {exact: GET}, ':scheme': {exact: http}, ':authority': {exact: a}, ':path': {prefix: /}}}]" + to)},
		{name: "regex of 1024", yaml: httpRule("match: [{uri: {regex: '" + strings.Repeat("a", 1024) + "'}}]" + to)},
		{name: "subset name of 63", yaml: dr("  host: echo\n  subsets:\n  - {name: " + strings.Repeat("v", 63) + "}\n")},
		{name: "subset name of 64", yaml: dr("  host: echo\n  subsets:\n  - {name: " + strings.Repeat("v", 64) + "}\n"),
			errs: []string{`spec.subsets[0].name: "` + strings.Repeat("v", 64) + `" is not a valid subset name`}},
		{name: "MUTUAL insecureSkipVerify with a CA", yaml: dr("  host: api.example.com\n  trafficPolicy:\n    tls: {mode: MUTUAL, clientCertificate: /c.pem, privateKey: /k.pem, insecureSkipVerify: true, caCertificates: /ca.pem}\n"),
			errs: []string{"spec.trafficPolicy.tls.caCertificates: cannot be set when insecureSkipVerify is true"}},
	})
}

// TestCookieAttributes: a consistentHash cookie's attribute names are
// set and distinct.
func TestCookieAttributes(t *testing.T) {
	runValidation(t, []validationCase{
		{name: "attributes", yaml: dr("  host: echo\n  trafficPolicy:\n    loadBalancer: {consistentHash: {httpCookie: {name: c, ttl: 10s, attributes: [{name: SameSite, value: Strict}, {name: Secure}]}}}\n")},
		{name: "empty and repeated", yaml: dr("  host: echo\n  trafficPolicy:\n    loadBalancer: {consistentHash: {httpCookie: {name: c, ttl: 10s, attributes: [{name: SameSite, value: Strict}, {name: ''}, {name: SameSite}]}}}\n"),
			errs: []string{
				"spec.trafficPolicy.loadBalancer.consistentHash.httpCookie.attributes[1].name: must not be empty",
				`spec.trafficPolicy.loadBalancer.consistentHash.httpCookie.attributes[2].name: "SameSite" is listed twice`,
			}},
	})
}

// TestExportToNamespaceLength: an exportTo namespace is a DNS label of at
// most 63 characters.
func TestExportToNamespaceLength(t *testing.T) {
	ns := strings.Repeat("n", 63)
	runValidation(t, []validationCase{
		{name: "63", yaml: vs("  hosts: [echo]\n  exportTo: [" + ns + "]\n  http:\n" + route)},
		{name: "64", yaml: vs("  hosts: [echo]\n  exportTo: [" + ns + "n]\n  http:\n" + route),
			errs: []string{`spec.exportTo[0]: "` + ns + `n" is not ".", "*" or a namespace name`}},
	})
}

// TestHostsOverlapSuffix: a host equal to a wildcard's suffix (".example.com"
// against "*.example.com") is invalid, and not within the wildcard.
func TestHostsOverlapSuffix(t *testing.T) {
	runValidation(t, []validationCase{
		{name: "suffix", yaml: vs("  hosts: ['*.example.com', '.example.com']\n  http:\n" + route),
			errs: []string{`spec.hosts[1]: ".example.com" is not a valid host name`}},
		{name: "subdomain", yaml: vs("  hosts: ['*.example.com', 'a.example.com']\n  http:\n" + route),
			errs: []string{`spec.hosts[1]: "a.example.com" overlaps spec.hosts[0] "*.example.com"`}},
	})
}
