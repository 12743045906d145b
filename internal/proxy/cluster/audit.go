package cluster

import (
	"fmt"
	"slices"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// clusterFields are the Cluster fields strait-proxy implements (each is
// read by build or the code it calls). Any other field is refused, so that
// a control plane never believes it configured something strait ignores.
var clusterFields = []string{
	"name", "type", "cluster_type", "eds_cluster_config", "connect_timeout", "lb_policy",
	"load_assignment", "health_checks", "circuit_breakers", "common_http_protocol_options",
	"http2_protocol_options", "typed_extension_protocol_options", "protocol_selection",
	"outlier_detection", "upstream_bind_config", "ring_hash_lb_config", "maglev_lb_config",
	"least_request_lb_config", "round_robin_lb_config", "common_lb_config",
	// transport_socket(_matches): tlsconf refuses what it does not implement
	// (transport.go).
	"transport_socket", "transport_socket_matches",
	// original_dst_lb_config: checkOriginalDst refuses its unimplemented fields.
	"original_dst_lb_config",
	"upstream_connection_options", "per_connection_buffer_limit_bytes",
	// Descriptive only: filter metadata for other consumers (Istio's
	// istio.services), and cluster warming, which is always done.
	"metadata", "wait_for_warm_on_init",
	// The name the cluster's stats carry (statName).
	"alt_stat_name",
}

// dnsFields belong to the DNS cluster types; they are checked where those
// types are built, and refused on the others.
var dnsFields = []string{
	"dns_refresh_rate", "dns_failure_refresh_rate", "respect_dns_ttl", "dns_lookup_family",
	"dns_resolvers", "use_tcp_for_dns_lookups", "dns_resolution_config", "typed_dns_resolver_config",
	"dns_jitter",
}

// maxPriority bounds the priority levels of a load assignment (Istio uses
// at most a handful; Envoy has no bound, but each level costs a slot).
const maxPriority = 127

// minBufferLimit is the smallest per_connection_buffer_limit_bytes strait
// honours: its upstream codecs read and write in 16 KiB buffers.
const minBufferLimit = 16 << 10

// checkClusterFields refuses the Cluster fields strait does not implement,
// naming the first one.
func checkClusterFields(c *clusterv3.Cluster) error {
	var bad string
	isDNS := c.GetType() == clusterv3.Cluster_STRICT_DNS || c.GetType() == clusterv3.Cluster_LOGICAL_DNS
	c.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		n := string(fd.Name())
		if slices.Contains(clusterFields, n) || isDNS && slices.Contains(dnsFields, n) {
			return true
		}
		bad = n
		return false
	})
	if bad != "" {
		return fmt.Errorf("field %s is not supported by strait-proxy (remove it)", bad)
	}
	if c.GetWaitForWarmOnInit() != nil && !c.GetWaitForWarmOnInit().GetValue() {
		return fmt.Errorf("wait_for_warm_on_init false is not supported (clusters always warm)")
	}
	if v := c.GetPerConnectionBufferLimitBytes(); v != nil && v.GetValue() < minBufferLimit {
		return fmt.Errorf("per_connection_buffer_limit_bytes %d is below %d, the buffer size strait's codecs use", v.GetValue(), minBufferLimit)
	}
	return nil
}

// checkAssignment refuses the ClusterLoadAssignment fields strait does not
// implement: named endpoints, and policy fields other than the
// overprovisioning factor. Priorities and locality weights are implemented
// (priority.go); a locality is a label (weights, not zone-aware routing,
// decide between localities).
func checkAssignment(cla *endpointv3.ClusterLoadAssignment) error {
	if err := onlyFields("cluster_load_assignment", cla, "cluster_name", "endpoints", "policy"); err != nil {
		return err
	}
	if err := onlyFields("cluster_load_assignment.policy", cla.GetPolicy(), "overprovisioning_factor"); err != nil {
		return err
	}
	for i, lle := range cla.GetEndpoints() {
		field := fmt.Sprintf("cluster_load_assignment.endpoints[%d]", i)
		if err := onlyFields(field, lle, "locality", "lb_endpoints", "load_balancing_weight", "priority", "metadata"); err != nil {
			return err
		}
		if lle.GetPriority() > maxPriority {
			return fmt.Errorf("%s.priority %d is above %d, the most priorities strait-proxy keeps", field, lle.GetPriority(), maxPriority)
		}
		for j, lbe := range lle.GetLbEndpoints() {
			f := fmt.Sprintf("%s.lb_endpoints[%d]", field, j)
			if err := onlyFields(f, lbe, "endpoint", "health_status", "load_balancing_weight", "metadata"); err != nil {
				return err
			}
			if err := onlyFields(f+".endpoint", lbe.GetEndpoint(), "address", "health_check_config", "hostname"); err != nil {
				return err
			}
			if err := onlyFields(f+".endpoint.health_check_config", lbe.GetEndpoint().GetHealthCheckConfig(), "port_value"); err != nil {
				return err
			}
			if err := checkEndpointAddress(f+".endpoint.address", lbe.GetEndpoint().GetAddress()); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkEndpointAddress refuses the Address fields an endpoint's dial
// (bootstrap.EndpointAddress) does not read: a named port, a resolver, an
// IPv4-compat or network-namespace socket, a pipe's mode.
func checkEndpointAddress(field string, a *corev3.Address) error {
	if err := onlyFields(field, a, "socket_address", "pipe"); err != nil {
		return err
	}
	if err := onlyFields(field+".socket_address", a.GetSocketAddress(), "protocol", "address", "port_value"); err != nil {
		return err
	}
	return onlyFields(field+".pipe", a.GetPipe(), "path")
}

// checkEDSConfig refuses the eds_cluster_config fields strait does not
// read: its config source is ADS, with an initial_fetch_timeout
// (xdsclient.InitialFetchTimeout) and the v3 API.
func checkEDSConfig(e *clusterv3.Cluster_EdsClusterConfig) error {
	if err := onlyFields("eds_cluster_config", e, "eds_config", "service_name"); err != nil {
		return err
	}
	cs := e.GetEdsConfig()
	if err := onlyFields("eds_cluster_config.eds_config", cs, "ads", "initial_fetch_timeout", "resource_api_version"); err != nil {
		return err
	}
	if err := onlyFields("eds_cluster_config.eds_config.ads", cs.GetAds()); err != nil {
		return err
	}
	if v := cs.GetResourceApiVersion(); v != corev3.ApiVersion_AUTO && v != corev3.ApiVersion_V3 {
		return fmt.Errorf("eds_cluster_config.eds_config.resource_api_version %s is not supported (V3 only)", v)
	}
	return nil
}
