package gen

// The destination services a cluster serves, in its metadata as istiod
// writes them (addTelemetryMetadata in its cluster builder):
// filter_metadata "istio" → "services", a list of {host, name, namespace}.
// The stats filter reads the first entry for destination_service,
// destination_service_name and destination_service_namespace; on an
// inbound cluster, whose name holds no host, it is the only source (the
// inbound stats config disables the Host header fallback).

import (
	"slices"
	"strings"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/straitmesh/strait/internal/mesh"
)

// istioMetadataKey is the filter_metadata key of Istio's own cluster
// metadata.
const istioMetadataKey = "istio"

// applyServiceMetadata lists svcs (in order, each host once) in c's
// istio.services metadata; nothing when svcs is empty.
func applyServiceMetadata(c *cluster.Cluster, svcs ...*mesh.Service) {
	var list []*structpb.Value
	for i, s := range svcs {
		if s == nil || slices.ContainsFunc(svcs[:i], func(o *mesh.Service) bool { return o != nil && o.Hostname == s.Hostname }) {
			continue // each host once (a port's few services: no set needed)
		}
		list = append(list, structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
			"host":      structpb.NewStringValue(s.Hostname),
			"name":      structpb.NewStringValue(serviceShortName(s.Hostname)),
			"namespace": structpb.NewStringValue(s.Namespace),
		}}))
	}
	if len(list) == 0 {
		return
	}
	if c.Metadata == nil {
		c.Metadata = &core.Metadata{}
	}
	if c.Metadata.FilterMetadata == nil {
		c.Metadata.FilterMetadata = map[string]*structpb.Struct{}
	}
	md := c.Metadata.FilterMetadata[istioMetadataKey]
	if md == nil {
		md = &structpb.Struct{Fields: map[string]*structpb.Value{}}
		c.Metadata.FilterMetadata[istioMetadataKey] = md
	}
	md.Fields["services"] = structpb.NewListValue(&structpb.ListValue{Values: list})
}

// serviceShortName is a service's name as Istio's service attributes hold
// it: a Kubernetes service's host NAME.NAMESPACE.svc.DOMAIN gives NAME;
// a ServiceEntry's host is its own name.
func serviceShortName(host string) string {
	name, rest, ok := strings.Cut(host, ".")
	if !ok {
		return host
	}
	if _, rest, ok := strings.Cut(rest, "."); ok && (rest == "svc" || strings.HasPrefix(rest, "svc.")) {
		return name
	}
	return host
}
