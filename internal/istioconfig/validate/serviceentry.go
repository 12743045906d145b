package validate

import (
	"fmt"
	"net/netip"
	"strings"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/straitmesh/strait/internal/istioconfig/fielderr"
	"github.com/straitmesh/strait/internal/protocol"
)

// This file checks a ServiceEntry (validateServiceEntry; its resolution
// rules are validateResolution's).

func validateServiceEntry(el *fielderr.List, namespace string, s *networking.ServiceEntry) {
	refuseDNSEndpointLocality(el, s)
	validateResolution(el, s)
	validateExportTo(el, namespace, s.ExportTo, true)
	if len(s.Hosts) == 0 {
		el.Add("spec.hosts", "must list at least one host")
	}
	for i, h := range s.Hosts {
		validateHost(el, fmt.Sprintf("spec.hosts[%d]", i), h)
		if h == "*" {
			el.Add(fmt.Sprintf("spec.hosts[%d]", i), `"*" is not allowed in a ServiceEntry`)
		}
	}
	for i, a := range s.Addresses {
		if _, err := netip.ParseAddr(a); err == nil {
			continue
		}
		if _, err := netip.ParsePrefix(a); err == nil {
			continue
		}
		el.Add(fmt.Sprintf("spec.addresses[%d]", i), "%q is not an IP address or CIDR (e.g. 240.240.0.10 or 10.0.0.0/16)", a)
	}
	if len(s.Ports) == 0 {
		el.Add("spec.ports", "must list at least one port")
	}
	numbers, names := map[uint32]int{}, map[string]int{}
	for i, p := range s.Ports {
		f := fmt.Sprintf("spec.ports[%d]", i)
		if p == nil {
			el.Add(f, "must not be null")
			continue
		}
		if !validPort(p.Number) {
			el.Add(f+".number", "%d is not a valid port (1-65535)", p.Number)
		} else if j, dup := numbers[p.Number]; dup {
			el.Add(f+".number", "%d is already used by spec.ports[%d]", p.Number, j)
		} else {
			numbers[p.Number] = i
		}
		switch {
		case p.Name == "":
			el.Add(f+".name", "must be set (e.g. http, or http-web)")
		case !portNameRe.MatchString(p.Name):
			el.Add(f+".name", "%q is not a valid port name", p.Name)
		default:
			if j, dup := names[p.Name]; dup {
				el.Add(f+".name", "%q is already used by spec.ports[%d]", p.Name, j)
			}
			names[p.Name] = i
		}
		if _, known := protocol.Parse(p.Protocol); p.Protocol != "" && !known {
			el.Add(f+".protocol", "%q is not a known protocol (one of %s)", p.Protocol, strings.Join(protocol.Names(), ", "))
		}
		if p.TargetPort != 0 && !validPort(p.TargetPort) {
			el.Add(f+".targetPort", "%d is not a valid port (1-65535)", p.TargetPort)
		}
	}
	if s.WorkloadSelector != nil && len(s.Endpoints) > 0 {
		el.Add("spec.workloadSelector", "cannot be used together with spec.endpoints")
	}
	if s.WorkloadSelector != nil {
		validateLabels(el, "spec.workloadSelector.labels", s.WorkloadSelector.Labels)
	}
	dnsOK := s.Resolution == networking.ServiceEntry_DNS || s.Resolution == networking.ServiceEntry_DNS_ROUND_ROBIN
	for i, ep := range s.Endpoints {
		f := fmt.Sprintf("spec.endpoints[%d]", i)
		if ep == nil {
			el.Add(f, "must not be null")
			continue
		}
		validateWorkloadEntry(el, f, ep, dnsOK)
		for name := range ep.Ports {
			if _, ok := names[name]; !ok {
				el.Add(fmt.Sprintf("%s.ports[%s]", f, name), "no port named %q in spec.ports", name)
			}
		}
	}
}
