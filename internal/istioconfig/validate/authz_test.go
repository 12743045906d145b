package validate_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/straitmesh/strait/internal/istioconfig"
)

func TestAuthorizationPolicyLoad(t *testing.T) {
	const head = "apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {name: p, namespace: foo"
	good := head + ", annotations: {istio.io/dry-run: \"true\"}}\nspec:\n  selector: {matchLabels: {app: echo}}\n  action: DENY\n" +
		"  rules:\n  - from: [{source: {principals: [cluster.local/ns/foo/sa/a], ipBlocks: [10.0.0.0/8, 10.1.2.3]}}]\n" +
		"    to: [{operation: {paths: [/admin*], ports: [\"8080\"]}}]\n" +
		"    when: [{key: \"request.headers[x-user]\", values: [alice]}, {key: \"request.auth.claims[groups][0]\", values: [dev]}]\n"
	res := istioconfig.ParseFile("a.yaml", []byte(good))
	if res.Err != nil || len(res.Configs) != 1 {
		t.Fatalf("good policy: %v", res.Err)
	}
	c := res.Configs[0]
	if c.Annotations[istioconfig.DryRunAnnotation] != "true" || c.AuthorizationPolicy().GetAction().String() != "DENY" || c.Namespace != "foo" {
		t.Errorf("loaded %+v", c.Meta)
	}
	// Path templates as Istio's validation accepts them
	// (pkg/config/validation/testdata/crds/authz-valid.yaml).
	templates := head + "}\nspec:\n  rules: [{to: [{operation: {paths: [\"/path/template/{*}\", \"/{**}/path/template\", \"/a/{*}/b/{**}\", \"/a/{*}/\"], notPaths: [\"/not/{*}\"]}}]}]\n"
	if res := istioconfig.ParseFile("a.yaml", []byte(templates)); res.Err != nil {
		t.Errorf("path templates: %v", res.Err)
	}
	// serviceAccounts and trustDomains in the forms Istio's validation
	// accepts (pkg/config/security: CheckServiceAccount, CheckWildcardValues).
	identities := head + "}\nspec:\n  action: DENY\n  rules:\n  - from: [{source: {serviceAccounts: [a, ns/b], notTrustDomains: [\"*.example\", \"td*\", \"*\"]}}]\n" +
		"    when: [{key: source.serviceAccount, values: [ns/c]}, {key: source.trustDomain, notValues: [\"x*\"]}]\n"
	if res := istioconfig.ParseFile("a.yaml", []byte(identities)); res.Err != nil {
		t.Errorf("service accounts and trust domains: %v", res.Err)
	}
	v1beta1 := strings.Replace(good, "security.istio.io/v1", "security.istio.io/v1beta1", 1)
	if res := istioconfig.ParseFile("a.yaml", []byte(v1beta1)); res.Err != nil {
		t.Errorf("v1beta1: %v", res.Err)
	}
	for _, tc := range []struct {
		name, yaml, want string
		refused          bool
	}{
		{"bad dry-run", head + ", annotations: {istio.io/dry-run: maybe}}\nspec: {}\n", "metadata.annotations[istio.io/dry-run]: \"maybe\" is not a boolean", false},
		{"empty source", head + "}\nspec:\n  rules: [{from: [{source: {}}]}]\n", "spec.rules[0].from[0].source: must set at least one field", false},
		{"no source", head + "}\nspec:\n  rules: [{from: [{}]}]\n", "spec.rules[0].from[0].source: must be set", false},
		{"empty operation", head + "}\nspec:\n  rules: [{to: [{operation: {}}]}]\n", "spec.rules[0].to[0].operation: must set at least one field", false},
		{"bad ip block", head + "}\nspec:\n  rules: [{from: [{source: {ipBlocks: [ten]}}]}]\n", "spec.rules[0].from[0].source.ipBlocks[0]: \"ten\" is not an IP address", false},
		{"bad port", head + "}\nspec:\n  rules: [{to: [{operation: {ports: [http]}}]}]\n", "spec.rules[0].to[0].operation.ports[0]: \"http\" is not a port", false},
		{"unknown when key", head + "}\nspec:\n  rules: [{when: [{key: request.size, values: [\"1\"]}]}]\n", "spec.rules[0].when[0].key: \"request.size\" is not a known key", false},
		{"when without values", head + "}\nspec:\n  rules: [{when: [{key: source.ip}]}]\n", "spec.rules[0].when[0]: must set values or notValues", false},
		{"header without name", head + "}\nspec:\n  rules: [{when: [{key: request.headers, values: [a]}]}]\n", "want request.headers[NAME]", false},
		{"bad destination.port", head + "}\nspec:\n  rules: [{when: [{key: destination.port, values: [x]}]}]\n", "\"x\" is not a port", false},
		{"template after {**}", head + "}\nspec:\n  rules: [{to: [{operation: {paths: [\"/a/{**}/{*}\"]}}]}]\n", "spec.rules[0].to[0].operation.paths[0]: path template \"/a/{**}/{*}\": {**} must be the last template", false},
		{"brace beside a template", head + "}\nspec:\n  rules: [{to: [{operation: {notPaths: [\"/a/{*}x\"]}}]}]\n", "spec.rules[0].to[0].operation.notPaths[0]: path template \"/a/{*}x\": segment \"{*}x\" must be exactly {*} or {**}", false},
		{"brace without a template", head + "}\nspec:\n  rules: [{to: [{operation: {paths: [\"/a/{id}\"]}}]}]\n", "spec.rules[0].to[0].operation.paths[0]: path \"/a/{id}\": \"{\" and \"}\" are only allowed", false},
		{"wildcard beside a template", head + "}\nspec:\n  rules: [{to: [{operation: {paths: [\"/a/{*}/*\"]}}]}]\n", "segment \"*\" is not a literal", false},
		{"empty segment beside a template", head + "}\nspec:\n  rules: [{to: [{operation: {paths: [\"/a//{*}\"]}}]}]\n", "segment \"\" is not a literal", false},
		{"template without a leading slash", head + "}\nspec:\n  rules: [{to: [{operation: {paths: [\"{*}/a\"]}}]}]\n", "path template \"{*}/a\" must start with \"/\"", false},
		{"envoy filter key", head + "}\nspec:\n  rules: [{when: [{key: \"experimental.envoy.filters.a[b]\", values: [c]}]}]\n", "spec.rules[0].when[0].key", true},
		{"custom", head + "}\nspec: {action: CUSTOM, provider: {name: x}}\n", "spec.action: CUSTOM not supported by Strait yet", true},
		{"targetRef", head + "}\nspec: {targetRef: {kind: Gateway, name: g}}\n", "spec.targetRef: not supported by Strait yet", true},
		{"selector and targetRef", head + "}\nspec: {selector: {matchLabels: {app: a}}, targetRef: {kind: Gateway, name: g}}\n", "spec: only one of selector, targetRef or targetRefs can be set", true},
		{"DENY without rules", head + "}\nspec: {action: DENY}\n", "spec.rules: DENY action without rules is meaningless", false},
		{"provider with ALLOW", head + "}\nspec: {action: ALLOW, provider: {name: x}, rules: [{}]}\n", "spec.provider: must not be set with action ALLOW", true},
		{"serviceAccounts with namespaces", head + "}\nspec:\n  rules: [{from: [{source: {namespaces: [a], notServiceAccounts: [b]}}]}]\n", "spec.rules[0].from[0].source: cannot set serviceAccounts with namespaces or principals", false},
		{"serviceAccounts with principals", head + "}\nspec:\n  rules: [{from: [{source: {notPrincipals: [a], serviceAccounts: [b]}}]}]\n", "spec.rules[0].from[0].source: cannot set serviceAccounts with namespaces or principals", false},
		{"service account path", head + "}\nspec:\n  rules: [{from: [{source: {serviceAccounts: [a/b/c]}}]}]\n", "spec.rules[0].from[0].source.serviceAccounts[0]: \"a/b/c\": want NAME or NAMESPACE/NAME", false},
		{"service account without name", head + "}\nspec:\n  rules: [{from: [{source: {notServiceAccounts: [ns/]}}]}]\n", "spec.rules[0].from[0].source.notServiceAccounts[0]: \"ns/\": want NAME or NAMESPACE/NAME", false},
		{"service account without namespace", head + "}\nspec:\n  rules: [{from: [{source: {serviceAccounts: [/sa]}}]}]\n", "spec.rules[0].from[0].source.serviceAccounts[0]: \"/sa\": want NAME or NAMESPACE/NAME", false},
		{"service account wildcard", head + "}\nspec:\n  rules: [{from: [{source: {serviceAccounts: [\"ns/*\"]}}]}]\n", "serviceAccounts[0]: \"ns/*\": wildcards are not allowed", false},
		{"too many service accounts", head + "}\nspec:\n  rules: [{from: [{source: {serviceAccounts: [a1,a2,a3,a4,a5,a6,a7,a8,a9,a10,a11,a12,a13,a14,a15,a16,a17]}}]}]\n", "serviceAccounts: has 17 values; at most 16", false},
		{"when service account", head + "}\nspec:\n  rules: [{when: [{key: source.serviceAccount, notValues: [a/b/c]}]}]\n", "spec.rules[0].when[0].notValues[0]: \"a/b/c\": want NAME or NAMESPACE/NAME", false},
		{"trust domain wildcard inside", head + "}\nspec:\n  rules: [{from: [{source: {trustDomains: [\"a*b\"]}}]}]\n", "trustDomains[0]: \"a*b\": a wildcard is only allowed at the start or the end", false},
		{"trust domain two wildcards", head + "}\nspec:\n  rules: [{from: [{source: {trustDomains: [\"*a*\"]}}]}]\n", "trustDomains[0]: \"*a*\": at most one wildcard", false},
		{"trust domain slash", head + "}\nspec:\n  rules: [{from: [{source: {notTrustDomains: [a/b]}}]}]\n", "notTrustDomains[0]: \"a/b\": a trust domain must not contain '/'", false},
		{"when trust domain wildcard", head + "}\nspec:\n  rules: [{when: [{key: source.trustDomain, values: [\"a*b\"]}]}]\n", "spec.rules[0].when[0].values[0]: \"a*b\": a wildcard is only allowed", false},
		{"networking group", strings.Replace(head, "security.istio.io/v1", "networking.istio.io/v1", 1) + "}\nspec: {}\n", "AuthorizationPolicy is in security.istio.io, not networking.istio.io", false},
		{"alpha version", strings.Replace(head, "security.istio.io/v1", "security.istio.io/v1alpha3", 1) + "}\nspec: {}\n", "use security.istio.io/v1 or v1beta1", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := istioconfig.ParseFile("a.yaml", []byte(tc.yaml))
			if tc.want == "" {
				if res.Err != nil || len(res.Configs) != 0 || len(res.Warnings) != 1 {
					t.Errorf("want a skipped document, got %v %q", res.Err, res.Warnings)
				}
				return
			}
			if res.Err == nil || !strings.Contains(res.Err.Error(), tc.want) || len(res.Configs) != 0 {
				t.Fatalf("err = %v, want %q", res.Err, tc.want)
			}
			if errors.Is(res.Err, istioconfig.ErrNotSupported) != tc.refused {
				t.Errorf("istioconfig.ErrNotSupported %v, want %v", errors.Is(res.Err, istioconfig.ErrNotSupported), tc.refused)
			}
		})
	}
}

