// Package validate checks an Istio config object as Istio's admission
// webhook does (pkg/config/validation): Meta its name and namespace, Spec
// its spec, by kind, in the file named for the kind (virtualservice.go,
// destinationrule.go with policy.go and locality.go, route.go for the
// routes, authz.go, ...). This file keeps the dispatch and the checks
// several kinds share (names, hosts, ports, labels, subnets). Problems go
// to a fielderr.List, named by their field path ("spec.http[0].route").
package validate

import (
	"fmt"
	"net/netip"
	"regexp"
	"sort"

	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1alpha3"
	security "istio.io/api/security/v1beta1"
	telemetry "istio.io/api/telemetry/v1alpha1"

	"github.com/straitmesh/strait/internal/istioconfig/fielderr"
)

var (
	dns1123Label  = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	dns1123Domain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	portNameRe    = regexp.MustCompile(`^[a-zA-Z0-9]([-a-zA-Z0-9_.]*[a-zA-Z0-9])?$`)
	// hostRe accepts a DNS name, optionally with a leading "*." wildcard, or "*".
	hostRe = regexp.MustCompile(`^(\*|(\*\.)?[a-zA-Z0-9]([-a-zA-Z0-9_]*[a-zA-Z0-9])?(\.[a-zA-Z0-9]([-a-zA-Z0-9_]*[a-zA-Z0-9])?)*\.?)$`)
)

// Meta checks an object's metadata.name and metadata.namespace (empty:
// the default namespace).
func Meta(el *fielderr.List, name, namespace string) {
	switch {
	case name == "":
		el.Add("metadata.name", "must be set")
	case len(name) > 253 || !dns1123Domain.MatchString(name):
		el.Add("metadata.name", "%q is not a valid name (lower-case letters, digits, '-' and '.')", name)
	}
	if namespace != "" && (len(namespace) > 63 || !dns1123Label.MatchString(namespace)) {
		el.Add("metadata.namespace", "%q is not a valid namespace (lower-case letters, digits and '-')", namespace)
	}
}

// Spec checks the spec of an object in namespace, with its annotations
// (an AuthorizationPolicy's dry-run): one of the istio.io/api messages
// of package schema's kinds; another message is not checked.
func Spec(el *fielderr.List, namespace string, annotations map[string]string, spec proto.Message) {
	switch s := spec.(type) {
	case *networking.ServiceEntry:
		validateServiceEntry(el, namespace, s)
	case *networking.WorkloadEntry:
		validateWorkloadEntry(el, "spec", s, false)
	case *networking.VirtualService:
		validateVirtualService(el, namespace, s)
	case *networking.DestinationRule:
		validateDestinationRule(el, namespace, s)
	case *networking.Sidecar:
		validateSidecar(el, s)
	case *networking.Gateway:
		validateGateway(el, s) // gateway.go
	case *telemetry.Telemetry:
		validateTelemetry(el, s) // telemetry.go
	case *security.AuthorizationPolicy:
		validateAuthorizationPolicy(el, annotations, s) // authz.go
	case *security.PeerAuthentication:
		validatePeerAuthentication(el, s) // peerauthn.go
	case *security.RequestAuthentication:
		validateRequestAuthentication(el, s) // jwt.go
	}
}

// validateSubnet checks an address or CIDR of a tcp match.
func validateSubnet(el *fielderr.List, field, v string) {
	if _, err := netip.ParsePrefix(v); err == nil {
		return
	}
	if _, err := netip.ParseAddr(v); err == nil {
		return
	}
	el.Add(field, "%q is not an IP address or CIDR (e.g. 10.1.0.0/16 or 10.1.2.3)", v)
}

func validPort(n uint32) bool { return n >= 1 && n <= 65535 }

func validateHost(el *fielderr.List, field, h string) {
	switch {
	case h == "":
		el.Add(field, "must not be empty")
	case !hostRe.MatchString(h):
		el.Add(field, "%q is not a valid host name (e.g. reviews.default.svc.cluster.local, or *.example.com)", h)
	}
}

var labelKeyRe = regexp.MustCompile(`^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)
var labelValueRe = regexp.MustCompile(`^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$`)

func validateLabels(el *fielderr.List, f string, labels map[string]string) {
	for _, k := range sortedKeys(labels) {
		if !labelKeyRe.MatchString(k) {
			el.Add(f, "%q is not a valid label key", k)
		}
		if v := labels[k]; len(v) > 63 || !labelValueRe.MatchString(v) {
			el.Add(fmt.Sprintf("%s[%s]", f, k), "%q is not a valid label value", v)
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
