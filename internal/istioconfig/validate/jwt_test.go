package validate_test

import (
	"strings"
	"testing"

	"github.com/straitmesh/strait/internal/istioconfig"
)

func TestRequestAuthenticationLoad(t *testing.T) {
	ra := func(spec string) string {
		return "apiVersion: security.istio.io/v1\nkind: RequestAuthentication\nmetadata: {name: jwt, namespace: ns}\nspec:\n" + spec
	}
	good := ra(`  selector: {matchLabels: {app: a}}
  jwtRules:
  - issuer: https://issuer.example
    audiences: [svc]
    jwksUri: https://issuer.example/jwks.json
    fromHeaders: [{name: x-jwt, prefix: "Token "}]
    fromParams: [tok]
    fromCookies: [session]
    outputPayloadToHeader: x-jwt-payload
    forwardOriginalToken: true
    outputClaimToHeaders: [{header: x-sub, claim: sub}]
    timeout: 3s
    spaceDelimitedClaims: [roles]
`)
	res := istioconfig.ParseFile("ra.yaml", []byte(good))
	if res.Err != nil || len(res.Configs) != 1 {
		t.Fatalf("good: %v", res.Err)
	}
	c := res.Configs[0]
	if c.Kind != istioconfig.KindRequestAuthentication || c.Namespace != "ns" || c.RequestAuthentication().JwtRules[0].FromHeaders[0].Prefix != "Token " {
		t.Errorf("loaded %+v", c)
	}
	if res := istioconfig.ParseFile("ra.yaml", []byte(strings.Replace(good, "security.istio.io/v1", "security.istio.io/v1beta1", 1))); res.Err != nil {
		t.Errorf("v1beta1: %v", res.Err)
	}
	for _, tc := range []struct{ name, yaml, want string }{
		{"no issuer", ra("  jwtRules: [{jwks: '{}'}]\n"), "spec.jwtRules[0].issuer: must be set"},
		{"bad jwksUri", ra("  jwtRules: [{issuer: i, jwksUri: 'ftp://x/j'}]\n"), `spec.jwtRules[0].jwksUri: "ftp://x/j" is not an http:// or https:// URL`},
		{"jwks not json", ra("  jwtRules: [{issuer: i, jwks: '{'}]\n"), "spec.jwtRules[0].jwks: is not JSON"},
		{"jwks without keys", ra("  jwtRules: [{issuer: i, jwks: '{\"kty\": \"RSA\"}'}]\n"), `spec.jwtRules[0].jwks: is not a JSON Web Key Set: want an object with a "keys" array`},
		{"jwks keys not a list", ra("  jwtRules: [{issuer: i, jwks: '{\"keys\": {}}'}]\n"), `spec.jwtRules[0].jwks: is not a JSON Web Key Set`},
		{"jwks key not an object", ra("  jwtRules: [{issuer: i, jwks: '{\"keys\": [1]}'}]\n"), "spec.jwtRules[0].jwks: keys[0] is not a JSON object"},
		{"jwks key without kty", ra("  jwtRules: [{issuer: i, jwks: '{\"keys\": [{\"kty\": \"EC\"}, {\"kid\": \"a\"}]}'}]\n"), "spec.jwtRules[0].jwks: keys[1] has no kty"},
		{"header unnamed", ra("  jwtRules: [{issuer: i, fromHeaders: [{prefix: x}]}]\n"), "spec.jwtRules[0].fromHeaders[0].name: must be set"},
		{"empty param", ra("  jwtRules: [{issuer: i, fromParams: ['']}]\n"), "spec.jwtRules[0].fromParams[0]: must not be empty"},
		{"empty cookie", ra("  jwtRules: [{issuer: i, fromCookies: ['']}]\n"), "spec.jwtRules[0].fromCookies[0]: must not be empty"},
		{"empty audience", ra("  jwtRules: [{issuer: i, audiences: ['']}]\n"), "spec.jwtRules[0].audiences[0]: must not be empty"},
		{"bad payload header", ra("  jwtRules: [{issuer: i, outputPayloadToHeader: 'a b'}]\n"), `spec.jwtRules[0].outputPayloadToHeader: "a b" is not an HTTP header name`},
		{"bad claim header", ra("  jwtRules: [{issuer: i, outputClaimToHeaders: [{header: 'a b', claim: sub}]}]\n"), `spec.jwtRules[0].outputClaimToHeaders[0].header: "a b" is not an HTTP header name`},
		{"empty claim header", ra("  jwtRules: [{issuer: i, outputClaimToHeaders: [{claim: sub}]}]\n"), `spec.jwtRules[0].outputClaimToHeaders[0].header: "" is not an HTTP header name`},
		{"claim header", ra("  jwtRules: [{issuer: i, outputClaimToHeaders: [{header: x}]}]\n"), "spec.jwtRules[0].outputClaimToHeaders[0].claim: must be set"},
		{"bad selector", ra("  selector: {matchLabels: {'a b': c}}\n  jwtRules: [{issuer: i}]\n"), "spec.selector.matchLabels"},
		{"presence refused", ra("  jwtRules: [{issuer: i, presence: REQUIRED}]\n"), "spec.jwtRules[0].presence: not supported by Strait yet"},
		{"jwksUri without issuer refused", ra("  jwtRules: [{jwksUri: 'https://x/j'}]\n"), "spec.jwtRules[0].issuer: an empty issuer (a rule for tokens of any iss) is not supported by Strait yet"},
		{"selector and targetRefs", ra("  selector: {matchLabels: {app: a}}\n  targetRefs: [{kind: Gateway, name: g}]\n  jwtRules: [{issuer: i}]\n"), "spec: only one of selector, targetRef or targetRefs can be set"},
		{"targetRef refused", ra("  targetRef: {kind: Gateway, name: g}\n"), "spec.targetRef: not supported by Strait yet"},
		{"wrong group", strings.Replace(good, "security.istio.io/v1", "networking.istio.io/v1", 1), "RequestAuthentication is in security.istio.io, not networking.istio.io"},
		{"networking kind in security group", "apiVersion: security.istio.io/v1\nkind: Sidecar\nmetadata: {name: a}\nspec: {}\n", "Sidecar is in networking.istio.io, not security.istio.io"},
		{"old version", strings.Replace(good, "security.istio.io/v1", "security.istio.io/v1alpha1", 1), `"security.istio.io/v1alpha1" is not supported`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := istioconfig.ParseFile("ra.yaml", []byte(tc.yaml))
			if tc.want == "" {
				if res.Err != nil || len(res.Configs) != 0 || len(res.Warnings) != 1 {
					t.Errorf("want a skip warning, got configs %d warnings %q err %v", len(res.Configs), res.Warnings, res.Err)
				}
				return
			}
			if res.Err == nil || !strings.Contains(res.Err.Error(), tc.want) {
				t.Errorf("err = %v; want %q", res.Err, tc.want)
			}
		})
	}
}
