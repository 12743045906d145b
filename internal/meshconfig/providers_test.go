package meshconfig

import (
	"strings"
	"testing"
)

// TestProviders: the extension providers a Telemetry names, with Istio's
// built-in envoy and prometheus, names matched without regard to case;
// a field of them Strait does not write is refused by path.
func TestProviders(t *testing.T) {
	c, err := Parse([]byte(`extensionProviders:
- name: zipkin
  zipkin: {service: zipkin.istio-system.svc.cluster.local, port: 9411}
- name: json
  envoyFileAccessLog: {path: /tmp/a.log, logFormat: {labels: {code: "%RESPONSE_CODE%"}}}
- name: text
  envoyFileAccessLog: {path: /dev/stdout, logFormat: {text: "%RESPONSE_CODE%"}}
- name: prom
  prometheus: {}
`))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Providers
	if z, ok := p.TracingProvider("ZIPKIN"); !ok || z.Kind != TracingZipkin || z.Port != 9411 {
		t.Errorf("zipkin: %+v %v", z, ok)
	}
	if al, ok := p.AccessLogProvider("json"); !ok || !al.JSON || al.JSONFormat.GetFields()["code"].GetStringValue() != "%RESPONSE_CODE%" || al.Path != "/tmp/a.log" {
		t.Errorf("json: %+v %v", al, ok)
	}
	if al, ok := p.AccessLogProvider("text"); !ok || al.JSON || al.Text != "%RESPONSE_CODE%\n" {
		t.Errorf("text: %+v %v", al, ok)
	}
	if al, ok := p.AccessLogProvider("envoy"); !ok || al.Path != "/dev/stdout" || al.Text != DefaultAccessLogFormat {
		t.Errorf("built-in envoy: %+v %v", al, ok)
	}
	if !p.MetricsProvider("prom") || !p.MetricsProvider("prometheus") || p.MetricsProvider("json") {
		t.Error("metrics providers")
	}
	if _, ok := p.TracingProvider("json"); ok {
		t.Error("an access log provider taken for a tracer")
	}
	if d := Default().Providers; !d.MetricsProvider("prometheus") {
		t.Error("the default mesh config has no built-in prometheus")
	}

	c, err = Parse([]byte("defaultProviders: {accessLogging: [envoy]}\n"))
	if err != nil || len(c.DefaultAccessLogProviders) != 1 || c.DefaultAccessLogProviders[0] != "envoy" {
		t.Errorf("defaultProviders.accessLogging: %v %v", c, err)
	}

	// A provider named envoy replaces the built-in one.
	c, err = Parse([]byte("extensionProviders:\n- name: envoy\n  envoyFileAccessLog: {path: /var/log/a.log}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if al, _ := c.Providers.AccessLogProvider("envoy"); al.Path != "/var/log/a.log" {
		t.Errorf("envoy replaced: %+v", al)
	}

	for _, tc := range []struct{ yaml, want string }{
		{"extensionProviders:\n- name: a\n  envoyFileAccessLog: {path: /tmp/a, omitEmptyValues: true}\n", "extensionProviders[0].envoyFileAccessLog.omitEmptyValues: not supported"},
		{"extensionProviders:\n- name: a\n  envoyFileAccessLog: {}\n", "extensionProviders[0].envoyFileAccessLog.path: must be set"},
		{"extensionProviders:\n- name: a\n  envoyFileAccessLog: {path: /tmp/a, logFormat: {text: \"%NO_SUCH_OPERATOR%\"}}\n", "extensionProviders[0].envoyFileAccessLog.logFormat.text"},
		{"extensionProviders:\n- name: a\n  prometheus: {}\n- name: a\n  prometheus: {}\n", "extensionProviders[1].name"},
		{"extensionProviders:\n- name: sd\n  stackdriver: {}\n", "extensionProviders[0].stackdriver: not supported"},
	} {
		if _, err := Parse([]byte(tc.yaml)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err %v, want %q", tc.yaml, err, tc.want)
		}
	}
}
