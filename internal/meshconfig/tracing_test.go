package meshconfig

import (
	"strings"
	"testing"
	"time"
)

func TestParseTracing(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       *Tracing
	}{
		{name: "off by default", yaml: "trustDomain: x\n"},
		{name: "enableTracing: Istio's default Zipkin at 1 %", yaml: "enableTracing: true\n",
			want: &Tracing{Sampling: 1, Provider: TracingProvider{Kind: TracingZipkin, Address: "zipkin.istio-system:9411", Path: "/api/v2/spans", TraceID128: true}}},
		{name: "defaultConfig.tracing", yaml: `enableTracing: true
defaultConfig:
  tracing:
    sampling: 100
    maxPathTagLength: 99
    zipkin: {address: "10.0.0.5:9411"}
    customTags:
      b: {header: {name: x-team, defaultValue: none}}
      a: {literal: {value: v}}
      c: {environment: {name: POD_NAME}}
`, want: &Tracing{Sampling: 100, MaxPathTagLength: 99, Provider: TracingProvider{Kind: TracingZipkin, Address: "10.0.0.5:9411", Path: "/api/v2/spans", TraceID128: true},
			CustomTags: []TracingTag{{Tag: "a", Lit: true, Literal: "v"}, {Tag: "b", IsHeader: true, Header: "x-team", Default: "none"}, {Tag: "c", IsEnv: true, Environment: "POD_NAME"}}}},
		{name: "sampling over 100 is 1 %, as Istio", yaml: "enableTracing: true\ndefaultConfig:\n  tracing:\n    sampling: 500\n",
			want: &Tracing{Sampling: 1, Provider: TracingProvider{Kind: TracingZipkin, Address: "zipkin.istio-system:9411", Path: "/api/v2/spans", TraceID128: true}}},
		{name: "zipkin provider", yaml: `extensionProviders:
- name: zk
  zipkin: {service: zipkin.observability.svc.cluster.local, port: 9411, maxTagLength: 64, traceContextOption: USE_B3_WITH_W3C_PROPAGATION}
defaultProviders: {tracing: [zk]}
defaultConfig:
  tracing: {sampling: 10}
`, want: &Tracing{Sampling: 10, MaxPathTagLength: 64, Provider: TracingProvider{Name: "zk", Kind: TracingZipkin, Service: "zipkin.observability.svc.cluster.local",
			Port: 9411, Path: "/api/v2/spans", TraceID128: true, W3C: true}}},
		{name: "opentelemetry provider", yaml: `extensionProviders:
- name: otel
  opentelemetry: {service: otel-collector.observability.svc.cluster.local, port: 4317, grpc: {timeout: 3s, initialMetadata: [{name: x-tenant, value: a}]}}
defaultProviders: {tracing: [otel]}
`, want: &Tracing{Sampling: 1, Provider: TracingProvider{Name: "otel", Kind: TracingOpenTelemetry, Service: "otel-collector.observability.svc.cluster.local",
			Port: 4317, Timeout: 3 * time.Second, Header: "x-tenant", HeaderValue: "a"}}},
		{name: "a provider not chosen is no tracing", yaml: "extensionProviders:\n- name: zk\n  zipkin: {service: z, port: 9411}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			got := c.Tracing
			if (got == nil) != (tc.want == nil) {
				t.Fatalf("tracing %+v, want %+v", got, tc.want)
			}
			if got == nil {
				return
			}
			if got.Provider != tc.want.Provider || got.Sampling != tc.want.Sampling || got.MaxPathTagLength != tc.want.MaxPathTagLength || len(got.CustomTags) != len(tc.want.CustomTags) {
				t.Fatalf("tracing %+v, want %+v", got, tc.want)
			}
			for i := range got.CustomTags {
				if got.CustomTags[i] != tc.want.CustomTags[i] {
					t.Errorf("tag %d %+v, want %+v", i, got.CustomTags[i], tc.want.CustomTags[i])
				}
			}
		})
	}
}

// TestParseTracingRefuses: the tracing fields straitd does not write are
// refused at load, with their path.
func TestParseTracingRefuses(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"enableTracing: true\ndefaultConfig:\n  tracing:\n    datadog: {address: d:8126}\n", "defaultConfig.tracing.datadog"},
		{"enableTracing: true\ndefaultConfig:\n  tracing:\n    tlsSettings: {mode: SIMPLE}\n", "defaultConfig.tracing.tlsSettings"},
		{"enableTracing: true\ndefaultConfig:\n  tracing:\n    enableIstioTags: true\n", "defaultConfig.tracing.enableIstioTags"},
		{"enableTracing: true\ndefaultConfig:\n  tracing:\n    zipkin: {address: nohost}\n", "defaultConfig.tracing.zipkin.address"},
		{"defaultConfig:\n  tracing:\n    zipkin: {address: z:9411}\n", "defaultConfig.tracing.zipkin"},
		{"extensionProviders:\n- name: d\n  datadog: {service: d, port: 1}\n", "extensionProviders[0].datadog"},
		{"extensionProviders:\n- name: o\n  opentelemetry: {service: o, port: 4318, http: {path: /v1/traces}}\n", "extensionProviders[0].opentelemetry.http"},
		{"extensionProviders:\n- name: z\n  zipkin: {service: z, port: 9411, headers: [{name: a, value: b}]}\n", "extensionProviders[0].zipkin.headers"},
		{"extensionProviders:\n- name: z\n  zipkin: {service: z}\n", "extensionProviders[0].zipkin: service and port"},
		{"extensionProviders:\n- name: z\n  zipkin: {service: z, port: 1}\n- name: z\n  zipkin: {service: yy, port: 1}\n", "extensionProviders[1].name"},
		{"defaultProviders: {tracing: [nope]}\n", "defaultProviders.tracing[0]"},
		{"defaultProviders: {metrics: [prometheus]}\n", "defaultProviders.metrics"},
	} {
		if _, err := Parse([]byte(tc.yaml)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one naming %s", tc.yaml, err, tc.want)
		}
	}
}
