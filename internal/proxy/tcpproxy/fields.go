package tcpproxy

import (
	"fmt"

	tcpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
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
	var err error
	tp.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		n := fd.Name()
		if _, ok := tcpProxyHonoured[n]; ok {
			return true
		}
		if why, ok := tcpProxyRefused[n]; ok {
			err = fmt.Errorf("tcp_proxy.%s is not supported by strait-proxy: %s", n, why)
		} else {
			err = fmt.Errorf("tcp_proxy.%s is not supported by strait-proxy (a field it does not know; remove it)", n)
		}
		return false
	})
	if err == nil && len(tp.ProtoReflect().GetUnknown()) > 0 {
		err = fmt.Errorf("tcp_proxy has fields strait-proxy does not know (a newer API's); remove them")
	}
	if err != nil {
		return err
	}
	if wc := tp.GetWeightedClusters(); wc != nil {
		return onlyFields("tcp_proxy.weighted_clusters", wc.ProtoReflect(), weightedClusterFields, "remove it")
	}
	return nil
}

// onlyFields refuses the first field set in m that is not in allowed,
// naming it as prefix.field, with fix.
func onlyFields(prefix string, m protoreflect.Message, allowed map[protoreflect.Name]bool, fix string) error {
	var bad protoreflect.Name
	m.Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		if !allowed[fd.Name()] {
			bad = fd.Name()
			return false
		}
		return true
	})
	if bad != "" {
		return fmt.Errorf("%s.%s is not supported by strait-proxy (%s)", prefix, bad, fix)
	}
	return nil
}
