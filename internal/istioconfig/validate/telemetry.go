package validate

import (
	"fmt"
	"maps"
	"slices"

	telemetry "istio.io/api/telemetry/v1alpha1"

	"github.com/straitmesh/strait/internal/istioconfig/fielderr"
)

// validateTelemetry applies Istio's ValidateTelemetry
// (pkg/config/validation): one way of selecting workloads, valid selector
// labels, provider names set, a sampling percentage in 0..100, custom
// tags with a type, and a positive reporting interval.
func validateTelemetry(el *fielderr.List, s *telemetry.Telemetry) {
	validateOneSelector(el, s.GetSelector() != nil, s.GetTargetRef() != nil, len(s.GetTargetRefs()) > 0)
	validateLabels(el, "spec.selector.matchLabels", s.GetSelector().GetMatchLabels())
	providers := func(at string, ps []*telemetry.ProviderRef) {
		for i, p := range ps {
			if p.GetName() == "" {
				el.Add(fmt.Sprintf("%s.providers[%d].name", at, i), "must be set (the name of a meshConfig extensionProviders entry, or envoy or prometheus)")
			}
		}
	}
	for i, t := range s.GetTracing() {
		at := fmt.Sprintf("spec.tracing[%d]", i)
		providers(at, t.GetProviders())
		if len(t.GetProviders()) > 1 {
			el.Add(at+".providers", "names %d providers; a proxy reports spans to one (Istio takes the first): list one", len(t.GetProviders()))
		}
		if p := t.GetRandomSamplingPercentage(); p != nil && (p.GetValue() < 0 || p.GetValue() > 100) {
			el.Add(at+".randomSamplingPercentage", "%v is not in 0..100", p.GetValue())
		}
		for _, name := range slices.Sorted(maps.Keys(t.GetCustomTags())) {
			tag := t.GetCustomTags()[name]
			tat := at + ".customTags." + name
			switch {
			case name == "":
				el.Add(at+".customTags", "a tag has an empty name")
			case tag.GetLiteral() != nil:
				if tag.GetLiteral().GetValue() == "" {
					el.Add(tat+".literal.value", "must be set")
				}
			case tag.GetEnvironment() != nil:
				if tag.GetEnvironment().GetName() == "" {
					el.Add(tat+".environment.name", "must be set")
				}
			case tag.GetHeader() != nil:
				if tag.GetHeader().GetName() == "" {
					el.Add(tat+".header.name", "must be set")
				}
			case tag.GetFormatter() != nil:
			default:
				el.Add(tat, "needs literal, environment or header")
			}
		}
	}
	for i, m := range s.GetMetrics() {
		at := fmt.Sprintf("spec.metrics[%d]", i)
		providers(at, m.GetProviders())
		if d := m.GetReportingInterval(); d != nil && (d.CheckValid() != nil || d.AsDuration() <= 0) {
			el.Add(at+".reportingInterval", "must be a positive duration (e.g. 15s)")
		}
	}
	for i, a := range s.GetAccessLogging() {
		providers(fmt.Sprintf("spec.accessLogging[%d]", i), a.GetProviders())
	}
}
