package cluster

import (
	"strings"
	"testing"
	"time"

	xdscorev3 "github.com/cncf/xds/go/xds/core/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/straitmesh/strait/internal/proxy/stats"
)

// TestEndpointAddressFields: an endpoint address field the dial does not
// read is refused by name; a TCP socket address and a pipe path load.
func TestEndpointAddressFields(t *testing.T) {
	cla := func(a *corev3.Address) *endpointv3.ClusterLoadAssignment {
		return &endpointv3.ClusterLoadAssignment{ClusterName: "c", Endpoints: []*endpointv3.LocalityLbEndpoints{{
			LbEndpoints: []*endpointv3.LbEndpoint{{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: a}}}}}}}
	}
	sock := func(mut func(sa *corev3.SocketAddress)) *corev3.Address {
		sa := &corev3.SocketAddress{Address: "10.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 80}}
		if mut != nil {
			mut(sa)
		}
		return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: sa}}
	}
	for _, a := range []*corev3.Address{sock(nil), {Address: &corev3.Address_Pipe{Pipe: &corev3.Pipe{Path: "/tmp/s"}}}} {
		if _, err := endpointsFrom(cla(a)); err != nil {
			t.Errorf("%v: %v", a, err)
		}
	}
	const at = "cluster_load_assignment.endpoints[0].lb_endpoints[0].endpoint.address"
	for want, a := range map[string]*corev3.Address{
		at + ".socket_address.named_port":    sock(func(sa *corev3.SocketAddress) { sa.PortSpecifier = &corev3.SocketAddress_NamedPort{NamedPort: "http"} }),
		at + ".socket_address.resolver_name": sock(func(sa *corev3.SocketAddress) { sa.ResolverName = "r" }),
		at + ".socket_address.ipv4_compat":   sock(func(sa *corev3.SocketAddress) { sa.Ipv4Compat = true }),
		at + ".pipe.mode":                    {Address: &corev3.Address_Pipe{Pipe: &corev3.Pipe{Path: "/tmp/s", Mode: 0o600}}},
		at + ".envoy_internal_address":       {Address: &corev3.Address_EnvoyInternalAddress{EnvoyInternalAddress: &corev3.EnvoyInternalAddress{}}},
	} {
		if _, err := endpointsFrom(cla(a)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error naming it", want, err)
		}
	}
}

// TestEDSConfigFields: eds_cluster_config with an ADS source (Istio's, with
// initial_fetch_timeout and V3) loads; other config source fields are
// refused by name.
func TestEDSConfigFields(t *testing.T) {
	eds := func(mut func(cs *corev3.ConfigSource)) *clusterv3.Cluster {
		cs := &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
			InitialFetchTimeout: durationpb.New(0), ResourceApiVersion: corev3.ApiVersion_V3}
		if mut != nil {
			mut(cs)
		}
		return &clusterv3.Cluster{Name: "c", ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
			ConnectTimeout:   durationpb.New(time.Second),
			EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{ServiceName: "s", EdsConfig: cs}}
	}
	if _, err := build(eds(nil), stats.New(), nil); err != nil {
		t.Fatal(err)
	}
	for want, mut := range map[string]func(cs *corev3.ConfigSource){
		"eds_cluster_config.eds_config.authorities":          func(cs *corev3.ConfigSource) { cs.Authorities = []*xdscorev3.Authority{{Name: "a"}} },
		"eds_cluster_config.eds_config.resource_api_version": func(cs *corev3.ConfigSource) { cs.ResourceApiVersion = corev3.ApiVersion_V2 }, //nolint:staticcheck // the refused value
	} {
		if _, err := build(eds(mut), stats.New(), nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error naming it", want, err)
		}
	}
}
