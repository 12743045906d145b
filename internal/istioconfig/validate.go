package istioconfig

import (
	"fmt"
	"net/netip"
	"regexp"
	"sort"

	networking "istio.io/api/networking/v1alpha3"
	security "istio.io/api/security/v1beta1"
)

// Validation of a loaded object: validateSpec dispatches on its kind to
// the validate_<kind>.go file that checks it as Istio's admission webhook
// does (pkg/config/validation); this file keeps the dispatch and the
// checks several kinds share (names, hosts, ports, labels, subnets).

var (
	dns1123Label  = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	dns1123Domain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	portNameRe    = regexp.MustCompile(`^[a-zA-Z0-9]([-a-zA-Z0-9_.]*[a-zA-Z0-9])?$`)
	// hostRe accepts a DNS name, optionally with a leading "*." wildcard, or "*".
	hostRe = regexp.MustCompile(`^(\*|(\*\.)?[a-zA-Z0-9]([-a-zA-Z0-9_]*[a-zA-Z0-9])?(\.[a-zA-Z0-9]([-a-zA-Z0-9_]*[a-zA-Z0-9])?)*\.?)$`)
)

func validateMeta(el *errorList, md metadata) {
	switch {
	case md.Name == "":
		el.add("metadata.name", "must be set")
	case len(md.Name) > 253 || !dns1123Domain.MatchString(md.Name):
		el.add("metadata.name", "%q is not a valid name (lower-case letters, digits, '-' and '.')", md.Name)
	}
	if md.Namespace != "" && (len(md.Namespace) > 63 || !dns1123Label.MatchString(md.Namespace)) {
		el.add("metadata.namespace", "%q is not a valid namespace (lower-case letters, digits and '-')", md.Namespace)
	}
}

func validateSpec(el *errorList, c *Config) {
	switch s := c.Spec.(type) {
	case *networking.ServiceEntry:
		validateServiceEntry(el, c.Namespace, s)
	case *networking.WorkloadEntry:
		validateWorkloadEntry(el, "spec", s, false)
	case *networking.VirtualService:
		validateVirtualService(el, c.Namespace, s)
	case *networking.DestinationRule:
		validateDestinationRule(el, c.Namespace, s)
	case *networking.Sidecar:
		validateSidecar(el, s)
	case *networking.Gateway:
		validateGateway(el, s) // validate_gateway.go
	case *security.AuthorizationPolicy:
		validateAuthorizationPolicy(el, c, s) // validate_authz.go
	case *security.PeerAuthentication:
		validatePeerAuthentication(el, s) // validate_peerauthn.go
	case *security.RequestAuthentication:
		validateRequestAuthentication(el, s) // validate_jwt.go
	}
}

// validateSubnet checks an address or CIDR of a tcp match.
func validateSubnet(el *errorList, field, v string) {
	if _, err := netip.ParsePrefix(v); err == nil {
		return
	}
	if _, err := netip.ParseAddr(v); err == nil {
		return
	}
	el.add(field, "%q is not an IP address or CIDR (e.g. 10.1.0.0/16 or 10.1.2.3)", v)
}

func validPort(n uint32) bool { return n >= 1 && n <= 65535 }

func validateHost(el *errorList, field, h string) {
	switch {
	case h == "":
		el.add(field, "must not be empty")
	case !hostRe.MatchString(h):
		el.add(field, "%q is not a valid host name (e.g. reviews.default.svc.cluster.local, or *.example.com)", h)
	}
}

var labelKeyRe = regexp.MustCompile(`^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)
var labelValueRe = regexp.MustCompile(`^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$`)

func validateLabels(el *errorList, f string, labels map[string]string) {
	for _, k := range sortedKeys(labels) {
		if !labelKeyRe.MatchString(k) {
			el.add(f, "%q is not a valid label key", k)
		}
		if v := labels[k]; len(v) > 63 || !labelValueRe.MatchString(v) {
			el.add(fmt.Sprintf("%s[%s]", f, k), "%q is not a valid label value", v)
		}
	}
}

var headerNameRe = regexp.MustCompile(`^[-_A-Za-z0-9]+$`)

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
