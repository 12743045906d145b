package tracing

import "time"

// Kind is a span's kind: SERVER on a sidecar's inbound listeners
// (Envoy's ingress operation), CLIENT on outbound ones (egress).
type Kind uint8

// The span kinds the HCM makes.
const (
	KindServer Kind = iota + 1
	KindClient
)

func (k Kind) String() string {
	if k == KindClient {
		return "CLIENT"
	}
	return "SERVER"
}

// Tag is one span tag.
type Tag struct{ Key, Value string }

// Span is a finished span, handed to a reporter. It is not changed after
// Report.
type Span struct {
	TraceID  TraceID
	ID       uint64
	ParentID uint64 // 0: a root span
	Name     string
	Kind     Kind
	Start    time.Time
	Duration time.Duration
	// Shared marks a SERVER span that reuses its client's span id
	// (Zipkin's shared_span_context).
	Shared bool
	Debug  bool
	// Service is the local service's name (the node's cluster, as
	// Envoy's local_info names it).
	Service string
	Tags    []Tag
}

// Reporter takes finished spans. Report must not block.
type Reporter interface {
	Report(*Span)
}

// Envoy's tag names (source/common/tracing/common_values.h).
const (
	tagComponent         = "component"
	tagProxy             = "proxy"
	tagNodeID            = "node_id"
	tagGUIDRequestID     = "guid:x-request-id"
	tagGUIDClientTraceID = "guid:x-client-trace-id"
	tagHTTPURL           = "http.url"
	tagHTTPMethod        = "http.method"
	tagHTTPProtocol      = "http.protocol"
	tagDownstreamCluster = "downstream_cluster"
	tagUserAgent         = "user_agent"
	tagPeerAddress       = "peer.address"
	tagRequestSize       = "request_size"
	tagResponseSize      = "response_size"
	tagUpstreamCluster   = "upstream_cluster"
	tagUpstreamName      = "upstream_cluster.name"
	tagUpstreamAddress   = "upstream_address"
	tagHTTPStatusCode    = "http.status_code"
	tagResponseFlags     = "response_flags"
	tagError             = "error"
)
