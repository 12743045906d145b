package config

import (
	"errors"
	"fmt"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/straitmesh/strait/internal/locality"
)

// validateLocalityLbSettings checks every localityLbSetting of a
// DestinationRule: top level, port-level, subsets and their port-level
// settings.
func validateLocalityLbSettings(el *errorList, s *networking.DestinationRule) {
	check := func(f string, lb *networking.LoadBalancerSettings) {
		var fe *locality.FieldError
		if err := locality.Validate(f+".loadBalancer.localityLbSetting", lb.GetLocalityLbSetting()); errors.As(err, &fe) {
			el.add(fe.Field, "%s", fe.Problem)
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
