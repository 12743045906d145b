package listener

import (
	"fmt"
	"sort"
	"strings"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// listenerFields are the Listener fields build honours (or checks itself,
// like additional_addresses); any other field that is set is refused by
// name rather than ignored: freebind, socket_options,
// per_connection_buffer_limit_bytes, the listener's own access_log,
// tcp_backlog_size, tcp_fast_open_queue_length, connection_balance_config,
// udp_listener_config, api_listener, internal_listener, enable_mptcp, and
// any field a newer API adds.
//
// Taken as honoured: metadata (nothing here reads it), stat_prefix (the
// listener's stats carry its address, as Envoy's do without one),
// reuse_port and enable_reuse_port (one socket per listener, shared by
// the accept goroutines), ignore_global_conn_limit and
// bypass_overload_manager (there is no global connection limit nor
// overload manager to be exempt from), and
// max_connections_to_accept_per_socket_event (an accept batching knob with
// no effect on what is served).
var listenerFields = map[protoreflect.Name]bool{
	"name": true, "address": true, "additional_addresses": true, "stat_prefix": true,
	"filter_chains": true, "default_filter_chain": true, "use_original_dst": true,
	"metadata": true, "drain_type": true, "listener_filters": true, "listener_filters_timeout": true,
	"continue_on_listener_filters_timeout": true, "transparent": true, "traffic_direction": true,
	"bind_to_port": true, "reuse_port": true, "enable_reuse_port": true,
	"ignore_global_conn_limit": true, "bypass_overload_manager": true,
	"max_connections_to_accept_per_socket_event": true,
	// Refused with their own message in build.
	"filter_chain_matcher": true, "fcds_config": true,
}

// checkListenerFields refuses the fields of l that build does not honour.
func checkListenerFields(l *listenerv3.Listener) error {
	var bad []string
	l.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		if !listenerFields[fd.Name()] {
			bad = append(bad, string(fd.Name()))
		}
		return true
	})
	if len(bad) == 0 {
		return nil
	}
	sort.Strings(bad)
	verb := "is"
	if len(bad) > 1 {
		verb = "are"
	}
	return fmt.Errorf("%s %s not supported (remove it from the listener)", strings.Join(bad, ", "), verb)
}
