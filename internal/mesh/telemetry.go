package mesh

import (
	"cmp"
	"slices"
	"strings"

	"github.com/straitmesh/strait/internal/istioconfig"
)

// sortTelemetries orders Telemetries as Istio's getTelemetries does: the
// oldest first, then by namespace and name.
func sortTelemetries(cs []*istioconfig.Config) []*istioconfig.Config {
	out := slices.Clone(cs)
	slices.SortStableFunc(out, func(a, b *istioconfig.Config) int {
		return cmp.Or(a.CreationTime.Compare(b.CreationTime), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// TelemetriesFor returns the Telemetries that apply to a workload in
// namespace ns with labels, in the order Istio merges them
// (pilot/pkg/model/telemetry.go applicableTelemetries): the root
// namespace's first one without a selector, then ns's first one without a
// selector, then every one of ns whose selector matches the labels, the
// later overriding the earlier. nil when none applies.
func (s *Snapshot) TelemetriesFor(ns string, labels map[string]string) []*istioconfig.Config {
	wide := func(n string) *istioconfig.Config {
		for _, c := range s.telemetries {
			if c.Namespace == n && len(c.Telemetry().GetSelector().GetMatchLabels()) == 0 {
				return c
			}
		}
		return nil
	}
	var out []*istioconfig.Config
	if c := wide(s.RootNamespace); c != nil {
		out = append(out, c)
	}
	if ns != s.RootNamespace {
		if c := wide(ns); c != nil {
			out = append(out, c)
		}
	}
	for _, c := range s.telemetries {
		sel := c.Telemetry().GetSelector().GetMatchLabels()
		if c.Namespace == ns && len(sel) > 0 && len(labels) > 0 && labelsMatch(sel, labels) {
			out = append(out, c)
		}
	}
	return out
}

// telemetryKey names the Telemetries of a scope, for its Key.
func telemetryKey(cs []*istioconfig.Config) string {
	if len(cs) == 0 {
		return ""
	}
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.Namespace + "/" + c.Name
	}
	return "|tel:" + strings.Join(names, ",")
}
