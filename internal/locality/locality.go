// Package locality holds what the control plane and the agent share about
// localities: Istio's "region/zone/subzone" form, the pod label that
// carries it, the match of a locality against a rule's pattern, and the
// validation of a localityLbSetting.
package locality

import (
	"fmt"
	"slices"
	"strings"

	networking "istio.io/api/networking/v1alpha3"
)

// Label is the pod (or WorkloadEntry) label that names a workload's
// locality, with "." between its parts since "/" is not allowed in a label
// value (Istio's istio-locality).
const Label = "istio-locality"

// Kubernetes topology labels of a node, which Istio reads a pod's
// locality from when the pod has no istio-locality label, with the
// deprecated beta names as fallbacks.
const (
	RegionLabel     = "topology.kubernetes.io/region"
	ZoneLabel       = "topology.kubernetes.io/zone"
	SubzoneLabel    = "topology.istio.io/subzone"
	betaRegionLabel = "failure-domain.beta.kubernetes.io/region"
	betaZoneLabel   = "failure-domain.beta.kubernetes.io/zone"
)

// Locality is a workload's place: region, zone and subzone, each possibly
// empty.
type Locality struct {
	Region, Zone, Subzone string
}

// Parse reads "region/zone/subzone"; missing trailing parts are empty.
func Parse(s string) Locality {
	parts := strings.SplitN(s, "/", 3)
	var l Locality
	l.Region = parts[0]
	if len(parts) > 1 {
		l.Zone = parts[1]
	}
	if len(parts) > 2 {
		l.Subzone = parts[2]
	}
	return l
}

// String is "region/zone/subzone" without trailing empty parts (Istio's
// LocalityToString).
func (l Locality) String() string {
	switch {
	case l.Subzone != "":
		return l.Region + "/" + l.Zone + "/" + l.Subzone
	case l.Zone != "":
		return l.Region + "/" + l.Zone
	}
	return l.Region
}

// FromLabel is the locality an istio-locality label value names
// ("region.zone.subzone", "." since "/" is not allowed in a label value)
// as "region/zone/subzone"; "" for "".
func FromLabel(v string) string { return strings.ReplaceAll(v, ".", "/") }

// FromNodeLabels is a node's locality from its topology labels (Istio's
// getPodLocality); "" when it has none.
func FromNodeLabels(labels map[string]string) string {
	or := func(a, b string) string {
		if v := labels[a]; v != "" {
			return v
		}
		return labels[b]
	}
	return Locality{Region: or(RegionLabel, betaRegionLabel), Zone: or(ZoneLabel, betaZoneLabel), Subzone: labels[SubzoneLabel]}.String()
}

// Matches reports whether l falls under pattern, a locality whose parts
// may be "*" and whose missing trailing parts match anything (Istio's
// util.LocalityMatch): "us-east/*" and "us-east" both match every zone of
// us-east.
func (l Locality) Matches(pattern string) bool {
	p := Parse(pattern)
	part := func(rule, v string, optional bool) bool {
		return rule == "*" || (optional && rule == "") || rule == v
	}
	return part(p.Region, l.Region, false) && part(p.Zone, l.Zone, true) && part(p.Subzone, l.Subzone, true)
}

// Priority is how far an endpoint's locality is from the proxy's, as
// Istio's util.LbPriority ranks it: 0 same subzone, 1 same zone, 2 same
// region, 3 another region.
func Priority(proxy, ep Locality) int {
	switch {
	case proxy.Region != ep.Region:
		return 3
	case proxy.Zone != ep.Zone:
		return 2
	case proxy.Subzone != ep.Subzone:
		return 1
	}
	return 0
}

// FieldError is a problem with one field of a localityLbSetting.
type FieldError struct {
	Field, Problem string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Problem }

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// Validate checks a localityLbSetting as Istio's validation does
// (validateLocalityLbSetting); field prefixes the names in the error.
func Validate(field string, s *networking.LocalityLoadBalancerSetting) error {
	if s == nil {
		return nil
	}
	if len(s.GetDistribute()) > 0 && len(s.GetFailover()) > 0 {
		return fieldErr(field, "distribute and failover cannot both be set (choose one)")
	}
	froms := map[string]bool{}
	for i, d := range s.GetDistribute() {
		f := fmt.Sprintf("%s.distribute[%d]", field, i)
		if d == nil {
			return fieldErr(f, "must not be null")
		}
		if err := validPattern(f+".from", d.GetFrom()); err != nil {
			return err
		}
		if froms[d.GetFrom()] {
			return fieldErr(f+".from", "%q is already the from of another distribute entry", d.GetFrom())
		}
		froms[d.GetFrom()] = true
		var sum uint32
		keys := make([]string, 0, len(d.GetTo()))
		for k := range d.GetTo() {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if err := validPattern(f+".to", k); err != nil {
				return err
			}
			sum += d.GetTo()[k]
		}
		if sum != 100 {
			return fieldErr(f+".to", "the weights add up to %d; they must add up to 100", sum)
		}
	}
	for i, fo := range s.GetFailover() {
		f := fmt.Sprintf("%s.failover[%d]", field, i)
		if fo == nil {
			return fieldErr(f, "must not be null")
		}
		for _, r := range []struct{ name, v string }{{"from", fo.GetFrom()}, {"to", fo.GetTo()}} {
			if r.v == "" || strings.ContainsAny(r.v, "/*") {
				return fieldErr(f+"."+r.name, "%q is not a region (a name without \"/\" or \"*\")", r.v)
			}
		}
		if fo.GetFrom() == fo.GetTo() {
			return fieldErr(f, "from and to are both %q; failover goes to another region", fo.GetFrom())
		}
	}
	for i, p := range s.GetFailoverPriority() {
		if p == "" {
			return fieldErr(fmt.Sprintf("%s.failoverPriority[%d]", field, i), "must be a label name (optionally NAME=VALUE)")
		}
	}
	return nil
}

// validPattern checks a locality pattern of distribute: "*" may only be a
// whole part, and nothing follows it.
func validPattern(field, p string) error {
	if p == "" {
		return fieldErr(field, "must be set to a locality (region/zone/subzone, \"*\" for any part)")
	}
	parts := strings.Split(p, "/")
	if len(parts) > 3 {
		return fieldErr(field, "%q has more than region/zone/subzone", p)
	}
	for i, part := range parts {
		if part == "" {
			return fieldErr(field, "%q has an empty part", p)
		}
		if strings.Contains(part, "*") && (part != "*" || i != len(parts)-1) {
			return fieldErr(field, "%q: \"*\" may only be the last part, alone", p)
		}
	}
	return nil
}
