package cluster

import (
	"errors"
	"fmt"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/straitmesh/strait/internal/proxy/fieldaudit"
)

// This file is the Cluster's field audit, with the EDS load assignment's
// and the endpoint address's: every Cluster field is honoured (clusterHonoured
// names the code that reads it) or refused by name (clusterRefused says
// why, and the fix), and the sub-messages the builders read have
// allow-lists; a field outside them, or a newer API's unknown field, is
// refused so that a control plane never believes it configured something
// strait ignores. TestClusterFieldsClassified fails on a Cluster field in neither list.

// clusterHonoured maps each honoured Cluster field to the code that reads
// it.
var clusterHonoured = map[protoreflect.Name]string{
	"name":                              "build: Cluster.Name",
	"alt_stat_name":                     "statName: the name the cluster's stats carry",
	"type":                              "build: STATIC, EDS, ORIGINAL_DST, STRICT_DNS, LOGICAL_DNS",
	"eds_cluster_config":                "build, with checkEDSConfig",
	"connect_timeout":                   "build: the dialer's timeout",
	"per_connection_buffer_limit_bytes": "at least minBufferLimit, the buffers strait's codecs use (checkClusterFields)",
	"lb_policy":                         "configureTraffic: lb.Parse",
	"load_assignment":                   "build: endpointsFrom, with checkAssignment",
	"health_checks":                     "parseHealthChecks (healthcheck.go)",
	"circuit_breakers":                  "parseBreakers (breaker.go)",
	"common_http_protocol_options":      "h1Pool.configure (httpoptions.go)",
	"http2_protocol_options":            "ParseHTTP2Options (httpoptions.go)",
	"typed_extension_protocol_options":  "httpProtocol (httpoptions.go): envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
	"protocol_selection":                "httpProtocol (httpoptions.go)",
	"outlier_detection":                 "parseOutlier (outlier.go)",
	"upstream_bind_config":              "build: the dialer's source address (upstreamBindFields)",
	"filters":                           "parseUpstreamFilters (filters.go): istio.metadata_exchange only",
	"ring_hash_lb_config":               "configureTraffic: lb.Parse",
	"maglev_lb_config":                  "configureTraffic: lb.Parse",
	"least_request_lb_config":           "configureTraffic: lb.Parse",
	"round_robin_lb_config":             "configureTraffic: lb.Parse",
	"original_dst_lb_config":            "checkOriginalDst (fields.go)",
	"common_lb_config":                  "pick.go",
	"transport_socket":                  "transport.go: tlsconf refuses what it does not implement",
	"transport_socket_matches":          "transport.go: tlsconf refuses what it does not implement",
	"metadata":                          "descriptive only: filter metadata for other consumers (Istio's istio.services)",
	"wait_for_warm_on_init":             "true only: clusters always warm (checkClusterFields)",
	"upstream_connection_options":       "pick.go",
	// The DNS fields: honoured on STRICT_DNS and LOGICAL_DNS clusters
	// (newDNSDiscovery), refused on the others (checkClusterFields).
	"dns_refresh_rate":          "dns.go",
	"dns_jitter":                "dns.go",
	"dns_failure_refresh_rate":  "dns.go",
	"respect_dns_ttl":           "dns.go",
	"dns_lookup_family":         "dns.go",
	"dns_resolvers":             "dns.go",
	"use_tcp_for_dns_lookups":   "dns.go",
	"dns_resolution_config":     "dns.go",
	"typed_dns_resolver_config": "dns.go",
}

// dnsFields are the Cluster fields only a DNS cluster honours.
var dnsFields = []protoreflect.Name{
	"dns_refresh_rate", "dns_jitter", "dns_failure_refresh_rate", "respect_dns_ttl", "dns_lookup_family",
	"dns_resolvers", "use_tcp_for_dns_lookups", "dns_resolution_config", "typed_dns_resolver_config",
}

