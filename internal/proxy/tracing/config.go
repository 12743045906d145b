package tracing

import (
	"fmt"
	"math"
	"net/url"
	"os"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tracev3 "github.com/envoyproxy/go-control-plane/envoy/config/trace/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	uuidv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/request_id/uuid/v3"
	metadatav3 "github.com/envoyproxy/go-control-plane/envoy/type/metadata/v3"
	tracingtypev3 "github.com/envoyproxy/go-control-plane/envoy/type/tracing/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/straitmesh/strait/internal/proxy/fieldaudit"
)

// Provider names and config type URLs as Envoy registers its tracers.
const (
	ZipkinName        = "envoy.tracers.zipkin"
	OpenTelemetryName = "envoy.tracers.opentelemetry"
	zipkinType        = "type.googleapis.com/envoy.config.trace.v3.ZipkinConfig"
	otelType          = "type.googleapis.com/envoy.config.trace.v3.OpenTelemetryConfig"
	uuidType          = "type.googleapis.com/envoy.extensions.request_id.uuid.v3.UuidRequestIdConfig"
)

// Config is an HCM's tracing, compiled: immutable, shared by every
// stream.
type Config struct {
	Sampling  Sampling
	RequestID RequestIDOptions
	// MaxPathTagLength truncates the http.url tag (default 256).
	MaxPathTagLength int
	CustomTags       []CustomTag
	Provider         Provider
}

// ProviderKind is the tracer: Zipkin or OpenTelemetry.
type ProviderKind uint8

// The tracers: Envoy's Zipkin and OpenTelemetry (OTLP/gRPC).
const (
	KindZipkin ProviderKind = iota + 1
	KindOTLP
)

// Provider is where spans go and how the context propagates. It is
// comparable: the per-proxy Reporters share one reporter per Provider.
type Provider struct {
	Kind ProviderKind
	// Cluster is the collector's cluster; Host its Host header (Zipkin)
	// or :authority (OTLP); Path Zipkin's collector_endpoint.
	Cluster, Host, Path string
	// Timeout bounds one export (0: 5 s).
	Timeout time.Duration
	// Zipkin: TraceID128 draws 128-bit trace ids for new traces;
	// SharedSpanContext gives a SERVER span the incoming span's id
	// (Zipkin's shared spans) rather than a child id; W3C also reads and
	// writes traceparent (USE_B3_WITH_W3C_PROPAGATION).
	TraceID128, SharedSpanContext, W3C bool
	// OTLP: ServiceName is the resource's service.name; Header is one
	// initial_metadata entry (Header, HeaderValue) sent with exports.
	// An empty ServiceName is the node's cluster (istiod writes that).
	ServiceName         string
	Header, HeaderValue string
}

// TagKind is where a custom tag's value comes from.
type TagKind uint8

// The custom tag kinds (envoy.type.tracing.v3.CustomTag).
const (
	TagLiteral TagKind = iota + 1
	TagEnvironment
	TagRequestHeader
	TagMetadata
)

// CustomTag is one of custom_tags: a literal, an environment variable
// (read once, at load), a request header, or a request dynamic metadata
// value (namespace and key), with a default when absent.
type CustomTag struct {
	Tag        string
	Kind       TagKind
	Value      string // literal, or the environment's value
	Name       string // header name, or metadata namespace
	Key        string // metadata key
	Default    string
	HasDefault bool
}

