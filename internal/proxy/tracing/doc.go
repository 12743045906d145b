// Package tracing is strait-proxy's distributed tracing, as Envoy's HTTP
// connection manager does it with its Zipkin and OpenTelemetry tracers:
// the trace context of a request is read from its B3 (x-b3-* or the
// single b3 header) or W3C (traceparent, tracestate) headers, the proxy
// starts a span as a child of it (or a new trace), decides whether the
// trace is sampled (random_sampling, client_sampling, overall_sampling,
// with the request id's trace reason; an incoming sampled flag wins), and
// sends its own span id upstream. When the stream ends the span gets
// Envoy's tags and goes to a reporter: Zipkin v2 JSON over HTTP, or
// OTLP/gRPC, batched by one goroutine per collector with a bounded queue,
// so that a slow collector never slows a request (spans are dropped and
// counted instead).
//
// Files: context.go (trace and span ids), b3.go and w3c.go (the header
// formats), requestid.go (x-request-id and its packed trace reason),
// sampling.go (the decision), config.go (the HCM's tracing and
// request_id_extension, audited field by field), span.go (a finished
// span and its tags), filter.go (the HTTP filter the HCM runs first),
// reporter.go (the per-proxy reporters), zipkin.go and otlp.go (the
// wire formats).
package tracing
