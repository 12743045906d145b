package listener

import (
	"fmt"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"github.com/straitmesh/strait/internal/proxy/fieldaudit"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// This file is the Listener's field audit: every field of the Listener,
// its filter chains and their match, and its listener filters is honoured
// (Build reads it) or refused by name with the fix, so that a listener is
// NACKed rather than served without what it asks. A field a newer API
// adds is refused as unknown until TestListenerFieldsClassified, which fails on it, gets
// it classified.

// listenerHonoured maps each honoured Listener field to the code that
// reads it, or why it changes nothing strait-proxy serves.
var listenerHonoured = map[protoreflect.Name]string{
	"name":                                 "Build: Listener.Name",
	"address":                              "Build: Listener.Addr",
	"additional_addresses":                 "Build: only with bind_to_port false (a listener that binds has one address)",
	"stat_prefix":                          "the listener's stats carry its address, as Envoy's do without one",
	"filter_chains":                        "buildChain (filterchain.go)",
	"default_filter_chain":                 "buildChain (filterchain.go)",
	"use_original_dst":                     "Build: Listener.UseOriginalDst",
	"metadata":                             "descriptive only: nothing in strait-proxy reads it",
	"drain_type":                           "the listener drains on every drain (DEFAULT and MODIFY_ONLY alike)",
	"listener_filters":                     "Build: original_src, original_dst, tls_inspector, and the passive ones",
	"listener_filters_timeout":             "Build: Listener.FiltersTimeout",
	"continue_on_listener_filters_timeout": "Build: Listener.ContinueOnTimeout",
	"transparent":                          "Build: Listener.Transparent (IP_TRANSPARENT)",
	"traffic_direction":                    "descriptive only: the stats and logs carry the address",
	"bind_to_port":                         "Build: Listener.Bind",
	"reuse_port":                           "one socket per listener, shared by the accept goroutines",
	"enable_reuse_port":                    "one socket per listener, shared by the accept goroutines",
	"ignore_global_conn_limit":             "there is no global connection limit to be exempt from",
	"bypass_overload_manager":              "there is no overload manager to be exempt from",
	"max_connections_to_accept_per_socket_event": "an accept batching knob with no effect on what is served",
}

// listenerRefused maps each refused Listener field to why, and the fix.
var listenerRefused = map[protoreflect.Name]string{
	// Filter chain discovery and the matcher API would change which chain
	// serves a connection and which chains an update drains (adoptChains).
	"filter_chain_matcher":                         "use filter_chains[].filter_chain_match",
	"fcds_config":                                  "list the filter chains in filter_chains",
	"stats_matcher":                                "every listener stat is kept; remove it",
	"per_connection_buffer_limit_bytes":            "connections are read and written in fixed buffers; remove it",
	"per_connection_buffer_high_watermark_timeout": "connections are read and written in fixed buffers; remove it",
	"deprecated_v1":                                "the v1 API is not served; remove it",
	"freebind":                                     "the listener binds only addresses the host has; remove it",
	"socket_options":                               "no socket option is set from config; remove it",
	"tcp_fast_open_queue_length":                   "TCP Fast Open is not enabled; remove it",
	"udp_listener_config":                          "UDP is not served; remove it",
	"api_listener":                                 "an API listener is for proxyless clients, not strait-proxy; remove it",
	"connection_balance_config":                    "the accept goroutines share one socket; remove it",
	"access_log":                                   "log through the network filter's access_log (tcp_proxy, http_connection_manager)",
	"tcp_backlog_size":                             "the listen backlog is the kernel's default; remove it",
	"internal_listener":                            "internal listeners are not served; remove it",
	"enable_mptcp":                                 "MPTCP is not enabled; remove it",
	"tcp_keepalive":                                "accepted connections keep Go's default keep-alive; remove it",
}

// filterChainHonoured maps each honoured FilterChain field to the code that
// reads it.
var filterChainHonoured = map[protoreflect.Name]string{
	"filter_chain_match":               "buildChain, with filterChainMatchHonoured",
	"filters":                          "buildFilters (listener.go)",
	"transport_socket":                 "buildChainTLS (tls.go) with tlsconf.NewServer",
	"transport_socket_connect_timeout": "buildChainTLS (tls.go): the TLS handshake's bound",
	"name":                             "buildChain: the chain's name (in-place updates, logs)",
	"metadata":                         "descriptive only: nothing in strait-proxy reads it",
}

// filterChainRefused maps each refused FilterChain field to why, and the
// fix.
var filterChainRefused = map[protoreflect.Name]string{
	"use_proxy_proto": "no PROXY protocol header is read from downstream; remove it",
}

// filterChainMatchHonoured maps each honoured FilterChainMatch field to the
// level of match (buildChain) that reads it.
var filterChainMatchHonoured = map[protoreflect.Name]string{
	"destination_port":      "match: the destination port level",
	"prefix_ranges":         "match: the destination IP level",
	"server_names":          "match: the server name level",
	"transport_protocol":    "match: the transport protocol level (raw_buffer or tls)",
	"application_protocols": "match: the application protocols level",
	"source_prefix_ranges":  "match: the source IP level",
}

// filterChainMatchRefused maps each refused FilterChainMatch field to why,
// and the fix.
var filterChainMatchRefused = map[protoreflect.Name]string{
	"direct_source_prefix_ranges": "the peer address is the source; use source_prefix_ranges",
	"source_type":                 "chains are not matched by local or external source; use source_prefix_ranges",
	"source_ports":                "chains are not matched by source port; remove it",
	"address_suffix":              "chains are not matched by address suffix; use prefix_ranges",
	"suffix_len":                  "chains are not matched by address suffix; use prefix_ranges",
}

// networkFilterHonoured and networkFilterRefused classify the Filter
// fields of a chain; each filter's typed_config has its own audit.
var (
	networkFilterHonoured = map[protoreflect.Name]string{
		"name":         "buildFilters: which network filter",
		"typed_config": "tcpproxy.Build, hcm.Build, rbac.ParseNetwork",
	}
	networkFilterRefused = map[protoreflect.Name]string{
		"config_discovery": "network filters are not discovered over ECDS; give typed_config",
	}
)

// listenerFilterHonoured and listenerFilterRefused classify the
// ListenerFilter fields; each filter's typed_config has its own audit.
var (
	listenerFilterHonoured = map[protoreflect.Name]string{
		"name":         "Build: which listener filter",
		"typed_config": "buildOriginalSrc, buildTLSInspector",
	}
	listenerFilterRefused = map[protoreflect.Name]string{
		"config_discovery": "listener filters are not discovered over ECDS; give typed_config",
		"filter_disabled":  "a listener filter runs on every connection; remove it",
	}
)

// checkListenerFields refuses the first Listener field Build does not
// honour, naming it, and the same in each filter chain's and listener
// filter's fields.
func checkListenerFields(l *listenerv3.Listener) error {
	if err := fieldaudit.Check("", l.ProtoReflect(), listenerHonoured, listenerRefused); err != nil {
		return err
	}
	for i, lf := range l.GetListenerFilters() {
		if err := fieldaudit.Check(fmt.Sprintf("listener_filters[%d]", i), lf.ProtoReflect(), listenerFilterHonoured, listenerFilterRefused); err != nil {
			return err
		}
	}
	return nil
}

// checkFilterChainFields refuses the first field of fc, of its
// filter_chain_match or of its filters that buildChain does not honour,
// naming it under path (filter_chains[i] or default_filter_chain).
func checkFilterChainFields(path string, fc *listenerv3.FilterChain) error {
	if err := fieldaudit.Check(path, fc.ProtoReflect(), filterChainHonoured, filterChainRefused); err != nil {
		return err
	}
	if m := fc.GetFilterChainMatch(); m != nil {
		if err := fieldaudit.Check(path+".filter_chain_match", m.ProtoReflect(), filterChainMatchHonoured, filterChainMatchRefused); err != nil {
			return err
		}
	}
	for i, f := range fc.GetFilters() {
		if err := fieldaudit.Check(fmt.Sprintf("%s.filters[%d]", path, i), f.ProtoReflect(), networkFilterHonoured, networkFilterRefused); err != nil {
			return err
		}
	}
	return nil
}

// tlsInspectorHonoured and tlsInspectorRefused classify the TlsInspector
// fields: the fingerprints are honoured unset or false, and
// max_client_hello_size at its default; buildTLSInspector refuses the
// other values.
var (
	tlsInspectorHonoured = map[protoreflect.Name]string{
		"enable_ja3_fingerprinting": "false only: no JA3 fingerprint is computed",
		"enable_ja4_fingerprinting": "false only: no JA4 fingerprint is computed",
		"initial_read_buffer_size":  "only tunes how Envoy reads; the inspector reads what has arrived, up to maxClientHello",
		"max_client_hello_size":     "64 KiB only (maxClientHello, Envoy's default)",
	}
	tlsInspectorRefused = map[protoreflect.Name]string{
		"close_connection_on_client_hello_parsing_errors": "a ClientHello that does not parse leaves the connection to the chains for plaintext, as Envoy's default does; remove it",
	}
)

// originalSrcHonoured and originalSrcRefused classify the OriginalSrc
// fields (buildOriginalSrc).
var (
	originalSrcHonoured = map[protoreflect.Name]string{
		"mark": "OriginalSrc.Mark: the upstream socket's SO_MARK",
	}
	originalSrcRefused = map[protoreflect.Name]string{
		"bind_port": "the upstream connection binds the downstream address with a port of its own; remove it",
	}
)
