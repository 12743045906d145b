package tracing

import (
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tracev3 "github.com/envoyproxy/go-control-plane/envoy/config/trace/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	uuidv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/request_id/uuid/v3"
	metadatav3 "github.com/envoyproxy/go-control-plane/envoy/type/metadata/v3"
	tracingtypev3 "github.com/envoyproxy/go-control-plane/envoy/type/tracing/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func mustAny(t testing.TB, m proto.Message) *anypb.Any {
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// istioZipkin is the HCM tracing istiod writes for a Zipkin provider
// (pilot/pkg/networking/core/tracing.go: zipkinConfig, configureSampling,
// buildServiceTags and the dry-run policy tags).
func istioZipkin(t testing.TB, sampling float64) *hcmv3.HttpConnectionManager_Tracing {
	return &hcmv3.HttpConnectionManager_Tracing{
		ClientSampling:  &typev3.Percent{Value: 100},
		RandomSampling:  &typev3.Percent{Value: sampling},
		OverallSampling: &typev3.Percent{Value: 100},
		CustomTags: []*tracingtypev3.CustomTag{
			{Tag: "istio.canonical_service", Type: &tracingtypev3.CustomTag_Literal_{Literal: &tracingtypev3.CustomTag_Literal{Value: "productpage"}}},
			{Tag: "istio.authorization.dry_run.allow_policy.name", Type: &tracingtypev3.CustomTag_Metadata_{Metadata: &tracingtypev3.CustomTag_Metadata{
				Kind:        &metadatav3.MetadataKind{Kind: &metadatav3.MetadataKind_Request_{Request: &metadatav3.MetadataKind_Request{}}},
				MetadataKey: &metadatav3.MetadataKey{Key: "envoy.filters.http.rbac", Path: []*metadatav3.MetadataKey_PathSegment{{Segment: &metadatav3.MetadataKey_PathSegment_Key{Key: "istio_dry_run_allow_shadow_effective_policy_id"}}}},
			}}},
			{Tag: "team", Type: &tracingtypev3.CustomTag_RequestHeader{RequestHeader: &tracingtypev3.CustomTag_Header{Name: "x-team", DefaultValue: "none"}}},
		},
		Provider: &tracev3.Tracing_Http{Name: ZipkinName, ConfigType: &tracev3.Tracing_Http_TypedConfig{TypedConfig: mustAny(t, &tracev3.ZipkinConfig{
			CollectorCluster:         "outbound|9411||zipkin.istio-system.svc.cluster.local",
			CollectorEndpoint:        "/api/v2/spans",
			CollectorHostname:        "zipkin.istio-system.svc.cluster.local",
			CollectorEndpointVersion: tracev3.ZipkinConfig_HTTP_JSON,
			TraceId_128Bit:           true,
			SharedSpanContext:        wrapperspb.Bool(false),
		})}},
	}
}

func TestParseIstioZipkin(t *testing.T) {
	ext := &hcmv3.RequestIDExtension{TypedConfig: mustAny(t, &uuidv3.UuidRequestIdConfig{UseRequestIdForTraceSampling: wrapperspb.Bool(true)})}
	c, err := Parse(istioZipkin(t, 1), ext)
	if err != nil {
		t.Fatal(err)
	}
	if c.Sampling != (Sampling{Client: 10000, Random: 100, Overall: 10000}) {
		t.Errorf("sampling %+v", c.Sampling)
	}
	if c.RequestID != DefaultRequestID {
		t.Errorf("request id %+v", c.RequestID)
	}
	want := Provider{Kind: KindZipkin, Cluster: "outbound|9411||zipkin.istio-system.svc.cluster.local", Path: "/api/v2/spans",
		Host: "zipkin.istio-system.svc.cluster.local", TraceID128: true}
	if c.Provider != want {
		t.Errorf("provider %+v, want %+v", c.Provider, want)
	}
	if len(c.CustomTags) != 3 || c.CustomTags[1].Kind != TagMetadata || c.CustomTags[1].Name != "envoy.filters.http.rbac" || c.CustomTags[2].Default != "none" {
		t.Errorf("custom tags %+v", c.CustomTags)
	}
	if c, err := Parse(nil, ext); c != nil || err != nil {
		t.Errorf("no tracing: %v, %v", c, err)
	}
}

func TestParseCollectorService(t *testing.T) {
	tr := istioZipkin(t, 1)
	tr.Provider.ConfigType = &tracev3.Tracing_Http_TypedConfig{TypedConfig: mustAny(t, &tracev3.ZipkinConfig{
		CollectorEndpointVersion: tracev3.ZipkinConfig_HTTP_JSON, TraceContextOption: tracev3.ZipkinConfig_USE_B3_WITH_W3C_PROPAGATION,
		CollectorService: &corev3.HttpService{HttpUri: &corev3.HttpUri{Uri: "http://zipkin.istio-system:9411/api/v2/spans",
			HttpUpstreamType: &corev3.HttpUri_Cluster{Cluster: "zipkin"}}},
	})}
	c, err := Parse(tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p := c.Provider; p.Cluster != "zipkin" || p.Host != "zipkin.istio-system:9411" || p.Path != "/api/v2/spans" || !p.W3C || !p.SharedSpanContext {
		t.Errorf("provider %+v", p)
	}
}

// TestParseRefuses: what strait does not implement is refused by name.
func TestParseRefuses(t *testing.T) {
	zipkin := func(z *tracev3.ZipkinConfig) func(*hcmv3.HttpConnectionManager_Tracing) {
		return func(tr *hcmv3.HttpConnectionManager_Tracing) {
			tr.Provider.ConfigType = &tracev3.Tracing_Http_TypedConfig{TypedConfig: mustAny(t, z)}
		}
	}
	for _, tc := range []struct {
		name string
		edit func(*hcmv3.HttpConnectionManager_Tracing)
		ext  *hcmv3.RequestIDExtension
		want string
	}{
		{name: "verbose", edit: func(tr *hcmv3.HttpConnectionManager_Tracing) { tr.Verbose = true }, want: "tracing.verbose"},
		{name: "operation", edit: func(tr *hcmv3.HttpConnectionManager_Tracing) { tr.Operation = "x" }, want: "tracing.operation"},
		{name: "spawn upstream span", edit: func(tr *hcmv3.HttpConnectionManager_Tracing) { tr.SpawnUpstreamSpan = wrapperspb.Bool(true) }, want: "spawn_upstream_span"},
		{name: "percent", edit: func(tr *hcmv3.HttpConnectionManager_Tracing) { tr.RandomSampling = &typev3.Percent{Value: 101} }, want: "random_sampling"},
		{name: "no provider", edit: func(tr *hcmv3.HttpConnectionManager_Tracing) { tr.Provider = nil }, want: "tracing.provider is required"},
		{name: "value tag", edit: func(tr *hcmv3.HttpConnectionManager_Tracing) {
			tr.CustomTags = append(tr.CustomTags, &tracingtypev3.CustomTag{Tag: "x", Type: &tracingtypev3.CustomTag_Value{Value: "%REQ(x)%"}})
		}, want: "custom_tags[3]: value"},
		{name: "route metadata tag", edit: func(tr *hcmv3.HttpConnectionManager_Tracing) {
			tr.CustomTags = []*tracingtypev3.CustomTag{{Tag: "x", Type: &tracingtypev3.CustomTag_Metadata_{Metadata: &tracingtypev3.CustomTag_Metadata{
				Kind: &metadatav3.MetadataKind{Kind: &metadatav3.MetadataKind_Route_{Route: &metadatav3.MetadataKind_Route{}}}}}}}
		}, want: "metadata.kind"},
		{name: "split spans", edit: zipkin(&tracev3.ZipkinConfig{CollectorCluster: "z", CollectorEndpoint: "/", CollectorEndpointVersion: tracev3.ZipkinConfig_HTTP_JSON, SplitSpansForRequest: true}), want: "split_spans_for_request"},
		{name: "proto version", edit: zipkin(&tracev3.ZipkinConfig{CollectorCluster: "z", CollectorEndpoint: "/", CollectorEndpointVersion: tracev3.ZipkinConfig_HTTP_PROTO}), want: "collector_endpoint_version"},
		{name: "no cluster", edit: zipkin(&tracev3.ZipkinConfig{CollectorEndpoint: "/", CollectorEndpointVersion: tracev3.ZipkinConfig_HTTP_JSON}), want: "collector_cluster"},
		{name: "other tracer", edit: func(tr *hcmv3.HttpConnectionManager_Tracing) {
			tr.Provider = &tracev3.Tracing_Http{Name: "envoy.tracers.datadog", ConfigType: &tracev3.Tracing_Http_TypedConfig{TypedConfig: mustAny(t, &tracev3.DatadogConfig{})}}
		}, want: "envoy.tracers.datadog"},
		{name: "otel http", edit: func(tr *hcmv3.HttpConnectionManager_Tracing) {
			tr.Provider = &tracev3.Tracing_Http{Name: OpenTelemetryName, ConfigType: &tracev3.Tracing_Http_TypedConfig{TypedConfig: mustAny(t, &tracev3.OpenTelemetryConfig{HttpService: &corev3.HttpService{}})}}
		}, want: "http_service"},
		{name: "request id type", ext: &hcmv3.RequestIDExtension{TypedConfig: mustAny(t, &typev3.Percent{})}, want: "request_id_extension.typed_config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := istioZipkin(t, 1)
			if tc.edit != nil {
				tc.edit(tr)
			}
			_, err := Parse(tr, tc.ext)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want it to name %q", err, tc.want)
			}
		})
	}
}

func TestParseRequestIDOptions(t *testing.T) {
	o, err := ParseRequestID(&hcmv3.RequestIDExtension{TypedConfig: mustAny(t, &uuidv3.UuidRequestIdConfig{
		PackTraceReason: wrapperspb.Bool(false), UseRequestIdForTraceSampling: wrapperspb.Bool(false)})})
	if err != nil || o != (RequestIDOptions{}) {
		t.Errorf("%+v, %v", o, err)
	}
}
