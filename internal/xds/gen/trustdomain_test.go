package gen

import (
	"slices"
	"testing"
)

// TestTrustDomainsPrincipals is Istio's ReplaceTrustDomainAliases table
// (pilot/pkg/security/trustdomain/bundle_test.go) in our words.
func TestTrustDomainsPrincipals(t *testing.T) {
	for _, tc := range []struct {
		name string
		tds  trustDomains
		in   []string
		want []string
	}{
		{"no bundle keeps the principals", nil, []string{"cluster.local/ns/a/sa/b"}, []string{"cluster.local/ns/a/sa/b"}},
		{"cluster.local stands for the mesh's", trustDomains{"td"}, []string{"cluster.local/ns/a/sa/b"}, []string{"td/ns/a/sa/b"}},
		{"cluster.local with aliases", trustDomains{"td", "old"}, []string{"cluster.local/ns/a/sa/b"}, []string{"td/ns/a/sa/b", "old/ns/a/sa/b"}},
		{"an alias", trustDomains{"td", "old"}, []string{"old/ns/a/sa/b"}, []string{"td/ns/a/sa/b", "old/ns/a/sa/b"}},
		{"the mesh's own", trustDomains{"td", "old"}, []string{"td/ns/a/sa/b"}, []string{"td/ns/a/sa/b", "old/ns/a/sa/b"}},
		{"another trust domain", trustDomains{"td", "old"}, []string{"else/ns/a/sa/b"}, []string{"else/ns/a/sa/b"}},
		{"any trust domain", trustDomains{"td", "old"}, []string{"*/ns/a/sa/b"}, []string{"*/ns/a/sa/b"}},
		{"not a SPIFFE principal", trustDomains{"td"}, []string{"*", "ns/a/sa/b", "cluster.local/ns/a"}, []string{"*", "ns/a/sa/b", "cluster.local/ns/a"}},
		{"a prefix wildcard matching the bundle", trustDomains{"td-new", "td-old"}, []string{"td-*/ns/a/sa/b"}, []string{"td-new/ns/a/sa/b", "td-old/ns/a/sa/b"}},
		{"a suffix wildcard keeps itself once", trustDomains{"new-td", "old-td"}, []string{"*-td/ns/a/sa/b"}, []string{"*-td/ns/a/sa/b"}},
		// As Istio: the alias pattern replaces the trust domain.
		{"a bundle wildcard", trustDomains{"td", "*-old"}, []string{"x-old/ns/a/sa/b"}, []string{"td/ns/a/sa/b", "*-old/ns/a/sa/b"}},
		{"several principals keep their order", trustDomains{"td"}, []string{"else/ns/a/sa/b", "cluster.local/ns/c/sa/d"}, []string{"else/ns/a/sa/b", "td/ns/c/sa/d"}},
	} {
		if got := tc.tds.principals(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("%s: principals(%q) with %q = %q, want %q", tc.name, tc.in, tc.tds, got, tc.want)
		}
	}
}

func TestTrustDomainsExpand(t *testing.T) {
	tds := trustDomains{"td", "old"}
	for _, tc := range []struct{ in, want []string }{
		{nil, nil},
		{[]string{"old"}, []string{"td", "old"}},
		{[]string{"td", "old"}, []string{"td", "old"}},
		{[]string{"else", "td"}, []string{"else", "td", "old"}},
		{[]string{"else", "else"}, []string{"else"}},
	} {
		if got := tds.expand(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("expand(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
