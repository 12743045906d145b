package tcpproxy

import (
	"fmt"

	tcpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"github.com/straitmesh/strait/internal/proxy/fieldaudit"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// This file is the TcpProxy field audit: every field is honoured (Build
// reads it, or the listener does) or refused by name with the fix, so
// that a listener is NACKed rather than served without what it asks. A
// field a newer API adds is refused as unknown until fields_test.go, which
// fails on it, gets it classified.

// tcpProxyHonoured maps each honoured field to the code that reads it.
var tcpProxyHonoured = map[protoreflect.Name]string{
	"stat_prefix":                        "Filter.StatPrefix (the tcp.<stat_prefix>.* counters)",
	"cluster":                            "Build",
	"weighted_clusters":                  "Build (clusterWeightFields)",
	"idle_timeout":                       "Build: Filter.IdleTimeout",
	"access_log":                         "the listener, with accesslog.Build",
	"max_connect_attempts":               "Build: Filter.MaxConnectAttempts",
	"max_downstream_connection_duration": "Build: Filter.MaxDuration",
}

// tcpProxyRefused maps each refused field to why, and the fix.
var tcpProxyRefused = map[protoreflect.Name]string{
	"on_demand":               "clusters are not discovered on demand; remove it",
	"metadata_match":          "endpoints are not picked by metadata; use a subset cluster",
	"downstream_idle_timeout": "use idle_timeout, which counts both directions",
	"upstream_idle_timeout":   "use idle_timeout, which counts both directions",
	"backoff_options":         "connect attempts follow one another without back-off; remove it",
	"hash_policy":             "the upstream endpoint is picked by the cluster's load balancer without a hash; remove it",
	"tunneling_config":        "TCP is not tunneled over HTTP; remove it",
	"max_downstream_connection_duration_jitter_percentage": "max_downstream_connection_duration applies as given; remove it",
	"access_log_flush_interval":                            "a record is written when the connection closes; remove it",
	"flush_access_log_on_connected":                        "a record is written when the connection closes; remove it",
	"access_log_options":                                   "a record is written when the connection closes; remove it",
	"proxy_protocol_tlvs":                                  "PROXY protocol headers carry no TLVs; remove it",
	"proxy_protocol_tlv_merge_policy":                      "PROXY protocol headers carry no TLVs; remove it",
	"upstream_connect_mode":                                "the upstream is connected at once (IMMEDIATE); remove it",
	"max_early_data_bytes":                                 "no downstream data is read before the upstream connects; remove it",
	"check_drain_close":                                    "a connection closes when the drain time ends; remove it",
}

// clusterWeightFields and weightedClusterFields are what Build reads of
// weighted_clusters.
var (
	weightedClusterFields = map[protoreflect.Name]bool{"clusters": true}
	clusterWeightFields   = map[protoreflect.Name]bool{"name": true, "weight": true}
)

// checkFields refuses the first TcpProxy field strait-proxy does not
// implement, naming it.
func checkFields(tp *tcpv3.TcpProxy) error {
	if err := fieldaudit.Check("tcp_proxy", tp.ProtoReflect(), tcpProxyHonoured, tcpProxyRefused); err != nil {
		return err
	}
	if wc := tp.GetWeightedClusters(); wc != nil {
		if err := fieldaudit.Only("tcp_proxy.weighted_clusters", wc.ProtoReflect(), weightedClusterFields); err != nil {
			return fmt.Errorf("%w (remove it)", err)
		}
	}
	return nil
}
