package cluster

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	xdscorev3 "github.com/cncf/xds/go/xds/core/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	upstreamhttp "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/proxy/fieldtest"
	"github.com/straitmesh/strait/internal/proxy/stats"
)

// TestClusterFieldsClassified: every Cluster field is honoured or refused,
// so that a new Envoy API's field is noticed here; the DNS fields are
// honoured ones, and the allow-lists name only real fields.
func TestClusterFieldsClassified(t *testing.T) {
	fieldtest.Classified(t, (&clusterv3.Cluster{}).ProtoReflect().Descriptor(), clusterHonoured, clusterRefused)
	for _, n := range dnsFields {
		if _, ok := clusterHonoured[n]; !ok {
			t.Errorf("DNS field %s is not honoured", n)
		}
	}
	for _, c := range []struct {
		m    protoreflect.ProtoMessage
		list map[protoreflect.Name]bool
	}{
		{&endpointv3.ClusterLoadAssignment{}, claFields},
		{&endpointv3.ClusterLoadAssignment_Policy{}, claPolicyFields},
		{&endpointv3.LocalityLbEndpoints{}, localityLbEndpointsFields},
		{&endpointv3.LbEndpoint{}, lbEndpointFields},
		{&endpointv3.Endpoint{}, endpointFields},
		{&endpointv3.Endpoint_HealthCheckConfig{}, endpointHealthCheckFields},
		{&corev3.Address{}, endpointAddressFields},
		{&corev3.SocketAddress{}, socketAddressFields},
		{&corev3.Pipe{}, pipeFields},
		{&clusterv3.Cluster_EdsClusterConfig{}, edsClusterConfigFields},
		{&corev3.ConfigSource{}, edsConfigSourceFields},
		{&clusterv3.CircuitBreakers{}, circuitBreakersFields},
		{&clusterv3.CircuitBreakers_Thresholds{}, thresholdsFields},
		{&clusterv3.CircuitBreakers_Thresholds_RetryBudget{}, retryBudgetFields},
		{&corev3.Http2ProtocolOptions{}, http2OptionsFields},
		{&corev3.KeepaliveSettings{}, keepaliveFields},
		{&upstreamhttp.HttpProtocolOptions{}, httpProtocolOptionsFields},
		{&upstreamhttp.HttpProtocolOptions_UseDownstreamHttpConfig{}, downstreamProtocolConfigFields},
		{&corev3.HealthCheck{}, healthCheckFields},
		{&corev3.HealthCheck_HttpHealthCheck{}, httpHealthCheckFields},
		{&clusterv3.Cluster_MaglevLbConfig{}, maglevFields},
		{&clusterv3.OutlierDetection{}, outlierFields},
		{&clusterv3.Cluster_CommonLbConfig{}, commonLbConfigFields},
		{&clusterv3.UpstreamConnectionOptions{}, upstreamConnectionOptionsFields},
		{&corev3.BindConfig{}, upstreamBindFields},
	} {
		fieldtest.Known(t, c.m.ProtoReflect().Descriptor(), c.list)
	}
}

// TestClusterRefusedFieldsByName: each refused Cluster field, set, is an
// error naming it; a DNS field on a cluster that resolves no name, and an
// upstream bind config or maglev field strait does not read, are too.
func TestClusterRefusedFieldsByName(t *testing.T) {
	base := func() *clusterv3.Cluster {
		return &clusterv3.Cluster{Name: "c", ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC}}
	}
	build := func(c *clusterv3.Cluster) error {
		_, err := NewManager(slog.New(slog.DiscardHandler), stats.New()).build(c, nil)
		return err
	}
	if err := build(base()); err != nil {
		t.Fatal(err)
	}
	fields := (&clusterv3.Cluster{}).ProtoReflect().Descriptor().Fields()
	names := map[string]func(c *clusterv3.Cluster){}
	for n := range clusterRefused {
		names[string(n)] = func(c *clusterv3.Cluster) { fieldtest.SetSomething(c.ProtoReflect(), fields.ByName(n)) }
	}
	for _, n := range dnsFields {
		names[string(n)+" is not supported by strait-proxy on a STATIC cluster"] = func(c *clusterv3.Cluster) {
			fieldtest.SetSomething(c.ProtoReflect(), fields.ByName(n))
		}
	}
	names["upstream_bind_config.freebind"] = func(c *clusterv3.Cluster) {
		c.UpstreamBindConfig = &corev3.BindConfig{Freebind: wrapperspb.Bool(true)}
	}
	names["upstream_bind_config.source_address.resolver_name"] = func(c *clusterv3.Cluster) {
		c.UpstreamBindConfig = &corev3.BindConfig{SourceAddress: &corev3.SocketAddress{Address: "127.0.0.1", ResolverName: "r"}}
	}
	for want, set := range names {
		t.Run(want, func(t *testing.T) {
			c := base()
			set(c)
			if err := build(c); err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("got %v, want an error naming %s", err, want)
			}
		})
	}
	c := base()
	c.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 9999, protowire.VarintType), 1))
	if err := build(c); err == nil || !strings.Contains(err.Error(), "the Cluster has fields strait-proxy does not know") {
		t.Errorf("unknown field: got %v, want it refused", err)
	}
	c = base()
	c.UpstreamBindConfig = &corev3.BindConfig{SourceAddress: &corev3.SocketAddress{Address: "127.0.0.1"}}
	if err := build(c); err != nil {
		t.Errorf("upstream_bind_config.source_address: %v", err)
	}
}

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

// TestAssignmentPriorityBound: priorities up to maxPriority load; one above
// is refused by name.
func TestAssignmentPriorityBound(t *testing.T) {
	cla := func(p uint32) *endpointv3.ClusterLoadAssignment {
		return &endpointv3.ClusterLoadAssignment{ClusterName: "c", Endpoints: []*endpointv3.LocalityLbEndpoints{{Priority: p}}}
	}
	if err := checkAssignment(cla(maxPriority)); err != nil {
		t.Errorf("priority %d: %v", maxPriority, err)
	}
	if err := checkAssignment(cla(maxPriority + 1)); err == nil || !strings.Contains(err.Error(), "endpoints[0].priority") {
		t.Errorf("priority %d: got %v, want it refused by name", maxPriority+1, err)
	}
}
