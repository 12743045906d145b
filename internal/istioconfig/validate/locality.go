package validate

import (
	"errors"
	"fmt"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/straitmesh/strait/internal/istioconfig/fielderr"
	"github.com/straitmesh/strait/internal/locality"
)

// validateLocalityLbSettings checks every localityLbSetting of a
// DestinationRule: top level, port-level, subsets and their port-level
// settings.
func validateLocalityLbSettings(el *fielderr.List, s *networking.DestinationRule) {
	check := func(f string, lb *networking.LoadBalancerSettings) {
		var fe *locality.FieldError
		if err := locality.Validate(f+".loadBalancer.localityLbSetting", lb.GetLocalityLbSetting()); errors.As(err, &fe) {
			el.Add(fe.Field, "%s", fe.Problem)
		}
	}
	policy := func(f string, p *networking.TrafficPolicy) {
		check(f, p.GetLoadBalancer())
		for i, pl := range p.GetPortLevelSettings() {
			check(fmt.Sprintf("%s.portLevelSettings[%d]", f, i), pl.GetLoadBalancer())
		}
	}
	policy("spec.trafficPolicy", s.GetTrafficPolicy())
	for i, ss := range s.GetSubsets() {
		policy(fmt.Sprintf("spec.subsets[%d].trafficPolicy", i), ss.GetTrafficPolicy())
	}
}

// refuseDNSEndpointLocality refuses endpoint localities on a ServiceEntry
// that resolves names: its endpoints become a DNS cluster's inline load
// assignment, which Strait shares across proxies and so cannot rank by
// the proxy's locality.
func refuseDNSEndpointLocality(el *fielderr.List, s *networking.ServiceEntry) {
	switch s.GetResolution() {
	case networking.ServiceEntry_DNS, networking.ServiceEntry_DNS_ROUND_ROBIN:
	default:
		return
	}
	for i, ep := range s.GetEndpoints() {
		if ep.GetLocality() != "" {
			el.AddErr(fmt.Sprintf("spec.endpoints[%d].locality", i),
				fmt.Errorf("%w with resolution %s (only STATIC endpoints have localities)", fielderr.ErrNotSupported, s.GetResolution()))
		}
	}
}
