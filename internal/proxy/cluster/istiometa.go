package cluster

// The destination service istiod writes on a cluster's metadata
// (filter_metadata "istio" → "services", a list of {host, name,
// namespace}), which Istio's stats filter reads for the
// destination_service labels: the first entry is the cluster's service.
// Other metadata stays descriptive (fields.go).

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/straitmesh/strait/internal/proxy/istiometrics"
)

// istioService reads the first entry of md's istio.services; ok is false
// when there is none or it has no string host (the stats filter then
// falls back as Istio's does). A missing name or namespace is
// istiometrics.Unknown.
func istioService(md *corev3.Metadata) (istiometrics.Service, bool) {
	list := md.GetFilterMetadata()["istio"].GetFields()["services"].GetListValue().GetValues()
	if len(list) == 0 {
		return istiometrics.Service{}, false
	}
	f := list[0].GetStructValue().GetFields()
	host := f["host"].GetStringValue()
	if host == "" {
		return istiometrics.Service{}, false
	}
	s := istiometrics.Service{Host: host, Name: f["name"].GetStringValue(), Namespace: f["namespace"].GetStringValue()}
	if s.Name == "" {
		s.Name = istiometrics.Unknown
	}
	if s.Namespace == "" {
		s.Namespace = istiometrics.Unknown
	}
	return s, true
}
