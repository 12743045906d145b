// Package peermeta holds Istio's peer metadata: who the workload at the
// other end of a request or connection is, as Istio's proxies tell each
// other, and the two wire forms they use for it — the
// x-envoy-peer-metadata / x-envoy-peer-metadata-id HTTP headers (headers.go)
// and the TCP metadata exchange spoken first on an mTLS connection whose
// ALPN is istio-peer-exchange (exchange.go).
//
// What is carried is a google.protobuf.Struct with the fields of Istio's
// WorkloadMetadataObject (istio/proxy extensions/common/metadata_object.cc,
// convertWorkloadMetadataToStruct and convertStructToWorkloadMetadata):
// NAME, NAMESPACE, WORKLOAD_NAME, CLUSTER_ID, OWNER and a LABELS struct
// with the canonical service and revision and app/version. A node's
// bootstrap metadata has the same keys, so the local workload is read from
// it the same way (FromStruct).
package peermeta

import (
	"strings"

	"google.golang.org/protobuf/types/known/structpb"
)

// Keys of the metadata struct, as pilot-agent writes them into the node
// metadata and Istio's proxies exchange them.
const (
	KeyName         = "NAME"
	KeyNamespace    = "NAMESPACE"
	KeyWorkloadName = "WORKLOAD_NAME"
	KeyClusterID    = "CLUSTER_ID"
	KeyOwner        = "OWNER"
	KeyLabels       = "LABELS"

	LabelCanonicalName     = "service.istio.io/canonical-name"
	LabelCanonicalRevision = "service.istio.io/canonical-revision"
	LabelApp               = "app"
	LabelVersion           = "version"
	LabelAppQualified      = "app.kubernetes.io/name"
	LabelVersionQualified  = "app.kubernetes.io/version"
)

// ownerPrefix is how Istio writes a Kubernetes owner reference.
const ownerPrefix = "kubernetes://apis/apps/v1/namespaces/"

// WorkloadType is the kind of the workload's controller, read from OWNER.
type WorkloadType uint8

// The controller kinds OWNER names (Istio's workload types).
const (
	TypeUnknown WorkloadType = iota
	TypePod
	TypeDeployment
	TypeJob
	TypeCronJob
)

var typeSuffix = [...]string{TypePod: "pod", TypeDeployment: "deployment", TypeJob: "job", TypeCronJob: "cronjob"}

// Workload is one peer's (or our own) identity as Istio's metadata
// exchange carries it. The zero value is "unknown".
type Workload struct {
	Instance          string // NAME: the pod
	Namespace         string // NAMESPACE
	Workload          string // WORKLOAD_NAME: the deployment (or pod)
	Cluster           string // CLUSTER_ID
	CanonicalService  string // LABELS[service.istio.io/canonical-name]
	CanonicalRevision string // LABELS[service.istio.io/canonical-revision]
	App               string // LABELS[app.kubernetes.io/name] or LABELS[app]
	Version           string // LABELS[app.kubernetes.io/version] or LABELS[version]
	Type              WorkloadType
}

// IsZero reports whether nothing is known of the workload.
func (w Workload) IsZero() bool { return w == Workload{} }

// Owner is OWNER as Istio writes it back from the workload type
// (kubernetes://apis/apps/v1/namespaces/NS/deployments/NAME), "" when the
// type is unknown.
func (w Workload) Owner() string {
	if w.Type == TypeUnknown || int(w.Type) >= len(typeSuffix) {
		return ""
	}
	return ownerPrefix + w.Namespace + "/" + typeSuffix[w.Type] + "s/" + w.Workload
}

// parseOwner reads the workload type from an OWNER value: the path segment
// before "/<workload>" with its plural "s" removed, as Istio's parseOwner.
func parseOwner(owner, workload string) WorkloadType {
	if len(owner) <= len(workload)+2 {
		return TypeUnknown
	}
	owner = owner[:len(owner)-len(workload)-2]
	i := strings.LastIndexByte(owner, '/')
	if i < 0 {
		return TypeUnknown
	}
	switch owner[i+1:] {
	case "pod":
		return TypePod
	case "deployment":
		return TypeDeployment
	case "job":
		return TypeJob
	case "cronjob":
		return TypeCronJob
	}
	return TypeUnknown
}

// FromStruct reads a workload from a metadata struct: a peer's exchanged
// metadata or a node's bootstrap metadata. Fields of another type than
// string are ignored, as Istio's string_value() reads them as "".
func FromStruct(s *structpb.Struct) Workload {
	var w Workload
	var owner string
	for k, v := range s.GetFields() {
		switch k {
		case KeyName:
			w.Instance = v.GetStringValue()
		case KeyNamespace:
			w.Namespace = v.GetStringValue()
		case KeyWorkloadName:
			w.Workload = v.GetStringValue()
		case KeyClusterID:
			w.Cluster = v.GetStringValue()
		case KeyOwner:
			owner = v.GetStringValue()
		case KeyLabels:
			var app, appQ, ver, verQ string
			for lk, lv := range v.GetStructValue().GetFields() {
				switch lk {
				case LabelCanonicalName:
					w.CanonicalService = lv.GetStringValue()
				case LabelCanonicalRevision:
					w.CanonicalRevision = lv.GetStringValue()
				case LabelApp:
					app = lv.GetStringValue()
				case LabelAppQualified:
					appQ = lv.GetStringValue()
				case LabelVersion:
					ver = lv.GetStringValue()
				case LabelVersionQualified:
					verQ = lv.GetStringValue()
				}
			}
			w.App, w.Version = firstNonEmpty(appQ, app), firstNonEmpty(verQ, ver)
		}
	}
	w.Type = parseOwner(owner, w.Workload)
	return w
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Struct is the workload as Istio's convertWorkloadMetadataToStruct writes
// it: only the fields that are set, LABELS always present.
func (w Workload) Struct() *structpb.Struct {
	f := map[string]*structpb.Value{}
	set := func(m map[string]*structpb.Value, k, v string) {
		if v != "" {
			m[k] = structpb.NewStringValue(v)
		}
	}
	set(f, KeyName, w.Instance)
	set(f, KeyNamespace, w.Namespace)
	set(f, KeyWorkloadName, w.Workload)
	set(f, KeyClusterID, w.Cluster)
	labels := map[string]*structpb.Value{}
	set(labels, LabelCanonicalName, w.CanonicalService)
	set(labels, LabelCanonicalRevision, w.CanonicalRevision)
	set(labels, LabelApp, w.App)
	set(labels, LabelVersion, w.Version)
	f[KeyLabels] = structpb.NewStructValue(&structpb.Struct{Fields: labels})
	set(f, KeyOwner, w.Owner())
	return &structpb.Struct{Fields: f}
}
