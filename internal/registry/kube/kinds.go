package kube

import (
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// CRDResource is the API resource of CustomResourceDefinitions.
var CRDResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// istioGroups are the API groups whose kinds are watched through
// istio.io/client-go informers (every kind its factory knows).
var istioGroups = map[string]bool{
	"networking.istio.io": true,
	"security.istio.io":   true,
	"telemetry.istio.io":  true,
	"extensions.istio.io": true,
}

// GatewayAPIGroup is the Kubernetes Gateway API group.
const GatewayAPIGroup = "gateway.networking.k8s.io"

// gatewayAPIKinds are the Gateway API kinds watched when enabled.
var gatewayAPIKinds = map[string]bool{
	"GatewayClass": true, "Gateway": true, "HTTPRoute": true, "GRPCRoute": true,
	"TCPRoute": true, "TLSRoute": true, "UDPRoute": true, "ReferenceGrant": true,
	"BackendTLSPolicy": true, "ListenerSet": true,
}

// ExpectedIstioKinds are the Istio kinds straitd looks for; the ones whose
// CRD is missing are logged as unavailable at start.
var ExpectedIstioKinds = []string{
	"networking.istio.io/DestinationRule", "networking.istio.io/EnvoyFilter", "networking.istio.io/Gateway",
	"networking.istio.io/ProxyConfig", "networking.istio.io/ServiceEntry", "networking.istio.io/Sidecar",
	"networking.istio.io/VirtualService", "networking.istio.io/WorkloadEntry", "networking.istio.io/WorkloadGroup",
	"security.istio.io/AuthorizationPolicy", "security.istio.io/PeerAuthentication", "security.istio.io/RequestAuthentication",
	"telemetry.istio.io/Telemetry", "extensions.istio.io/WasmPlugin",
}

// versionPreference orders the API versions a kind is read in: the most
// stable one the CRD serves wins.
var versionPreference = []string{"v1", "v1beta1", "v1alpha3", "v1alpha2", "v1alpha1"}

// crdInfo is what kind discovery needs from a CRD.
type crdInfo struct {
	group, kind, plural string
	served              []string // served versions, most preferred first
	established         bool
}

// key is the handler key of the CRD's kind: GROUP/Kind.
func (c crdInfo) key() string { return c.group + "/" + c.kind }

func parseCRD(u *unstructured.Unstructured) crdInfo {
	c := crdInfo{}
	c.group, _, _ = unstructured.NestedString(u.Object, "spec", "group")
	c.kind, _, _ = unstructured.NestedString(u.Object, "spec", "names", "kind")
	c.plural, _, _ = unstructured.NestedString(u.Object, "spec", "names", "plural")
	versions, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
	for _, v := range versions {
		m, _ := v.(map[string]any)
		if name, _ := m["name"].(string); name != "" && m["served"] == true {
			c.served = append(c.served, name)
		}
	}
	slices.SortStableFunc(c.served, func(a, b string) int { return rank(a) - rank(b) })
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, cd := range conds {
		m, _ := cd.(map[string]any)
		if m["type"] == "Established" && m["status"] == "True" {
			c.established = true
		}
	}
	return c
}

func rank(version string) int {
	if i := slices.Index(versionPreference, version); i >= 0 {
		return i
	}
	return len(versionPreference)
}

// watchedKind is one CRD-backed kind with a running informer. Owned by the
// worker goroutine except informer and registration, which are safe for
// concurrent use.
type watchedKind struct {
	key          string
	gvr          schema.GroupVersionResource
	informer     cache.SharedIndexInformer
	registration cache.ResourceEventHandlerRegistration
	// installed is false after the CRD was deleted: the kind's objects
	// are left out of the snapshot until it is installed again.
	installed bool
	// synced is set once the informer's first list is in the cache.
	synced bool
}
