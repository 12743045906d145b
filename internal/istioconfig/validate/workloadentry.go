package validate

import (
	"fmt"
	"net/netip"
	"strings"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/straitmesh/strait/internal/istioconfig/fielderr"
)

// This file checks a WorkloadEntry, alone or as a ServiceEntry's endpoint.

// validateWorkloadEntry checks a WorkloadEntry spec or an inline endpoint.
// Host names are accepted only when allowHostname (DNS resolution).
func validateWorkloadEntry(el *fielderr.List, f string, w *networking.WorkloadEntry, allowHostname bool) {
	switch {
	case w.Address == "":
		el.Add(f+".address", "must be set to the workload's IP address")
	case strings.HasPrefix(w.Address, "unix://"):
		// A Unix domain socket endpoint; accepted as Istio does.
	default:
		if _, err := netip.ParseAddr(w.Address); err != nil {
			if !allowHostname {
				el.Add(f+".address", "%q is not an IP address (host names are only supported with resolution DNS)", w.Address)
			} else if !hostRe.MatchString(w.Address) {
				el.Add(f+".address", "%q is not an IP address or host name", w.Address)
			}
		}
	}
	for _, name := range sortedKeys(w.Ports) {
		if !validPort(w.Ports[name]) {
			el.Add(fmt.Sprintf("%s.ports[%s]", f, name), "%d is not a valid port (1-65535)", w.Ports[name])
		}
	}
	validateLabels(el, f+".labels", w.Labels)
	if w.Weight > 0 && w.Weight > 1<<24 {
		el.Add(f+".weight", "%d is too large", w.Weight)
	}
}
