package router

import "google.golang.org/protobuf/reflect/protoreflect"

// routerHonoured and routerRefused are the audit of the Router config:
// Strait's router is configured by the routes alone, so every field is
// refused when set; Istio's default Router{} (no child span, Envoy
// headers not suppressed) is what it does.
var (
	routerHonoured = map[protoreflect.Name]string{}
	routerRefused  = map[protoreflect.Name]string{
		"dynamic_stats":                            "the router keeps no per-request dynamic stats; remove it",
		"start_child_span":                         "the HCM's span is the only one, no child span is made per upstream request; remove it or set it false",
		"upstream_log":                             "there is no per-attempt upstream log; use the HCM's access_log",
		"upstream_log_options":                     "there is no per-attempt upstream log; use the HCM's access_log",
		"suppress_envoy_headers":                   "x-envoy-overloaded is still written on a local overflow reply; remove it or set it false",
		"strict_check_headers":                     "x-envoy-* request headers are read leniently, never refused; remove it",
		"respect_expected_rq_timeout":              "the route's timeout applies, x-envoy-expected-rq-timeout-ms is not read; remove it or set it false",
		"suppress_grpc_request_failure_code_stats": "remove it or set it false",
		"upstream_http_filters":                    "no HTTP filter runs upstream; remove it",
		"reject_connect_request_early_data":        "CONNECT is not supported; remove it or set it false",
	}
)
