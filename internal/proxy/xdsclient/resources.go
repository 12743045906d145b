package xdsclient

import (
	"fmt"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/straitmesh/strait/internal/proxy/pgv"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// validatable is a decoded resource, checked by pgv.ValidateAll (the
// protoc-gen-validate rules, without linking the generated validators).
type validatable = proto.Message

func newResource(typeURL string) (validatable, func(validatable) string) {
	switch typeURL {
	case xdsapi.ClusterType:
		return &clusterv3.Cluster{}, func(m validatable) string { return m.(*clusterv3.Cluster).GetName() }
	case xdsapi.EndpointType:
		return &endpointv3.ClusterLoadAssignment{}, func(m validatable) string {
			return m.(*endpointv3.ClusterLoadAssignment).GetClusterName()
		}
	case xdsapi.ListenerType:
		return &listenerv3.Listener{}, func(m validatable) string { return m.(*listenerv3.Listener).GetName() }
	case xdsapi.RouteType:
		return &routev3.RouteConfiguration{}, func(m validatable) string {
			return m.(*routev3.RouteConfiguration).GetName()
		}
	case xdsapi.SecretType:
		return &tlsv3.Secret{}, func(m validatable) string { return m.(*tlsv3.Secret).GetName() }
	}
	return nil, nil
}

// decode unmarshals and validates every resource of a response. Any error
// names the resource.
func decode(typeURL string, rs []*anypb.Any) ([]validatable, error) {
	out := make([]validatable, 0, len(rs))
	seen := map[string]bool{}
	for i, a := range rs {
		if a.GetTypeUrl() != typeURL {
			return nil, fmt.Errorf("resource %d: type %q in a %q response", i, a.GetTypeUrl(), typeURL)
		}
		m, nameOf := newResource(typeURL)
		if m == nil {
			return nil, fmt.Errorf("type %q is not supported", typeURL)
		}
		if err := a.UnmarshalTo(m); err != nil {
			return nil, fmt.Errorf("resource %d: %w", i, err)
		}
		name := nameOf(m)
		if err := pgv.ValidateAll(m); err != nil {
			return nil, fmt.Errorf("%s %q: %w", shortType(typeURL), name, err)
		}
		if seen[name] {
			return nil, fmt.Errorf("%s %q: duplicate in response", shortType(typeURL), name)
		}
		seen[name] = true
		out = append(out, m)
	}
	return out, nil
}

// resourceNames returns the names of the resources of a response that
// decode, valid or not (those that do not decode have none to give).
func resourceNames(typeURL string, rs []*anypb.Any) []string {
	var out []string
	for _, a := range rs {
		m, nameOf := newResource(typeURL)
		if m == nil || a.GetTypeUrl() != typeURL || a.UnmarshalTo(m) != nil {
			continue
		}
		if n := nameOf(m); n != "" {
			out = append(out, n)
		}
	}
	return out
}

func shortType(typeURL string) string {
	switch typeURL {
	case xdsapi.ClusterType:
		return "cluster"
	case xdsapi.EndpointType:
		return "cluster_load_assignment"
	case xdsapi.ListenerType:
		return "listener"
	case xdsapi.RouteType:
		return "route_configuration"
	case xdsapi.SecretType:
		return "secret"
	}
	return typeURL
}

func as[T proto.Message](ms []validatable) []T {
	out := make([]T, len(ms))
	for i, m := range ms {
		out[i] = m.(T)
	}
	return out
}
