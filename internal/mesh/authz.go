package mesh

import (
	"strconv"

	security "istio.io/api/security/v1beta1"

	"github.com/straitmesh/strait/internal/istioconfig"
)

// AuthorizationPolicies are the AuthorizationPolicies that apply to one
// workload, by action. Each list holds the root namespace's policies, then
// the workload namespace's, by name within a namespace.
type AuthorizationPolicies struct {
	Allow, Deny, Audit []*istioconfig.Config
}

// Empty reports whether no policy applies.
func (a AuthorizationPolicies) Empty() bool {
	return len(a.Allow) == 0 && len(a.Deny) == 0 && len(a.Audit) == 0
}

// AuthorizationPoliciesFor returns the policies that apply to a workload of
// namespace with labels, as Istio's ListAuthorizationPolicies selects them:
// a policy of the root namespace applies to every workload of the mesh, one
// of the workload's namespace to that namespace; a selector narrows either
// to the workloads whose labels it matches (an empty selector matches all).
// CUSTOM policies are refused when loaded and never reach here.
func (s *Snapshot) AuthorizationPoliciesFor(namespace string, labels map[string]string) AuthorizationPolicies {
	var out AuthorizationPolicies
	all := s.Configs.List(istioconfig.KindAuthorizationPolicy)
	pick := func(ns string) {
		for _, c := range all {
			p := c.AuthorizationPolicy()
			if c.Namespace != ns || p == nil {
				continue
			}
			if sel := p.GetSelector().GetMatchLabels(); len(sel) > 0 && !labelsMatch(sel, labels) {
				continue
			}
			switch p.GetAction() {
			case security.AuthorizationPolicy_ALLOW:
				out.Allow = append(out.Allow, c)
			case security.AuthorizationPolicy_DENY:
				out.Deny = append(out.Deny, c)
			case security.AuthorizationPolicy_AUDIT:
				out.Audit = append(out.Audit, c)
			}
		}
	}
	pick(s.RootNamespace)
	if namespace != s.RootNamespace {
		pick(namespace)
	}
	return out
}

// DryRun reports whether an AuthorizationPolicy carries the istio.io/dry-run
// annotation set to true (validation refused other values).
func DryRun(c *istioconfig.Config) bool {
	b, _ := strconv.ParseBool(c.Annotations[istioconfig.DryRunAnnotation])
	return b
}