// ParseRequestID reads an HCM's request_id_extension (nil: the UUID
// extension's defaults, as Envoy).
func ParseRequestID(ext *hcmv3.RequestIDExtension) (RequestIDOptions, error) {
	o := DefaultRequestID
	if ext == nil {
		return o, nil
	}
	if err := fieldaudit.Only("request_id_extension", ext.ProtoReflect(), map[protoreflect.Name]bool{"typed_config": true}); err != nil {
		return o, err
	}
	tc := ext.GetTypedConfig()
	if tc == nil {
		return o, nil
	}
	if tc.GetTypeUrl() != uuidType {
		return o, fmt.Errorf("request_id_extension.typed_config %s is not supported (only envoy.extensions.request_id.uuid.v3.UuidRequestIdConfig)", tc.GetTypeUrl())
	}
	var u uuidv3.UuidRequestIdConfig
	if err := tc.UnmarshalTo(&u); err != nil {
		return o, fmt.Errorf("request_id_extension.typed_config: %w", err)
	}
	if err := fieldaudit.Only("request_id_extension.typed_config", u.ProtoReflect(), uuidFields); err != nil {
		return o, err
	}
	if v := u.GetPackTraceReason(); v != nil {
		o.PackTraceReason = v.GetValue()
	}
	if v := u.GetUseRequestIdForTraceSampling(); v != nil {
		o.UseForSampling = v.GetValue()
	}
	return o, nil
}

// Parse compiles an HCM's tracing (nil: no tracing, nil Config) with its
// request_id_extension. Every field is honoured with Envoy's semantics
// or refused by name.
func Parse(t *hcmv3.HttpConnectionManager_Tracing, ext *hcmv3.RequestIDExtension) (*Config, error) {
	rid, err := ParseRequestID(ext)
	if err != nil || t == nil {
		return nil, err
	}
	if err := fieldaudit.Check("tracing", t.ProtoReflect(), tracingHonoured, tracingRefused); err != nil {
		return nil, err
	}
	if t.GetVerbose() {
		return nil, fmt.Errorf("tracing.verbose true is not supported (no per-filter annotations are written); remove it")
	}
	if t.GetSpawnUpstreamSpan().GetValue() {
		return nil, fmt.Errorf("tracing.spawn_upstream_span true is not supported (the HCM's span is the only one); remove it or set it false")
	}
	c := &Config{Sampling: DefaultSampling, RequestID: rid, MaxPathTagLength: 256}
	for _, p := range []struct {
		name string
		v    *typev3.Percent
		dst  *uint32
	}{
		{"client_sampling", t.GetClientSampling(), &c.Sampling.Client},
		{"random_sampling", t.GetRandomSampling(), &c.Sampling.Random},
		{"overall_sampling", t.GetOverallSampling(), &c.Sampling.Overall},
	} {
		if p.v == nil {
			continue
		}
		v := p.v.GetValue()
		if math.IsNaN(v) || v < 0 || v > 100 {
			return nil, fmt.Errorf("tracing.%s %v is not a percentage (0 to 100)", p.name, v)
		}
		*p.dst = uint32(math.Round(v * 100))
	}
	if v := t.GetMaxPathTagLength(); v != nil {
		c.MaxPathTagLength = int(v.GetValue())
	}
	for i, ct := range t.GetCustomTags() {
		tag, err := parseCustomTag(ct)
		if err != nil {
			return nil, fmt.Errorf("tracing.custom_tags[%d]: %w", i, err)
		}
		c.CustomTags = append(c.CustomTags, tag)
	}
	if c.Provider, err = parseProvider(t.GetProvider()); err != nil {
		return nil, err
	}
	return c, nil
}

