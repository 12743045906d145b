package mesh

import "github.com/straitmesh/strait/internal/istioconfig"

// RequestAuthenticationsFor returns the RequestAuthentications that apply
// to a workload in namespace ns with labels: those of its namespace and of
// the root namespace whose selector is unset or matches its labels, as
// Istio selects them (pilot/pkg/model/authentication.go
// getConfigsForWorkload, policyattachment.go isSelected). Policies that
// name a targetRef are not loaded (refused), so none is skipped here.
// The order is the store's: namespace, then name.
func (s *Snapshot) RequestAuthenticationsFor(ns string, labels map[string]string) []*istioconfig.Config {
	var out []*istioconfig.Config
	for _, c := range s.Configs.List(istioconfig.KindRequestAuthentication) {
		if c.Namespace != ns && c.Namespace != s.RootNamespace {
			continue
		}
		if sel := c.RequestAuthentication().GetSelector(); sel != nil && !labelsMatch(sel.GetMatchLabels(), labels) {
			continue
		}
		out = append(out, c)
	}
	return out
}
