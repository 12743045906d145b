package validate_test

import (
	"strings"
	"testing"

	"github.com/straitmesh/strait/internal/istioconfig"
)

// A Telemetry loads in telemetry.istio.io/v1 and v1alpha1; a refused
// field or an invalid value is named by its path.
func TestTelemetryLoad(t *testing.T) {
	const head = "apiVersion: telemetry.istio.io/v1\nkind: Telemetry\nmetadata: {name: t, namespace: demo}\nspec:\n"
	for _, tc := range []struct {
		name, spec, wantErr string
	}{
		{name: "honoured fields", spec: `  selector: {matchLabels: {app: echo}}
  tracing:
  - match: {mode: SERVER}
    providers: [{name: zipkin}]
    randomSamplingPercentage: 50
    disableSpanReporting: false
    customTags:
      lit: {literal: {value: v}}
      env: {environment: {name: POD_NAME, defaultValue: x}}
      hdr: {header: {name: x-user}}
  metrics:
  - providers: [{name: prometheus}]
    reportingInterval: 5s
    overrides:
    - match: {metric: REQUEST_COUNT, mode: CLIENT}
      disabled: true
  accessLogging:
  - providers: [{name: envoy}]
    match: {mode: CLIENT}
    disabled: false
`},
		{name: "targetRefs", spec: "  targetRefs: [{kind: Gateway, group: gateway.networking.k8s.io, name: gw}]\n", wantErr: "spec.targetRefs: not supported by Strait yet"},
		{name: "access log filter", spec: "  accessLogging: [{providers: [{name: envoy}], filter: {expression: 'response.code >= 400'}}]\n",
			wantErr: "spec.accessLogging[0].filter: not supported by Strait yet"},
		{name: "tag overrides", spec: "  metrics: [{overrides: [{match: {metric: REQUEST_COUNT}, tagOverrides: {request_protocol: {operation: REMOVE}}}]}]\n",
			wantErr: "spec.metrics[0].overrides[0].tagOverrides: not supported by Strait yet"},
		{name: "custom metric", spec: "  metrics: [{overrides: [{match: {customMetric: my_metric}, disabled: true}]}]\n",
			wantErr: "spec.metrics[0].overrides[0].match.customMetric: not supported by Strait yet"},
		{name: "formatter tag", spec: "  tracing: [{customTags: {f: {formatter: {value: '%REQ(:PATH)%'}}}}]\n",
			wantErr: "spec.tracing[0].customTags[f].formatter: not supported by Strait yet"},
		{name: "istio tags", spec: "  tracing: [{enableIstioTags: false}]\n", wantErr: "spec.tracing[0].enableIstioTags: not supported by Strait yet"},
		{name: "sampling above 100", spec: "  tracing: [{randomSamplingPercentage: 101}]\n", wantErr: "spec.tracing[0].randomSamplingPercentage: 101 is not in 0..100"},
		{name: "two tracing providers", spec: "  tracing: [{providers: [{name: a}, {name: b}]}]\n", wantErr: "spec.tracing[0].providers: names 2 providers"},
		{name: "empty provider name", spec: "  accessLogging: [{providers: [{name: ''}]}]\n", wantErr: "spec.accessLogging[0].providers[0].name: must be set"},
		{name: "zero interval", spec: "  metrics: [{reportingInterval: 0s}]\n", wantErr: "spec.metrics[0].reportingInterval: must be a positive duration"},
		{name: "custom tag without type", spec: "  tracing: [{customTags: {t: {}}}]\n", wantErr: "spec.tracing[0].customTags.t: needs literal, environment or header"},
		{name: "bad selector label", spec: "  selector: {matchLabels: {'a b': c}}\n", wantErr: "spec.selector.matchLabels"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, version := range []string{"v1", "v1alpha1"} {
				res := istioconfig.ParseFile("t.yaml", []byte(strings.Replace(head, "/v1\n", "/"+version+"\n", 1)+tc.spec))
				if tc.wantErr == "" {
					if res.Err != nil || len(res.Configs) != 1 || res.Configs[0].Telemetry() == nil {
						t.Fatalf("%s: err %v, %d configs", version, res.Err, len(res.Configs))
					}
					continue
				}
				if res.Err == nil || !strings.Contains(res.Err.Error(), tc.wantErr) || len(res.Configs) != 0 {
					t.Errorf("%s: err %v, want one containing %q", version, res.Err, tc.wantErr)
				}
			}
		})
	}
}
