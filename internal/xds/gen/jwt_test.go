package gen

import (
	"strings"
	"testing"

	jwtfilter "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/jwt_authn/v3"

	"github.com/straitmesh/strait/internal/proxypush"
)

// requirement renders a jwt_authn requirement tree compactly:
// any(...), all(...), a provider name, or allow_missing.
func requirement(r *jwtfilter.JwtRequirement) string {
	list := func(rs []*jwtfilter.JwtRequirement) string {
		var s []string
		for _, x := range rs {
			s = append(s, requirement(x))
		}
		return strings.Join(s, ", ")
	}
	switch t := r.GetRequiresType().(type) {
	case *jwtfilter.JwtRequirement_ProviderName:
		return t.ProviderName
	case *jwtfilter.JwtRequirement_AllowMissing:
		return "allow_missing"
	case *jwtfilter.JwtRequirement_RequiresAny:
		return "any(" + list(t.RequiresAny.GetRequirements()) + ")"
	case *jwtfilter.JwtRequirement_RequiresAll:
		return "all(" + list(t.RequiresAll.GetRequirements()) + ")"
	}
	return "?"
}

// The jwt_authn filter's providers follow the rules sorted by issuer
// (rules of one issuer keep their order), and its requirement is one
// provider's "token valid or missing" for one rule, an OR over the
// providers and their AND for several.
func TestJWTFilterProvidersAndRequirement(t *testing.T) {
	const workload = `apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: web, namespace: auth}
spec: {address: 10.0.0.9, labels: {app: web}}
`
	ra := func(rules string) string {
		return "apiVersion: security.istio.io/v1\nkind: RequestAuthentication\nmetadata: {name: ra, namespace: auth}\nspec:\n  jwtRules:\n" + rules
	}
	for _, tc := range []struct {
		name    string
		rules   string
		payload []string // origins-0, origins-1, ...: each provider's forward_payload_header
		issuers []string
		require string
	}{
		{
			name:    "one rule",
			rules:   "  - {issuer: https://a.test, jwks: '{\"keys\":[]}'}\n",
			issuers: []string{"https://a.test"},
			payload: []string{""},
			require: "any(origins-0, allow_missing)",
		},
		{
			name: "sorted by issuer, one issuer's rules in order",
			rules: "  - {issuer: https://c.test, jwks: '{\"keys\":[]}', outputPayloadToHeader: x-3}\n" +
				"  - {issuer: https://b.test, jwks: '{\"keys\":[]}', outputPayloadToHeader: x-1}\n" +
				"  - {issuer: https://b.test, jwks: '{\"keys\":[]}', outputPayloadToHeader: x-2}\n",
			issuers: []string{"https://b.test", "https://b.test", "https://c.test"},
			payload: []string{"x-1", "x-2", "x-3"},
			require: "any(origins-0, origins-1, origins-2, all(any(origins-0, allow_missing), any(origins-1, allow_missing), any(origins-2, allow_missing)))",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap := localitySnapshot(t, workload, ra(tc.rules))
			f := jwtHTTPFilter(snap, &proxypush.Proxy{IP: "10.0.0.9", Namespace: "auth"}, nil)
			if f == nil {
				t.Fatal("no jwt_authn filter")
			}
			var cfg jwtfilter.JwtAuthentication
			if err := f.GetTypedConfig().UnmarshalTo(&cfg); err != nil {
				t.Fatal(err)
			}
			if len(cfg.GetProviders()) != len(tc.issuers) {
				t.Fatalf("%d providers, want %d", len(cfg.GetProviders()), len(tc.issuers))
			}
			for i, iss := range tc.issuers {
				p := cfg.GetProviders()["origins-"+string(rune('0'+i))]
				if p.GetIssuer() != iss || p.GetForwardPayloadHeader() != tc.payload[i] {
					t.Errorf("origins-%d: issuer %q payload header %q, want %q %q", i, p.GetIssuer(), p.GetForwardPayloadHeader(), iss, tc.payload[i])
				}
			}
			if len(cfg.GetRules()) != 1 {
				t.Fatalf("%d rules, want 1", len(cfg.GetRules()))
			}
			if got := requirement(cfg.GetRules()[0].GetRequires()); got != tc.require {
				t.Errorf("requirement %s\nwant        %s", got, tc.require)
			}
		})
	}
}
