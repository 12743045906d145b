package install

import (
	"bytes"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/straitmesh/strait/internal/inject"
)

// TestInjectorReadsChartConfigMap: straitd's injector accepts the
// istio-sidecar-injector ConfigMap the chart renders, and the values reach
// the injected pod (image from global.hub/tag/proxy.image, native sidecar
// from sidecarInjectorWebhook.enableNativeSidecars).
func TestInjectorReadsChartConfigMap(t *testing.T) {
	pod := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: app\n  namespace: demo\nspec:\n  containers:\n  - name: app\n    image: app:1\n"
	for _, tc := range []struct {
		name   string
		values map[string]any
		want   []string
	}{
		{"defaults", nil, []string{"image: strait/proxy:latest", "name: istio-init", "name: istio-proxy", "istiod.istio-system.svc:15012"}},
		{"istio values", map[string]any{
			"global":                 map[string]any{"hub": "registry.example.com/mesh", "tag": "1.2.4", "proxy": map[string]any{"image": "proxyv2"}},
			"sidecarInjectorWebhook": map[string]any{"enableNativeSidecars": true},
		}, []string{"image: registry.example.com/mesh/proxyv2:1.2.4", "restartPolicy: Always"}},
		// --set makes a lone port a number: the schema takes it and
		// the injector reads it as the port.
		{"port lists from --set", setValues(t, "global.proxy.excludeInboundPorts=9999", "global.proxy.includeOutboundPorts=7777"),
			[]string{"15090,15021,9999,15020", `- "7777"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := render(t, RenderOptions{Values: tc.values})
			cm := find(t, r.Objects, "ConfigMap", "istio-sidecar-injector")
			data := map[string]string{}
			for k := range cm.Object["data"].(map[string]any) {
				data[k] = str(t, cm, "data", k)
			}
			s, err := inject.SettingsFromConfigMap(data, nil)
			if err != nil {
				t.Fatalf("straitd's injector refuses the chart's ConfigMap: %v", err)
			}
			var out bytes.Buffer
			if err := inject.New(s, inject.Options{ControlPlaneNamespace: DefaultNamespace}).IntoResourceFile(strings.NewReader(pod), &out); err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("injected pod lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}

// setValues parses --set expressions as straitctl and helm do.
func setValues(t *testing.T, sets ...string) map[string]any {
	t.Helper()
	v, err := MergeValues(nil, sets, nil)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestInjectorGivesChartGatewayItsProxy: the chart's ingress gateway
// Deployment, injected by straitd's injector with the chart's ConfigMap
// in the release's namespace, gets the proxy in router mode (strait-agent
// proxy router, the chart's image) and no init container: the gateway
// template, not the sidecar's.
func TestInjectorGivesChartGatewayItsProxy(t *testing.T) {
	r := render(t, RenderOptions{Values: setValues(t, "gateways.istio-ingressgateway.enabled=true")})
	cm := find(t, r.Objects, "ConfigMap", "istio-sidecar-injector")
	data := map[string]string{}
	for k := range cm.Object["data"].(map[string]any) {
		data[k] = str(t, cm, "data", k)
	}
	s, err := inject.SettingsFromConfigMap(data, nil)
	if err != nil {
		t.Fatal(err)
	}
	dep := find(t, r.Objects, "Deployment", "istio-ingressgateway")
	y, err := yaml.Marshal(dep.Object)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := inject.New(s, inject.Options{ControlPlaneNamespace: DefaultNamespace}).IntoResourceFile(bytes.NewReader(y), &out); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, w := range []string{"- router", "image: strait/proxy:latest", "name: istio-proxy", "net.ipv4.ip_unprivileged_port_start", "sidecar.istio.io/status"} {
		if !strings.Contains(got, w) {
			t.Errorf("injected gateway lacks %q:\n%s", w, got)
		}
	}
	for _, w := range []string{"istio-init", "- sidecar", "image: auto"} {
		if strings.Contains(got, w) {
			t.Errorf("injected gateway has %q:\n%s", w, got)
		}
	}
}
