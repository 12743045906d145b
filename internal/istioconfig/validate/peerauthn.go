package validate

import (
	"fmt"
	"maps"
	"slices"

	security "istio.io/api/security/v1beta1"

	"github.com/straitmesh/strait/internal/istioconfig/fielderr"
)

// validatePeerAuthentication applies Istio's ValidatePeerAuthentication
// (pkg/config/validation): port-level settings need a workload selector
// (a mesh or namespace policy applies to workloads whose ports it cannot
// know), ports are 1..65535, selector labels are valid.
func validatePeerAuthentication(el *fielderr.List, s *security.PeerAuthentication) {
	labels := s.GetSelector().GetMatchLabels()
	validateLabels(el, "spec.selector.matchLabels", labels)
	if s.PortLevelMtls != nil && len(s.PortLevelMtls) == 0 {
		el.Add("spec.portLevelMtls", "is empty; list at least one port, or leave it out")
	}
	if len(labels) == 0 && len(s.GetPortLevelMtls()) > 0 {
		el.Add("spec.portLevelMtls", "a mesh or namespace PeerAuthentication (no selector.matchLabels) cannot have port-level mTLS; add a selector or move the ports into a workload policy")
	}
	for _, port := range sortedPorts(s.GetPortLevelMtls()) {
		if !validPort(port) {
			el.Add(fmt.Sprintf("spec.portLevelMtls[%d]", port), "port %d is not in 1..65535 (a port of the workload, not of its service)", port)
		}
	}
}

func sortedPorts[V any](m map[uint32]V) []uint32 {
	return slices.Sorted(maps.Keys(m))
}
