package tracing

import "google.golang.org/protobuf/reflect/protoreflect"

// This file is the tracing config's field audit: each field of the HCM's
// Tracing, the Zipkin and OpenTelemetry providers and the UUID request id
// extension is honoured (read where the table says) or refused with the
// fix; the messages that only carry a service or a URI have allow-lists.

var (
	tracingHonoured = map[protoreflect.Name]string{
		"client_sampling": "Sampling.Client", "random_sampling": "Sampling.Random", "overall_sampling": "Sampling.Overall",
		"max_path_tag_length": "the http.url tag's length", "custom_tags": "CustomTag", "provider": "Provider",
		"spawn_upstream_span": "false only", "verbose": "false only",
	}
	tracingRefused = map[protoreflect.Name]string{
		"operation":          "the span is named as Envoy names it (ingress, egress <host>); remove the field",
		"upstream_operation": "no upstream span is made (spawn_upstream_span false); remove the field",
	}
	zipkinHonoured = map[protoreflect.Name]string{
		"collector_cluster": "Provider.Cluster", "collector_endpoint": "Provider.Path", "collector_hostname": "Provider.Host",
		"trace_id_128bit": "Provider.TraceID128", "shared_span_context": "Provider.SharedSpanContext",
		"collector_endpoint_version": "HTTP_JSON only", "trace_context_option": "Provider.W3C",
		"collector_service": "Provider.Cluster, Host, Path and Timeout",
	}
	zipkinRefused = map[protoreflect.Name]string{
		"split_spans_for_request": "the server and client sides of a request are one span; remove it",
		"timestamp_trace_ids":     "trace ids are random; remove it",
	}
	otelHonoured = map[protoreflect.Name]string{
		"grpc_service": "envoy_grpc with cluster_name, authority, timeout and one initial_metadata entry", "service_name": "Provider.ServiceName",
	}
	otelRefused = map[protoreflect.Name]string{
		"http_service":                          "OTLP/HTTP is not implemented; use grpc_service",
		"exporter":                              "spans are exported over OTLP/gRPC; remove it",
		"resource_detectors":                    "the resource has service.name only; remove it",
		"sampler":                               "the HCM's sampling decides; remove it",
		"max_cache_size":                        "spans are batched up to the reporter's own bound; remove it",
		"set_telemetry_sdk_resource_attributes": "remove it",
		"set_service_name_resource_attribute":   "service.name is always set; remove it",
		"set_instrumentation_scope":             "remove it",
	}
	grpcServiceFields = map[protoreflect.Name]bool{"envoy_grpc": true, "timeout": true, "initial_metadata": true}
	envoyGrpcFields   = map[protoreflect.Name]bool{"cluster_name": true, "authority": true}
	httpServiceFields = map[protoreflect.Name]bool{"http_uri": true, "request_headers_to_add": true}
	httpURIFields     = map[protoreflect.Name]bool{"uri": true, "cluster": true, "timeout": true}
	uuidFields        = map[protoreflect.Name]bool{"pack_trace_reason": true, "use_request_id_for_trace_sampling": true}
)