func parseCustomTag(ct *tracingtypev3.CustomTag) (CustomTag, error) {
	tag := CustomTag{Tag: ct.GetTag()}
	if tag.Tag == "" {
		return tag, fmt.Errorf("tag is empty")
	}
	switch v := ct.GetType().(type) {
	case *tracingtypev3.CustomTag_Literal_:
		tag.Kind, tag.Value = TagLiteral, v.Literal.GetValue()
	case *tracingtypev3.CustomTag_Environment_:
		// Envoy reads the variable once, when the config loads.
		tag.Kind = TagEnvironment
		val, ok := os.LookupEnv(v.Environment.GetName())
		if !ok {
			val = v.Environment.GetDefaultValue()
		}
		tag.Value = val
	case *tracingtypev3.CustomTag_RequestHeader:
		tag.Kind, tag.Name = TagRequestHeader, v.RequestHeader.GetName()
		tag.Default, tag.HasDefault = v.RequestHeader.GetDefaultValue(), v.RequestHeader.GetDefaultValue() != ""
	case *tracingtypev3.CustomTag_Metadata_:
		m := v.Metadata
		if _, ok := m.GetKind().GetKind().(*metadatav3.MetadataKind_Request_); !ok {
			return tag, fmt.Errorf("metadata.kind %T is not supported (only request: the request's dynamic metadata)", m.GetKind().GetKind())
		}
		path := m.GetMetadataKey().GetPath()
		if len(path) != 1 || path[0].GetKey() == "" {
			return tag, fmt.Errorf("metadata.metadata_key.path must be one key (a value of the namespace)")
		}
		tag.Kind, tag.Name, tag.Key = TagMetadata, m.GetMetadataKey().GetKey(), path[0].GetKey()
		tag.Default, tag.HasDefault = m.GetDefaultValue(), m.GetDefaultValue() != ""
	case *tracingtypev3.CustomTag_Value:
		return tag, fmt.Errorf("value (a substitution format string) is not supported; use literal, environment, request_header or metadata")
	default:
		return tag, fmt.Errorf("type %T is not supported", v)
	}
	if ct.GetValueType() != 0 {
		return tag, fmt.Errorf("value_type is not supported (tags are strings); remove it")
	}
	return tag, nil
}

func parseProvider(h *tracev3.Tracing_Http) (Provider, error) {
	var p Provider
	if h == nil {
		return p, fmt.Errorf("tracing.provider is required (strait-proxy has no bootstrap tracer): give envoy.tracers.zipkin or envoy.tracers.opentelemetry")
	}
	if err := fieldaudit.Only("tracing.provider", h.ProtoReflect(), map[protoreflect.Name]bool{"name": true, "typed_config": true}); err != nil {
		return p, err
	}
	tc := h.GetTypedConfig()
	switch {
	case tc.GetTypeUrl() == zipkinType:
		var z tracev3.ZipkinConfig
		if err := tc.UnmarshalTo(&z); err != nil {
			return p, fmt.Errorf("tracing.provider.typed_config: %w", err)
		}
		return parseZipkin(&z)
	case tc.GetTypeUrl() == otelType:
		var o tracev3.OpenTelemetryConfig
		if err := tc.UnmarshalTo(&o); err != nil {
			return p, fmt.Errorf("tracing.provider.typed_config: %w", err)
		}
		return parseOTel(&o)
	}
	return p, fmt.Errorf("tracing.provider %q (%s) is not supported (envoy.tracers.zipkin or envoy.tracers.opentelemetry)", h.GetName(), tc.GetTypeUrl())
}

func parseZipkin(z *tracev3.ZipkinConfig) (Provider, error) {
	const at = "tracing.provider.typed_config"
	p := Provider{Kind: KindZipkin, Cluster: z.GetCollectorCluster(), Path: z.GetCollectorEndpoint(), Host: z.GetCollectorHostname(),
		TraceID128: z.GetTraceId_128Bit(), SharedSpanContext: true}
	if err := fieldaudit.Check(at, z.ProtoReflect(), zipkinHonoured, zipkinRefused); err != nil {
		return p, err
	}
	if v := z.GetSharedSpanContext(); v != nil {
		p.SharedSpanContext = v.GetValue()
	}
	if z.GetCollectorEndpointVersion() != tracev3.ZipkinConfig_HTTP_JSON {
		return p, fmt.Errorf("%s.collector_endpoint_version %s is not supported (only HTTP_JSON, Zipkin's v2 JSON)", at, z.GetCollectorEndpointVersion())
	}
	switch z.GetTraceContextOption() {
	case tracev3.ZipkinConfig_USE_B3:
	case tracev3.ZipkinConfig_USE_B3_WITH_W3C_PROPAGATION:
		p.W3C = true
	default:
		return p, fmt.Errorf("%s.trace_context_option %s is not supported", at, z.GetTraceContextOption())
	}
	if s := z.GetCollectorService(); s != nil {
		if p.Cluster != "" || p.Path != "" || p.Host != "" {
			return p, fmt.Errorf("%s: collector_service excludes collector_cluster, collector_endpoint and collector_hostname", at)
		}
		if err := parseHTTPService(at+".collector_service", s, &p); err != nil {
			return p, err
		}
	}
	if p.Cluster == "" || p.Path == "" {
		return p, fmt.Errorf("%s: collector_cluster and collector_endpoint (or collector_service) are required", at)
	}
	if p.Host == "" {
		p.Host = p.Cluster // Envoy's default Host for the collector
	}
	return p, nil
}

