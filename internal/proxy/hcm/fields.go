package hcm

import (
	"fmt"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/straitmesh/strait/internal/proxy/fieldaudit"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// This file is the HttpConnectionManager's field audit. Every field of the
// message is either honoured (hcmHonoured names the code that reads it) or
// refused by name (hcmRefused says why, and what to do instead), so that a
// control plane never believes it configured something strait-proxy
// ignores. A field a newer API adds is in neither table: it is refused as
// unknown, and fields_test.go fails until it is classified.
//
// A proto3 scalar or enum is "set" only when it differs from its zero
// value, so a bool whose true strait does not implement is simply
// refused; a wrapper (BoolValue) or an enum whose zero value is Envoy's
// default is honoured for the values strait implements and refused for
// the others (checkHCMValues).
//
// One default differs from Envoy's and, being a zero value, cannot be
// refused: with server_header_transformation unset (OVERWRITE) Envoy
// writes "server: envoy" where strait relays the upstream's Server header.

// hcmHonoured maps each honoured field to the code that reads it.
var hcmHonoured = map[protoreflect.Name]string{
	"codec_type":             "buildCodec (h2.go): AUTO, HTTP1 or HTTP2",
	"stat_prefix":            "the http.<stat_prefix>.* counters (stats.go)",
	"rds":                    "Build: the RDS route table, over ADS only (checkRDS)",
	"route_config":           "Build: route.Compile",
	"http_filters":           "Build and httpfilters.go",
	"http_protocol_options":  "checkHTTP1Options: accept_http_10 (Filter.acceptHTTP10: HTTP/1.0 is served, else answered 426) and allow_absolute_url",
	"http2_protocol_options": "buildCodec (h2.go) with cluster.ParseHTTP2Options",
	// Sub-fields allow-listed in buildLimits.
	"common_http_protocol_options":        "buildLimits",
	"max_request_headers_kb":              "buildLimits",
	"stream_idle_timeout":                 "buildLimits",
	"request_timeout":                     "buildLimits",
	"request_headers_timeout":             "buildLimits",
	"delayed_close_timeout":               "buildLimits",
	"access_log":                          "the listener, with accesslog.Build",
	"use_remote_address":                  "fwdheaders.XFFOf and ProtoOf",
	"xff_num_trusted_hops":                "fwdheaders.XFFOf and ProtoOf",
	"skip_xff_append":                     "fwdheaders.XFFOf",
	"preserve_external_request_id":        "fwdheaders.XFFOf (the edge keeps an x-request-id)",
	"generate_request_id":                 "true only: every request without x-request-id gets one",
	"forward_client_cert_details":         "fwdheaders.XFCCOf",
	"set_current_client_cert_details":     "fwdheaders.XFCCOf",
	"upgrade_configs":                     "buildUpgrades (upgrade.go)",
	"normalize_path":                      "pathnorm.PolicyOf: dot segments removed, Chromium's canonical path",
	"merge_slashes":                       "pathnorm.PolicyOf: runs of '/' merged",
	"path_with_escaped_slashes_action":    "pathnorm.PolicyOf: every action (KEEP_UNCHANGED, REJECT_REQUEST, UNESCAPE_AND_REDIRECT, UNESCAPE_AND_FORWARD)",
	"server_header_transformation":        "PASS_THROUGH only: the upstream's Server header is relayed as it is, none is added",
	"add_user_agent":                      "false only: no user-agent nor x-envoy-downstream-service-cluster is added",
	"add_proxy_protocol_connection_state": "true only: an upstream PROXY protocol header carries the downstream connection's addresses (forward.Downstream)",
	// tracing.Parse audits both field by field; the tracing filter
	// (chain.go, UseTracing) runs them.
	"tracing":              "tracing.Parse and the tracing filter, first in the chain (chain.go)",
	"request_id_extension": "tracing.ParseRequestID: the UUID extension's pack_trace_reason and use_request_id_for_trace_sampling",
}

// hcmRefused maps each refused field to why, and the fix.
var hcmRefused = map[protoreflect.Name]string{
	"scoped_routes":                                     "scoped RDS is not implemented; use rds or route_config",
	"http1_safe_max_connection_duration":                "an HTTP/1.1 connection past max_connection_duration closes after its request in progress; remove the field",
	"http3_protocol_options":                            "HTTP/3 is not served; remove the field",
	"server_name":                                       "the Server header is relayed from the upstream, never written (server_header_transformation PASS_THROUGH); remove the field",
	"stream_flush_timeout":                              "a stream waiting for its peer's flow control is bounded by stream_idle_timeout alone; remove the field",
	"drain_timeout":                                     "an HTTP/2 connection gets its GOAWAY when the drain starts, with no second phase; remove the field",
	"drain_timeout_jitter":                              "an HTTP/2 connection gets its GOAWAY when the drain starts, with no second phase; remove the field",
	"access_log_flush_interval":                         "access log records are written when the request ends; remove the field",
	"flush_access_log_on_new_request":                   "access log records are written when the request ends; remove the field",
	"access_log_options":                                "access log records are written when the request ends; remove the field",
	"original_ip_detection_extensions":                  "the client address comes from x-forwarded-for with xff_num_trusted_hops, or the peer with use_remote_address; remove the field",
	"early_header_mutation_extensions":                  "no header mutation runs before routing; use the route's request_headers_to_add",
	"internal_address_config":                           "no address is internal, every request is external; remove the field",
	"via":                                               "no via header is written; remove the field",
	"always_set_request_id_in_response":                 "x-request-id is not copied to responses; remove the field or set it false",
	"forward_client_cert_matcher":                       "use forward_client_cert_details",
	"proxy_100_continue":                                "100-continue is answered by the proxy; remove the field or set it false",
	"represent_ipv4_remote_address_as_ipv4_mapped_ipv6": "remove the field or set it false",
	"local_reply_config":                                "local replies keep Envoy's default bodies; remove the field",
	"strip_matching_host_port":                          "the Host header is routed and forwarded as received (ignore_port_in_host_matching in the route configuration drops the port for matching); remove the field",
	"strip_any_host_port":                               "the Host header is routed and forwarded as received (ignore_port_in_host_matching in the route configuration drops the port for matching); remove the field",
	"strip_trailing_host_dot":                           "the Host header is routed and forwarded as received; remove the field",
	"stream_error_on_invalid_http_message":              "a malformed HTTP/1.1 message ends its connection and HTTP/2 keeps x/net/http2's handling; remove the field",
	"path_normalization_options":                        "the forwarded path is the one routed (normalize_path, merge_slashes); a separate forwarding transformation is not implemented; remove the field",
	"proxy_status_config":                               "no proxy-status header is written; remove the field",
	"typed_header_validation_config":                    "headers are validated by the codecs' own rules; remove the field",
	"append_x_forwarded_port":                           "x-forwarded-port is not written; remove the field or set it false",
	"append_local_overload":                             "there is no overload manager; remove the field or set it false",
	"forward_proto_config":                              "x-forwarded-proto follows the downstream connection; remove the field",
	"record_route_resolution_stats":                     "there are no route resolution stats; remove the field or set it false",
	"scheme_header_transformation":                      "the request's :scheme follows the downstream connection (https on TLS); remove the field",
}

// http1Fields are the Http1ProtocolOptions fields the HTTP/1.1 codecs
// honour: accept_http_10 (HTTP/1.0 served when true, answered 426 Upgrade
// Required otherwise, as Envoy does) and allow_absolute_url
// (absolute-form targets, routed by their authority, when unset or true).
var http1Fields = map[protoreflect.Name]bool{"accept_http_10": true, "allow_absolute_url": true}

// commonOptionsFields are the HttpProtocolOptions fields buildLimits reads
// (some of them for the values it implements only).
var commonOptionsFields = map[protoreflect.Name]bool{
	"idle_timeout": true, "max_connection_duration": true, "max_connection_duration_jitter": true,
	"max_headers_count": true, "max_response_headers_kb": true, "max_stream_duration": true,
	"headers_with_underscores_action": true, "max_requests_per_connection": true,
}

// upgradeConfigFields are the UpgradeConfig fields buildUpgrades reads
// (filters to refuse it).
var upgradeConfigFields = map[protoreflect.Name]bool{"upgrade_type": true, "filters": true, "enabled": true}

// rdsFields and rdsConfigSourceFields are what Build reads of rds: the
// route table's name, and a config source that is ADS with an
// initial_fetch_timeout (the listener's warming, xdsclient) and the v3 API.
var (
	rdsFields             = map[protoreflect.Name]bool{"config_source": true, "route_config_name": true}
	rdsConfigSourceFields = map[protoreflect.Name]bool{"ads": true, "initial_fetch_timeout": true, "resource_api_version": true}
)

// checkHCMFields refuses the first HttpConnectionManager field, or value,
// that strait-proxy does not implement, naming it.
func checkHCMFields(h *hcmv3.HttpConnectionManager) error {
	if err := fieldaudit.Check("", h.ProtoReflect(), hcmHonoured, hcmRefused); err != nil {
		return err
	}
	return checkHCMValues(h)
}

// checkHCMValues refuses the values of honoured fields that strait-proxy
// does not implement.
func checkHCMValues(h *hcmv3.HttpConnectionManager) error {
	switch {
	case h.GetGenerateRequestId() != nil && !h.GetGenerateRequestId().GetValue():
		return fmt.Errorf("generate_request_id false is not supported (strait-proxy sets x-request-id on every request that has none); remove the field or set it true")
	case h.GetServerHeaderTransformation() != hcmv3.HttpConnectionManager_PASS_THROUGH &&
		h.GetServerHeaderTransformation() != hcmv3.HttpConnectionManager_OVERWRITE:
		return fmt.Errorf("server_header_transformation %s is not supported (the upstream's Server header is relayed as it is: PASS_THROUGH)", h.GetServerHeaderTransformation())
	case h.GetAddUserAgent().GetValue():
		return fmt.Errorf("add_user_agent true is not supported (no user-agent nor x-envoy-downstream-service-cluster is added); remove the field or set it false")
	case h.GetAddProxyProtocolConnectionState() != nil && !h.GetAddProxyProtocolConnectionState().GetValue():
		return fmt.Errorf("add_proxy_protocol_connection_state false is not supported (an upstream PROXY protocol header always carries the downstream connection's addresses); remove the field or set it true")
	}
	if err := checkHTTP1Options(h.GetHttpProtocolOptions()); err != nil {
		return err
	}
	if o := h.GetCommonHttpProtocolOptions(); o != nil {
		if err := fieldaudit.Only("common_http_protocol_options", o.ProtoReflect(), commonOptionsFields); err != nil {
			return fmt.Errorf("%w (remove it)", err)
		}
	}
	for i, u := range h.GetUpgradeConfigs() {
		if err := fieldaudit.Only(fmt.Sprintf("upgrade_configs[%d]", i), u.ProtoReflect(), upgradeConfigFields); err != nil {
			return fmt.Errorf("%w (remove it)", err)
		}
	}
	return checkRDS(h.GetRds())
}

// checkHTTP1Options refuses the http_protocol_options the HTTP/1.1 codec
// does not implement.
func checkHTTP1Options(o *corev3.Http1ProtocolOptions) error {
	if o == nil {
		return nil
	}
	if err := fieldaudit.Only("http_protocol_options", o.ProtoReflect(), http1Fields); err != nil {
		return fmt.Errorf("%w (remove it)", err)
	}
	if v := o.GetAllowAbsoluteUrl(); v != nil && !v.GetValue() {
		return fmt.Errorf("http_protocol_options.allow_absolute_url false is not supported (absolute-form targets are served, routed by their authority); remove the field or set it true")
	}
	return nil
}

// checkRDS refuses the Rds fields Build does not read.
func checkRDS(rds *hcmv3.Rds) error {
	if rds == nil {
		return nil
	}
	if err := fieldaudit.Only("rds", rds.ProtoReflect(), rdsFields); err != nil {
		return fmt.Errorf("%w (remove it)", err)
	}
	cs := rds.GetConfigSource()
	if cs.GetAds() == nil {
		return fmt.Errorf("rds.config_source must be {ads: {}}, got %v", configSourceKind(cs))
	}
	if err := fieldaudit.Only("rds.config_source", cs.ProtoReflect(), rdsConfigSourceFields); err != nil {
		return fmt.Errorf("%w (remove it)", err)
	}
	if err := fieldaudit.Only("rds.config_source.ads", cs.GetAds().ProtoReflect(), nil); err != nil {
		return fmt.Errorf("%w (remove it)", err)
	}
	if v := cs.GetResourceApiVersion(); v != corev3.ApiVersion_AUTO && v != corev3.ApiVersion_V3 {
		return fmt.Errorf("rds.config_source.resource_api_version %s is not supported (V3 only)", v)
	}
	return nil
}
