package cluster

import (
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/proxy/stats"
)

// Each traffic-policy setting strait can't honour is refused with an
// error that names it; each one it honours is accepted.
func TestTrafficPolicyConfigErrors(t *testing.T) {
	od := func(edit func(*clusterv3.OutlierDetection)) func(*clusterv3.Cluster) {
		return func(c *clusterv3.Cluster) {
			o := &clusterv3.OutlierDetection{EnforcingSuccessRate: wrapperspb.UInt32(0)}
			edit(o)
			c.OutlierDetection = o
		}
	}
	hc := func(edit func(*corev3.HealthCheck)) func(*clusterv3.Cluster) {
		return func(c *clusterv3.Cluster) {
			h := &corev3.HealthCheck{Timeout: durationpb.New(time.Second), Interval: durationpb.New(time.Second),
				HealthChecker: &corev3.HealthCheck_HttpHealthCheck_{HttpHealthCheck: &corev3.HealthCheck_HttpHealthCheck{Path: "/"}}}
			edit(h)
			c.HealthChecks = []*corev3.HealthCheck{h}
		}
	}
	slow := func(ss *clusterv3.Cluster_SlowStartConfig) func(*clusterv3.Cluster) {
		return func(c *clusterv3.Cluster) {
			c.LbConfig = &clusterv3.Cluster_RoundRobinLbConfig_{RoundRobinLbConfig: &clusterv3.Cluster_RoundRobinLbConfig{SlowStartConfig: ss}}
		}
	}
	cases := []struct {
		name, want string // want: "" means accepted
		edit       func(*clusterv3.Cluster)
	}{
		{"ring sizes reversed", "minimum_ring_size 10 is above maximum_ring_size 5", func(c *clusterv3.Cluster) {
			c.LbPolicy = clusterv3.Cluster_RING_HASH
			c.LbConfig = &clusterv3.Cluster_RingHashLbConfig_{RingHashLbConfig: &clusterv3.Cluster_RingHashLbConfig{
				MinimumRingSize: wrapperspb.UInt64(10), MaximumRingSize: wrapperspb.UInt64(5)}}
		}},
		{"ring sizes equal", "", func(c *clusterv3.Cluster) {
			c.LbPolicy = clusterv3.Cluster_RING_HASH
			c.LbConfig = &clusterv3.Cluster_RingHashLbConfig_{RingHashLbConfig: &clusterv3.Cluster_RingHashLbConfig{
				MinimumRingSize: wrapperspb.UInt64(5), MaximumRingSize: wrapperspb.UInt64(5)}}
		}},
		{"murmur", "hash_function MURMUR_HASH_2", func(c *clusterv3.Cluster) {
			c.LbPolicy = clusterv3.Cluster_RING_HASH
			c.LbConfig = &clusterv3.Cluster_RingHashLbConfig_{RingHashLbConfig: &clusterv3.Cluster_RingHashLbConfig{
				HashFunction: clusterv3.Cluster_RingHashLbConfig_MURMUR_HASH_2}}
		}},
		{"ring config on round robin", "ring_hash_lb_config does not apply to lb_policy ROUND_ROBIN", func(c *clusterv3.Cluster) {
			c.LbConfig = &clusterv3.Cluster_RingHashLbConfig_{RingHashLbConfig: &clusterv3.Cluster_RingHashLbConfig{}}
		}},
		{"maglev config on ring hash", "maglev_lb_config does not apply", func(c *clusterv3.Cluster) {
			c.LbPolicy = clusterv3.Cluster_RING_HASH
			c.LbConfig = &clusterv3.Cluster_MaglevLbConfig_{MaglevLbConfig: &clusterv3.Cluster_MaglevLbConfig{}}
		}},
		{"maglev prime", "", func(c *clusterv3.Cluster) {
			c.LbPolicy = clusterv3.Cluster_MAGLEV
			c.LbConfig = &clusterv3.Cluster_MaglevLbConfig_{MaglevLbConfig: &clusterv3.Cluster_MaglevLbConfig{TableSize: wrapperspb.UInt64(7)}}
		}},
		{"maglev too big", "table_size 5000011", func(c *clusterv3.Cluster) {
			c.LbPolicy = clusterv3.Cluster_MAGLEV
			c.LbConfig = &clusterv3.Cluster_MaglevLbConfig_{MaglevLbConfig: &clusterv3.Cluster_MaglevLbConfig{TableSize: wrapperspb.UInt64(5000011)}}
		}},
		{"least request config on random", "least_request_lb_config does not apply", func(c *clusterv3.Cluster) {
			c.LbPolicy = clusterv3.Cluster_RANDOM
			c.LbConfig = &clusterv3.Cluster_LeastRequestLbConfig_{LeastRequestLbConfig: &clusterv3.Cluster_LeastRequestLbConfig{}}
		}},
		{"least request active bias", "active_request_bias", func(c *clusterv3.Cluster) {
			c.LbPolicy = clusterv3.Cluster_LEAST_REQUEST
			c.LbConfig = &clusterv3.Cluster_LeastRequestLbConfig_{LeastRequestLbConfig: &clusterv3.Cluster_LeastRequestLbConfig{
				ActiveRequestBias: &corev3.RuntimeDouble{DefaultValue: 2}}}
		}},
		{"round robin config on least request", "round_robin_lb_config does not apply", func(c *clusterv3.Cluster) {
			c.LbPolicy = clusterv3.Cluster_LEAST_REQUEST
			c.LbConfig = &clusterv3.Cluster_RoundRobinLbConfig_{RoundRobinLbConfig: &clusterv3.Cluster_RoundRobinLbConfig{}}
		}},
		{"slow start without window", "slow_start_window must be a positive duration", slow(&clusterv3.Cluster_SlowStartConfig{})},
		{"slow start aggression 0", "aggression 0 must be above 0", slow(&clusterv3.Cluster_SlowStartConfig{
			SlowStartWindow: durationpb.New(time.Second), Aggression: &corev3.RuntimeDouble{}})},
		{"slow start min weight 101", "min_weight_percent 101", slow(&clusterv3.Cluster_SlowStartConfig{
			SlowStartWindow: durationpb.New(time.Second), MinWeightPercent: &typev3.Percent{Value: 101}})},
		{"slow start ok", "", slow(&clusterv3.Cluster_SlowStartConfig{
			SlowStartWindow: durationpb.New(time.Second), Aggression: &corev3.RuntimeDouble{DefaultValue: 1.5}, MinWeightPercent: &typev3.Percent{Value: 100}})},
		{"two default thresholds", "a second DEFAULT threshold", func(c *clusterv3.Cluster) {
			c.CircuitBreakers = &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{}, {}}}
		}},
		{"retry budget interval", "retry_budget.budget_interval", func(c *clusterv3.Cluster) {
			c.CircuitBreakers = &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{RetryBudget: &clusterv3.CircuitBreakers_Thresholds_RetryBudget{BudgetInterval: durationpb.New(time.Second)}}}}
		}},
		{"per host thresholds", "per_host_thresholds", func(c *clusterv3.Cluster) {
			c.CircuitBreakers = &clusterv3.CircuitBreakers{PerHostThresholds: []*clusterv3.CircuitBreakers_Thresholds{{}}}
		}},
		{"success rate on", "enforcing_success_rate must be 0", func(c *clusterv3.Cluster) {
			c.OutlierDetection = &clusterv3.OutlierDetection{EnforcingSuccessRate: wrapperspb.UInt32(1)}
		}},
		{"local success rate when split", "enforcing_local_origin_success_rate must be 0", od(func(o *clusterv3.OutlierDetection) {
			o.SplitExternalLocalOriginErrors = true
		})},
		{"local success rate without split", "", od(func(o *clusterv3.OutlierDetection) {})},
		{"failure percentage", "enforcing_failure_percentage must be 0", od(func(o *clusterv3.OutlierDetection) {
			o.EnforcingFailurePercentage = wrapperspb.UInt32(5)
		})},
		{"failure percentage local", "enforcing_failure_percentage_local_origin must be 0", od(func(o *clusterv3.OutlierDetection) {
			o.EnforcingFailurePercentageLocalOrigin = wrapperspb.UInt32(5)
		})},
		{"interval 0", "interval must be a positive duration", od(func(o *clusterv3.OutlierDetection) { o.Interval = durationpb.New(0) })},
		{"base ejection 0", "base_ejection_time must be a positive duration", od(func(o *clusterv3.OutlierDetection) { o.BaseEjectionTime = durationpb.New(0) })},
		{"max ejection time 0", "max_ejection_time must be a positive duration", od(func(o *clusterv3.OutlierDetection) { o.MaxEjectionTime = durationpb.New(0) })},
		{"max ejection 101", "max_ejection_percent 101 is above 100", od(func(o *clusterv3.OutlierDetection) { o.MaxEjectionPercent = wrapperspb.UInt32(101) })},
		{"enforcing 100", "", od(func(o *clusterv3.OutlierDetection) { o.EnforcingConsecutive_5Xx = wrapperspb.UInt32(100) })},
		{"enforcing 101", "enforcing_consecutive_5xx 101", od(func(o *clusterv3.OutlierDetection) { o.EnforcingConsecutive_5Xx = wrapperspb.UInt32(101) })},
		{"outlier unknown field", "success_rate_minimum_hosts", od(func(o *clusterv3.OutlierDetection) { o.SuccessRateMinimumHosts = wrapperspb.UInt32(1) })},
		{"panic 101", "healthy_panic_threshold 101", func(c *clusterv3.Cluster) {
			c.CommonLbConfig = &clusterv3.Cluster_CommonLbConfig{HealthyPanicThreshold: &typev3.Percent{Value: 101}}
		}},
		{"panic 100", "", func(c *clusterv3.Cluster) {
			c.CommonLbConfig = &clusterv3.Cluster_CommonLbConfig{HealthyPanicThreshold: &typev3.Percent{Value: 100}}
		}},
		{"keepalive", "", func(c *clusterv3.Cluster) {
			c.UpstreamConnectionOptions = &clusterv3.UpstreamConnectionOptions{TcpKeepalive: &corev3.TcpKeepalive{
				KeepaliveTime: wrapperspb.UInt32(60), KeepaliveInterval: wrapperspb.UInt32(10), KeepaliveProbes: wrapperspb.UInt32(3)}}
		}},
		{"happy eyeballs", "happy_eyeballs_config", func(c *clusterv3.Cluster) {
			c.UpstreamConnectionOptions = &clusterv3.UpstreamConnectionOptions{HappyEyeballsConfig: &clusterv3.UpstreamConnectionOptions_HappyEyeballsConfig{}}
		}},
		{"two health checks", "only one health check", func(c *clusterv3.Cluster) {
			c.HealthChecks = []*corev3.HealthCheck{{}, {}}
		}},
		{"health check no timeout", "timeout must be a positive duration", hc(func(h *corev3.HealthCheck) { h.Timeout = nil })},
		{"health check no interval", "interval must be a positive duration", hc(func(h *corev3.HealthCheck) { h.Interval = nil })},
		{"health check no traffic 0", "no_traffic_interval must be a positive duration", hc(func(h *corev3.HealthCheck) { h.NoTrafficInterval = durationpb.New(0) })},
		{"health check jitter", "interval_jitter", hc(func(h *corev3.HealthCheck) { h.IntervalJitter = durationpb.New(time.Second) })},
		{"health check grpc", "grpc_health_check is not supported", hc(func(h *corev3.HealthCheck) {
			h.HealthChecker = &corev3.HealthCheck_GrpcHealthCheck_{GrpcHealthCheck: &corev3.HealthCheck_GrpcHealthCheck{}}
		})},
		{"health check without checker", "only http_health_check and tcp_health_check", hc(func(h *corev3.HealthCheck) { h.HealthChecker = nil })},
		{"health check tcp payload", "send", hc(func(h *corev3.HealthCheck) {
			h.HealthChecker = &corev3.HealthCheck_TcpHealthCheck_{TcpHealthCheck: &corev3.HealthCheck_TcpHealthCheck{Send: &corev3.HealthCheck_Payload{}}}
		})},
		{"health check http2", "codec_client_type HTTP2", hc(func(h *corev3.HealthCheck) {
			h.GetHttpHealthCheck().CodecClientType = typev3.CodecClientType_HTTP2
		})},
		{"health check connect", "method CONNECT", hc(func(h *corev3.HealthCheck) { h.GetHttpHealthCheck().Method = corev3.RequestMethod_CONNECT })},
		{"health check head", "", hc(func(h *corev3.HealthCheck) { h.GetHttpHealthCheck().Method = corev3.RequestMethod_HEAD })},
		{"health check status range", "expected_statuses[0] [300, 200)", hc(func(h *corev3.HealthCheck) {
			h.GetHttpHealthCheck().ExpectedStatuses = []*typev3.Int64Range{{Start: 300, End: 200}}
		})},
		{"health check status 600", "expected_statuses[0] [200, 601)", hc(func(h *corev3.HealthCheck) {
			h.GetHttpHealthCheck().ExpectedStatuses = []*typev3.Int64Range{{Start: 200, End: 601}}
		})},
		{"health check status 99", "expected_statuses[0] [99, 200)", hc(func(h *corev3.HealthCheck) {
			h.GetHttpHealthCheck().ExpectedStatuses = []*typev3.Int64Range{{Start: 99, End: 200}}
		})},
		{"health check status full range", "", hc(func(h *corev3.HealthCheck) {
			h.GetHttpHealthCheck().ExpectedStatuses = []*typev3.Int64Range{{Start: 100, End: 600}}
		})},
		{"buffer limit small", "per_connection_buffer_limit_bytes 1024", func(c *clusterv3.Cluster) { c.PerConnectionBufferLimitBytes = wrapperspb.UInt32(1024) }},
		{"buffer limit 16k", "", func(c *clusterv3.Cluster) { c.PerConnectionBufferLimitBytes = wrapperspb.UInt32(16 << 10) }},
		{"no warming", "wait_for_warm_on_init false", func(c *clusterv3.Cluster) { c.WaitForWarmOnInit = wrapperspb.Bool(false) }},
		{"priority 1", "", func(c *clusterv3.Cluster) { c.LoadAssignment.Endpoints[0].Priority = 1 }},
		{"priority too high", "priority 128 is above 127", func(c *clusterv3.Cluster) { c.LoadAssignment.Endpoints[0].Priority = 128 }},
		{"overprovisioning 0", "overprovisioning_factor 0", func(c *clusterv3.Cluster) {
			c.LoadAssignment.Policy = &endpointv3.ClusterLoadAssignment_Policy{OverprovisioningFactor: wrapperspb.UInt32(0)}
		}},
		{"locality weights with ring hash", "locality_weighted_lb_config is not supported with lb_policy RING_HASH", func(c *clusterv3.Cluster) {
			c.LbPolicy = clusterv3.Cluster_RING_HASH
			c.CommonLbConfig = &clusterv3.Cluster_CommonLbConfig{LocalityConfigSpecifier: &clusterv3.Cluster_CommonLbConfig_LocalityWeightedLbConfig_{}}
		}},
		{"zone aware", "zone_aware_lb_config", func(c *clusterv3.Cluster) {
			c.CommonLbConfig = &clusterv3.Cluster_CommonLbConfig{LocalityConfigSpecifier: &clusterv3.Cluster_CommonLbConfig_ZoneAwareLbConfig_{}}
		}},
		{"endpoint hostname", "", func(c *clusterv3.Cluster) { c.LoadAssignment.Endpoints[0].LbEndpoints[0].GetEndpoint().Hostname = "h" }},
		{"endpoint additional addresses", "additional_addresses", func(c *clusterv3.Cluster) {
			c.LoadAssignment.Endpoints[0].LbEndpoints[0].GetEndpoint().AdditionalAddresses = []*endpointv3.Endpoint_AdditionalAddress{{}}
		}},
		{"assignment drop overload", "drop_overloads", func(c *clusterv3.Cluster) {
			c.LoadAssignment.Policy = &endpointv3.ClusterLoadAssignment_Policy{DropOverloads: []*endpointv3.ClusterLoadAssignment_Policy_DropOverload{{}}}
		}},
		{"named endpoints", "named_endpoints", func(c *clusterv3.Cluster) {
			c.LoadAssignment.NamedEndpoints = map[string]*endpointv3.Endpoint{"a": {}}
		}},
	}
	for _, tc := range cases {
		cfg := &clusterv3.Cluster{Name: "c", ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
			LoadAssignment: assignment("c", 1)}
		tc.edit(cfg)
		c, err := build(cfg, stats.New(), nil)
		if c != nil {
			c.close()
		}
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}