// parseHTTPService reads a Zipkin collector_service: the URI's path and
// host, its cluster and timeout; request_headers_to_add is refused.
func parseHTTPService(at string, s *corev3.HttpService, p *Provider) error {
	if err := fieldaudit.Only(at, s.ProtoReflect(), httpServiceFields); err != nil {
		return err
	}
	if len(s.GetRequestHeadersToAdd()) > 0 {
		return fmt.Errorf("%s.request_headers_to_add is not supported (no header is added to exports); remove it", at)
	}
	u := s.GetHttpUri()
	if err := fieldaudit.Only(at+".http_uri", u.ProtoReflect(), httpURIFields); err != nil {
		return err
	}
	pu, err := url.Parse(u.GetUri())
	if err != nil || pu.Host == "" {
		return fmt.Errorf("%s.http_uri.uri %q is not an absolute URI", at, u.GetUri())
	}
	p.Cluster, p.Host, p.Path = u.GetCluster(), pu.Host, pu.RequestURI()
	if d := u.GetTimeout(); d != nil {
		p.Timeout = d.AsDuration()
	}
	return nil
}

func parseOTel(o *tracev3.OpenTelemetryConfig) (Provider, error) {
	const at = "tracing.provider.typed_config"
	p := Provider{Kind: KindOTLP, ServiceName: o.GetServiceName()}
	if err := fieldaudit.Check(at, o.ProtoReflect(), otelHonoured, otelRefused); err != nil {
		return p, err
	}
	g := o.GetGrpcService()
	if g == nil {
		return p, fmt.Errorf("%s.grpc_service is required", at)
	}
	if err := fieldaudit.Only(at+".grpc_service", g.ProtoReflect(), grpcServiceFields); err != nil {
		return p, err
	}
	eg := g.GetEnvoyGrpc()
	if eg == nil {
		return p, fmt.Errorf("%s.grpc_service.envoy_grpc is required (google_grpc is not supported)", at)
	}
	if err := fieldaudit.Only(at+".grpc_service.envoy_grpc", eg.ProtoReflect(), envoyGrpcFields); err != nil {
		return p, err
	}
	p.Cluster, p.Host = eg.GetClusterName(), eg.GetAuthority()
	if p.Cluster == "" {
		return p, fmt.Errorf("%s.grpc_service.envoy_grpc.cluster_name is required", at)
	}
	if p.Host == "" {
		p.Host = p.Cluster // Envoy's default :authority
	}
	if d := g.GetTimeout(); d != nil {
		p.Timeout = d.AsDuration()
	}
	switch md := g.GetInitialMetadata(); len(md) {
	case 0:
	case 1:
		if err := fieldaudit.Only(at+".grpc_service.initial_metadata[0]", md[0].ProtoReflect(), map[protoreflect.Name]bool{"key": true, "value": true}); err != nil {
			return p, err
		}
		p.Header, p.HeaderValue = md[0].GetKey(), md[0].GetValue()
	default:
		return p, fmt.Errorf("%s.grpc_service.initial_metadata: more than one entry is not supported", at)
	}
	return p, nil
}