// TestAuthorizationPolicyRuleChecks: every from and to entry is checked
// after one that is missing; an operation counts every field it sets (two
// fields, none of them first, are enough); serviceAccounts conflicts with
// any of principals, notPrincipals, namespaces and notNamespaces.
func TestAuthorizationPolicyRuleChecks(t *testing.T) {
	ap := func(rules string) string {
		return "apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {name: p, namespace: foo}\nspec:\n  rules:\n" + rules
	}
	const conflict = "cannot set serviceAccounts with namespaces or principals"
	runValidation(t, []validationCase{
		{name: "missing then empty", yaml: ap("  - from: [{}, {source: {}}]\n    to: [{}, {operation: {}}]\n"), errs: []string{
			"spec.rules[0].from[0].source: must be set",
			"spec.rules[0].from[1].source: must set at least one field",
			"spec.rules[0].to[0].operation: must be set",
			"spec.rules[0].to[1].operation: must set at least one field",
		}},
		{name: "operations of two fields", yaml: ap("  - to:\n" +
			"    - operation: {hosts: [a.example], notHosts: [b.example]}\n" +
			"    - operation: {ports: ['80'], notPorts: ['81']}\n" +
			"    - operation: {notPorts: ['81'], methods: [GET]}\n" +
			"    - operation: {methods: [GET], notMethods: [POST]}\n" +
			"    - operation: {paths: [/a], notPaths: [/b]}\n")},
		{name: "notNamespaces with serviceAccounts", yaml: ap("  - from: [{source: {notNamespaces: [a], serviceAccounts: [ns/sa]}}]\n"),
			errs: []string{"spec.rules[0].from[0].source: " + conflict}},
		{name: "notPrincipals with notServiceAccounts", yaml: ap("  - from: [{source: {notPrincipals: [td/ns/a/sa/b], notServiceAccounts: [ns/sa]}}]\n"),
			errs: []string{"spec.rules[0].from[0].source: " + conflict}},
	})
}