// clusterRefused maps each refused Cluster field to why, and the fix.
var clusterRefused = map[protoreflect.Name]string{
	"cluster_type":             "custom cluster types are not implemented; use type",
	"transport_socket_matcher": "use transport_socket_matches",
	"stats_matcher":            "every cluster stat is kept; remove it",
	"per_connection_buffer_high_watermark_timeout": "connections are read and written in fixed buffers; remove it",
	"max_requests_per_connection":                  "deprecated; use common_http_protocol_options.max_requests_per_connection",
	"upstream_http_protocol_options":               "deprecated; use typed_extension_protocol_options",
	"http_protocol_options":                        "deprecated; use typed_extension_protocol_options",
	"cleanup_interval":                             "original destination hosts are not cleaned up on a timer; remove it",
	"lb_subset_config":                             "subset load balancing is not implemented; use a cluster per subset",
	"close_connections_on_host_health_failure":     "a host that fails its health check keeps its open connections; remove it",
	"ignore_health_on_host_removal":                "a removed host goes at once, whatever its health; remove it",
	"load_balancing_policy":                        "use lb_policy",
	"lrs_server":                                   "load is not reported (LRS); remove it",
	"lrs_report_endpoint_metrics":                  "load is not reported (LRS); remove it",
	"track_timeout_budgets":                        "timeout budgets are not tracked; remove it",
	"upstream_config":                              "the upstream connection pool is strait's own; remove it",
	"track_cluster_stats":                          "no optional cluster stats are kept; remove it",
	"preconnect_policy":                            "connections are opened on demand; remove it",
	"connection_pool_per_downstream_connection":    "connections are pooled per cluster; remove it",
	"queuing_policies":                             "requests are not queued by policy; remove it",
}

// maxPriority bounds the priority levels of a load assignment (Istio uses
// at most a handful; Envoy has no bound, but each level costs a slot).
const maxPriority = 127

// minBufferLimit is the smallest per_connection_buffer_limit_bytes strait
// honours: its upstream codecs read and write in 16 KiB buffers.
const minBufferLimit = 16 << 10

