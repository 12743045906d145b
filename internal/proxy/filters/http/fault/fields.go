package fault

import "google.golang.org/protobuf/reflect/protoreflect"

// The fault filter's field audit: each field of HTTPFault, FaultDelay and
// FaultAbort is honoured (and read by Build) or refused with the fix.
var (
	// httpFaultHonoured: the *_runtime keys name runtime overrides of the
	// configured values; Strait has no runtime layer, so the configured
	// values apply, which is what Envoy does when its runtime lacks the
	// keys. disable_downstream_cluster_stats: there are no per-downstream
	// cluster fault stats to disable.
	httpFaultHonoured = map[protoreflect.Name]string{
		"delay": "buildDelay", "abort": "buildAbort",
		"delay_percent_runtime": "no runtime", "abort_percent_runtime": "no runtime",
		"delay_duration_runtime": "no runtime", "abort_http_status_runtime": "no runtime",
		"max_active_faults_runtime": "no runtime", "response_rate_limit_percent_runtime": "no runtime",
		"abort_grpc_status_runtime":        "no runtime",
		"disable_downstream_cluster_stats": "no such stats",
	}
	httpFaultRefused = map[protoreflect.Name]string{
		"upstream_cluster":    "put the fault on the route instead",
		"headers":             "match headers on the route instead",
		"downstream_nodes":    "remove it",
		"max_active_faults":   "remove it",
		"response_rate_limit": "remove it",
		"filter_metadata":     "remove it",
	}
	faultDelayHonoured = map[protoreflect.Name]string{
		"fixed_delay": "buildDelay", "header_delay": "buildDelay", "percentage": "buildDelay",
	}
	faultAbortHonoured = map[protoreflect.Name]string{
		"http_status": "buildAbort", "grpc_status": "buildAbort", "header_abort": "buildAbort", "percentage": "buildAbort",
	}
	faultAbortRefused = map[protoreflect.Name]string{
		"response_body": "an abort answers Envoy's default body (\"fault filter abort\"); remove it",
	}
)