// TestAuthorizationPolicyWhenChecks: the forms of request.headers[NAME] and
// request.auth.claims[NAME] keys, values and notValues together, IP checks
// on each IP key, every value checked after an empty one, and Istio's 16
// service accounts.
func TestAuthorizationPolicyWhenChecks(t *testing.T) {
	when := func(conds string) string {
		return "apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {name: p, namespace: foo}\nspec:\n  rules:\n  - when:\n" + conds
	}
	var sas []string
	for i := range 17 {
		sas = append(sas, fmt.Sprintf("ns/sa%d", i))
	}
	runValidation(t, []validationCase{
		{name: "header key without [", yaml: when("    - {key: 'request.headers.x]', values: [a]}\n"),
			errs: []string{`spec.rules[0].when[0].key: "request.headers.x]": want request.headers[NAME]`}},
		{name: "header key without ]", yaml: when("    - {key: 'request.headers[xy', values: [a]}\n"),
			errs: []string{`spec.rules[0].when[0].key: "request.headers[xy": want request.headers[NAME]`}},
		{name: "claim key without [", yaml: when("    - {key: 'request.auth.claims.x]', values: [a]}\n"),
			errs: []string{`spec.rules[0].when[0].key: "request.auth.claims.x]": want request.auth.claims[NAME]`}},
		{name: "claim key without ]", yaml: when("    - {key: 'request.auth.claims[xy', values: [a]}\n"),
			errs: []string{`spec.rules[0].when[0].key: "request.auth.claims[xy": want request.auth.claims[NAME]`}},
		{name: "values and notValues", yaml: when("    - {key: source.ip, values: [10.0.0.1], notValues: [10.0.0.2]}\n")},
		{name: "IP keys", yaml: when("    - {key: source.ip, values: [a]}\n    - {key: remote.ip, values: [b]}\n    - {key: destination.ip, notValues: [c]}\n"), errs: []string{
			`spec.rules[0].when[0].values[0]: "a" is not an IP address or CIDR`,
			`spec.rules[0].when[1].values[0]: "b" is not an IP address or CIDR`,
			`spec.rules[0].when[2].notValues[0]: "c" is not an IP address or CIDR`,
		}},
		{name: "empty then bad IP", yaml: when("    - {key: source.ip, values: ['', x]}\n"), errs: []string{
			"spec.rules[0].when[0].values[0]: must not be empty",
			`spec.rules[0].when[0].values[1]: "x" is not an IP address or CIDR`,
		}},
		{name: "destination.port 65535", yaml: when("    - {key: destination.port, values: ['0', '65535']}\n")},
		{name: "destination.port 65536", yaml: when("    - {key: destination.port, values: ['65536']}\n"),
			errs: []string{`spec.rules[0].when[0].values[0]: "65536" is not a port (0 to 65535)`}},
		{name: "16 service accounts", yaml: when("    - {key: source.serviceAccount, values: [" + strings.Join(sas[:16], ", ") + "]}\n")},
		{name: "17 service accounts", yaml: when("    - {key: source.serviceAccount, values: [" + strings.Join(sas, ", ") + "]}\n"),
			errs: []string{"spec.rules[0].when[0].values: has 17 values; at most 16 are allowed"}},
	})
}
