package gen

import (
	"slices"
	"strings"

	"github.com/straitmesh/strait/internal/mesh"
)

// clusterLocal is the trust domain that stands for the mesh's own in an
// AuthorizationPolicy principal, whatever the mesh's trust domain is
// (Istio's constants.DefaultClusterLocalDomain).
const clusterLocal = "cluster.local"

// trustDomains is the mesh's trust domain followed by its aliases (the
// mesh config's trustDomainAliases): identities of any of them are the
// same workload (Istio's trustdomain.Bundle).
type trustDomains []string

// meshTrustDomains is the trust domain bundle of a snapshot's mesh config.
func meshTrustDomains(snap *mesh.Snapshot) trustDomains {
	return append(trustDomains{snap.Mesh.TrustDomain}, snap.Mesh.TrustDomainAliases...)
}

// principals rewrites AuthorizationPolicy principals (TD/ns/NS/sa/SA) as
// Istio's Bundle.ReplaceTrustDomainAliases does: a principal whose trust
// domain is one of the bundle's, or cluster.local, becomes one principal
// per trust domain of the bundle; a principal of another trust domain, or
// whose trust domain is "*", or that is not of that form, stays as it is.
func (tds trustDomains) principals(ps []string) []string {
	if len(tds) == 0 {
		return ps
	}
	var out []string
	for _, p := range ps {
		parts := strings.Split(p, "/")
		if len(parts) != 5 || parts[0] == "*" || (parts[0] != clusterLocal && !tds.matches(parts[0])) {
			out = append(out, p)
			continue
		}
		var own []string
		for _, td := range tds {
			np := td + "/" + strings.Join(parts[1:], "/")
			if wildcardSuffix(td, parts[0]) {
				np = p // "*-td" keeps its wildcard for a trust domain it covers
			}
			if !slices.Contains(own, np) {
				own = append(own, np)
			}
		}
		out = append(out, own...)
	}
	return out
}

// expand is Istio's Bundle.ExpandTrustDomainAliases for trustDomains
// values: a value that is one of the bundle's trust domains stands for
// all of them.
func (tds trustDomains) expand(vs []string) []string {
	var out []string
	add := func(v string) {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	for _, v := range vs {
		if slices.Contains(tds, v) {
			for _, td := range tds {
				add(td)
			}
		} else {
			add(v)
		}
	}
	return out
}

// matches is Istio's trustdomain stringMatch: td equals one of the
// bundle's, or either side is "*", a "prefix*" or a "*suffix" pattern
// that covers the other.
func (tds trustDomains) matches(td string) bool {
	for _, s := range tds {
		if td == s || s == "*" || wildcardPrefix(td, s) || wildcardPrefix(s, td) || wildcardSuffix(td, s) || wildcardSuffix(s, td) {
			return true
		}
	}
	return false
}

// wildcardPrefix: pattern is "prefix*" and a starts with prefix.
func wildcardPrefix(a, pattern string) bool {
	p, ok := strings.CutSuffix(pattern, "*")
	return ok && strings.HasPrefix(a, p)
}

// wildcardSuffix: pattern is "*suffix" and a ends with suffix.
func wildcardSuffix(a, pattern string) bool {
	p, ok := strings.CutPrefix(pattern, "*")
	return ok && strings.HasSuffix(a, p)
}