// checkClusterFields refuses the Cluster fields strait does not implement,
// and the honoured ones at values it does not, naming the first one.
func checkClusterFields(c *clusterv3.Cluster) error {
	if err := fieldaudit.Check("", c.ProtoReflect(), clusterHonoured, clusterRefused); err != nil {
		return err
	}
	if t := c.GetType(); t != clusterv3.Cluster_STRICT_DNS && t != clusterv3.Cluster_LOGICAL_DNS {
		fields := c.ProtoReflect().Descriptor().Fields()
		for _, n := range dnsFields {
			if c.ProtoReflect().Has(fields.ByName(n)) {
				return fmt.Errorf("%s is not supported by strait-proxy on a %s cluster (only STRICT_DNS and LOGICAL_DNS clusters resolve names); remove it", n, t)
			}
		}
	}
	if err := fieldaudit.Only("upstream_bind_config", c.GetUpstreamBindConfig().ProtoReflect(), upstreamBindFields); err != nil {
		return err
	}
	if err := fieldaudit.Only("upstream_bind_config.source_address", c.GetUpstreamBindConfig().GetSourceAddress().ProtoReflect(), socketAddressFields); err != nil {
		return err
	}
	if err := fieldaudit.Only("maglev_lb_config", c.GetMaglevLbConfig().ProtoReflect(), maglevFields); err != nil {
		return err
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
// (buildLevels); a locality is a label (weights, not zone-aware routing,
// decide between localities).
func checkAssignment(cla *endpointv3.ClusterLoadAssignment) error {
	if err := fieldaudit.Only("cluster_load_assignment", cla.ProtoReflect(), claFields); err != nil {
		return err
	}
	if err := fieldaudit.Only("cluster_load_assignment.policy", cla.GetPolicy().ProtoReflect(), claPolicyFields); err != nil {
		return err
	}
	for i, lle := range cla.GetEndpoints() {
		field := fmt.Sprintf("cluster_load_assignment.endpoints[%d]", i)
		if err := fieldaudit.Only(field, lle.ProtoReflect(), localityLbEndpointsFields); err != nil {
			return err
		}
		if lle.GetPriority() > maxPriority {
			return fmt.Errorf("%s.priority %d is above %d, the most priorities strait-proxy keeps", field, lle.GetPriority(), maxPriority)
		}
		for j, lbe := range lle.GetLbEndpoints() {
			f := fmt.Sprintf("%s.lb_endpoints[%d]", field, j)
			if err := fieldaudit.Only(f, lbe.ProtoReflect(), lbEndpointFields); err != nil {
				return err
			}
			if err := fieldaudit.Only(f+".endpoint", lbe.GetEndpoint().ProtoReflect(), endpointFields); err != nil {
				return err
			}
			if err := fieldaudit.Only(f+".endpoint.health_check_config", lbe.GetEndpoint().GetHealthCheckConfig().ProtoReflect(), endpointHealthCheckFields); err != nil {
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
	if err := fieldaudit.Only(field, a.ProtoReflect(), endpointAddressFields); err != nil {
		return err
	}
	if err := fieldaudit.Only(field+".socket_address", a.GetSocketAddress().ProtoReflect(), socketAddressFields); err != nil {
		return err
	}
	return fieldaudit.Only(field+".pipe", a.GetPipe().ProtoReflect(), pipeFields)
}

// checkEDSConfig refuses the eds_cluster_config fields strait does not
// read: its config source is ADS, with an initial_fetch_timeout
// (xdsclient.InitialFetchTimeout) and the v3 API.
func checkEDSConfig(e *clusterv3.Cluster_EdsClusterConfig) error {
	if err := fieldaudit.Only("eds_cluster_config", e.ProtoReflect(), edsClusterConfigFields); err != nil {
		return err
	}
	cs := e.GetEdsConfig()
	if err := fieldaudit.Only("eds_cluster_config.eds_config", cs.ProtoReflect(), edsConfigSourceFields); err != nil {
		return err
	}
	if err := fieldaudit.Only("eds_cluster_config.eds_config.ads", cs.GetAds().ProtoReflect(), noFields); err != nil {
		return err
	}
	if v := cs.GetResourceApiVersion(); v != corev3.ApiVersion_AUTO && v != corev3.ApiVersion_V3 {
		return fmt.Errorf("eds_cluster_config.eds_config.resource_api_version %s is not supported (V3 only)", v)
	}
	return nil
}

// Allow-lists of the sub-messages the builders read: a field outside one
// is refused by name (fieldaudit.Only).
var (
	claFields                 = map[protoreflect.Name]bool{"cluster_name": true, "endpoints": true, "policy": true}
	claPolicyFields           = map[protoreflect.Name]bool{"overprovisioning_factor": true}
	localityLbEndpointsFields = map[protoreflect.Name]bool{"locality": true, "lb_endpoints": true, "load_balancing_weight": true, "priority": true, "metadata": true}
	lbEndpointFields          = map[protoreflect.Name]bool{"endpoint": true, "health_status": true, "load_balancing_weight": true, "metadata": true}
	endpointFields            = map[protoreflect.Name]bool{"address": true, "health_check_config": true, "hostname": true}
	endpointHealthCheckFields = map[protoreflect.Name]bool{"port_value": true}
	endpointAddressFields     = map[protoreflect.Name]bool{"socket_address": true, "pipe": true}
	// socketAddressFields are what a dial reads of a socket address
	// (bootstrap.EndpointAddress, the upstream bind address): no named port,
	// resolver, or IPv4-compat.
	socketAddressFields    = map[protoreflect.Name]bool{"protocol": true, "address": true, "port_value": true}
	pipeFields             = map[protoreflect.Name]bool{"path": true}
	edsClusterConfigFields = map[protoreflect.Name]bool{"eds_config": true, "service_name": true}
	edsConfigSourceFields  = map[protoreflect.Name]bool{"ads": true, "initial_fetch_timeout": true, "resource_api_version": true}
	// noFields allows no field: a message strait reads as present or absent
	// (an ADS config source, a TCP health check, default HTTP/1.1 options).
	noFields              = map[protoreflect.Name]bool{}
	circuitBreakersFields = map[protoreflect.Name]bool{"thresholds": true}
	thresholdsFields      = map[protoreflect.Name]bool{"priority": true, "max_connections": true, "max_pending_requests": true, "max_requests": true, "max_retries": true, "track_remaining": true, "retry_budget": true}
	retryBudgetFields     = map[protoreflect.Name]bool{"budget_percent": true, "min_retry_concurrency": true}
	// http2OptionsFields are the Http2ProtocolOptions fields
	// ParseHTTP2Options reads.
	http2OptionsFields             = map[protoreflect.Name]bool{"max_concurrent_streams": true, "initial_stream_window_size": true, "initial_connection_window_size": true, "connection_keepalive": true}
	keepaliveFields                = map[protoreflect.Name]bool{"interval": true, "timeout": true}
	httpProtocolOptionsFields      = map[protoreflect.Name]bool{"explicit_http_config": true, "use_downstream_protocol_config": true, "common_http_protocol_options": true}
	downstreamProtocolConfigFields = map[protoreflect.Name]bool{"http_protocol_options": true, "http2_protocol_options": true}
	// healthCheckFields are the HealthCheck fields parseHealthChecks
	// implements.
	healthCheckFields     = map[protoreflect.Name]bool{"timeout": true, "interval": true, "unhealthy_threshold": true, "healthy_threshold": true, "http_health_check": true, "tcp_health_check": true, "no_traffic_interval": true, "reuse_connection": true}
	httpHealthCheckFields = map[protoreflect.Name]bool{"host": true, "path": true, "expected_statuses": true, "method": true, "codec_client_type": true}
	// outlierFields are the OutlierDetection fields strait honours. The
	// success-rate and failure-percentage detectors are accepted only when
	// disabled (enforcing 0), which is what Istio sends.
	outlierFields                   = map[protoreflect.Name]bool{"consecutive_5xx": true, "enforcing_consecutive_5xx": true, "consecutive_gateway_failure": true, "enforcing_consecutive_gateway_failure": true, "consecutive_local_origin_failure": true, "enforcing_consecutive_local_origin_failure": true, "split_external_local_origin_errors": true, "interval": true, "base_ejection_time": true, "max_ejection_time": true, "max_ejection_percent": true, "enforcing_success_rate": true, "enforcing_local_origin_success_rate": true, "enforcing_failure_percentage": true, "enforcing_failure_percentage_local_origin": true}
	commonLbConfigFields            = map[protoreflect.Name]bool{"healthy_panic_threshold": true, "locality_weighted_lb_config": true}
	upstreamConnectionOptionsFields = map[protoreflect.Name]bool{"tcp_keepalive": true}
	upstreamBindFields              = map[protoreflect.Name]bool{"source_address": true}
	maglevFields                    = map[protoreflect.Name]bool{"table_size": true}
)

// checkOriginalDst refuses the original_dst_lb_config fields an
// ORIGINAL_DST cluster here does not implement: it always dials the
// downstream connection's original destination, never one taken from a
// request header or metadata, on its own port.
func checkOriginalDst(c *clusterv3.Cluster) error {
	o := c.GetOriginalDstLbConfig()
	switch {
	case o == nil:
		return nil
	case o.GetUseHttpHeader():
		return errors.New("original_dst_lb_config.use_http_header is not supported (the original destination is the connection's)")
	case o.GetHttpHeaderName() != "":
		return errors.New("original_dst_lb_config.http_header_name is not supported (the original destination is the connection's)")
	case o.GetUpstreamPortOverride() != nil:
		return errors.New("original_dst_lb_config.upstream_port_override is not supported yet (remove it)")
	case o.GetMetadataKey() != nil:
		return errors.New("original_dst_lb_config.metadata_key is not supported (the original destination is the connection's)")
	}
	return nil
}
