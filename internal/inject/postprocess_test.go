package inject

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/types/known/wrapperspb"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPostProcess(t *testing.T) {
	merge := func(on bool) *meshv1alpha1.MeshConfig {
		return &meshv1alpha1.MeshConfig{EnablePrometheusMerge: wrapperspb.Bool(on)}
	}
	pod := func(annos, labels map[string]string, containers ...string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: annos, Labels: labels}}
		for _, c := range containers {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: c})
		}
		return p
	}
	cases := []struct {
		name       string
		pod        *corev1.Pod
		mesh       *meshv1alpha1.MeshConfig
		statusPort string
		injected   []string
		want       map[string]string // annotations and labels that must be there ("" = absent)
	}{
		{"defaults", pod(nil, nil, "app", ProxyContainerName), nil, "15020", []string{ProxyContainerName}, map[string]string{
			"prometheus.io/scrape": "true", "prometheus.io/port": "15020", "prometheus.io/path": "/stats/prometheus",
			annoDefaultContainer: "app", annoDefaultLogContainer: "app", "x-injected": "yes",
			"security.istio.io/tlsMode": "istio", "service.istio.io/canonical-name": "wl", "service.istio.io/canonical-revision": "latest",
		}},
		{"mesh turns merge off", pod(nil, nil, "app"), merge(false), "15020", nil, map[string]string{"prometheus.io/scrape": ""}},
		{"mesh turns merge on", pod(nil, nil, "app"), merge(true), "15020", nil, map[string]string{"prometheus.io/scrape": "true"}},
		{"pod turns merge off", pod(map[string]string{annoPrometheusMerge: "false"}, nil, "app"), nil, "15020", nil, map[string]string{"prometheus.io/scrape": ""}},
		{"pod keeps merge on", pod(map[string]string{annoPrometheusMerge: "true"}, nil, "app"), nil, "15020", nil, map[string]string{"prometheus.io/scrape": "true"}},
		{"no status port", pod(nil, nil, "app"), nil, "0", nil, map[string]string{"prometheus.io/scrape": ""}},
		{"empty status port", pod(nil, nil, "app"), nil, "", nil, map[string]string{"prometheus.io/scrape": ""}},
		{"pod's own scrape config rewritten", pod(map[string]string{"prometheus.io/port": "9090"}, nil, "app"), nil, "15020", nil,
			map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": "15020"}},
		{"first app container after injected ones", pod(nil, nil, "istio-init-ish", ProxyContainerName, "web", "db"), nil, "15020", []string{"istio-init-ish"},
			map[string]string{annoDefaultContainer: "web", annoDefaultLogContainer: "web"}},
		{"no app container", pod(nil, nil, ProxyContainerName), nil, "15020", nil, map[string]string{annoDefaultContainer: ""}},
		{"pod's own default container", pod(map[string]string{annoDefaultContainer: "db"}, nil, "web", "db"), nil, "15020", nil,
			map[string]string{annoDefaultContainer: "db", annoDefaultLogContainer: "web"}},
		{"canonical names from app labels", pod(nil, map[string]string{"app": "a", "version": "v1"}, "app"), nil, "15020", nil,
			map[string]string{"service.istio.io/canonical-name": "a", "service.istio.io/canonical-revision": "v1"}},
		{"kubernetes labels win over app/version", pod(nil, map[string]string{"app": "a", "version": "v1", "app.kubernetes.io/name": "k", "app.kubernetes.io/version": "2"}, "app"), nil, "15020", nil,
			map[string]string{"service.istio.io/canonical-name": "k", "service.istio.io/canonical-revision": "2"}},
		{"canonical labels kept", pod(nil, map[string]string{"service.istio.io/canonical-name": "c", "app": "a", "security.istio.io/tlsMode": "disabled"}, "app"), nil, "15020", nil,
			map[string]string{"service.istio.io/canonical-name": "c", "security.istio.io/tlsMode": "disabled"}},
	}
	for _, tc := range cases {
		if err := postProcess(tc.pod, postProcessInput{
			injected: injectedNames{containers: tc.injected}, mesh: tc.mesh, workload: "wl", statusPort: tc.statusPort,
			cfg: &Config{InjectedAnnotations: map[string]string{"x-injected": "yes"}},
		}); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		if tc.pod.Annotations[annoSidecarStatus] == "" {
			t.Errorf("%s: no status annotation", tc.name)
		}
		for k, want := range tc.want {
			got, ok := tc.pod.Annotations[k]
			if !ok {
				got, ok = tc.pod.Labels[k]
			}
			if want == "" && ok || want != "" && got != want {
				t.Errorf("%s: %s = %q (set: %v), want %q", tc.name, k, got, ok, want)
			}
		}
	}
}

func TestProxyResources(t *testing.T) {
	values := Values{"global": map[string]any{"proxy": map[string]any{"resources": map[string]any{
		"requests": map[string]any{"cpu": "100m", "memory": "128Mi"},
		"limits":   map[string]any{"cpu": "2", "memory": "bad"},
	}}}}
	str := func(rr corev1.ResourceRequirements) string {
		q := func(l corev1.ResourceList, n corev1.ResourceName) string {
			if v, ok := l[n]; ok {
				return v.String()
			}
			return "-"
		}
		return fmt.Sprintf("req %s/%s lim %s/%s", q(rr.Requests, "cpu"), q(rr.Requests, "memory"), q(rr.Limits, "cpu"), q(rr.Limits, "memory"))
	}
	cases := []struct {
		annos map[string]string
		want  string
	}{
		{nil, "req 100m/128Mi lim 2/-"},
		{map[string]string{annoProxyCPU: "300m"}, "req 300m/- lim -/-"},
		{map[string]string{annoProxyCPULimit: "1"}, "req -/- lim 1/-"},
		{map[string]string{annoProxyMemory: "1Gi"}, "req -/1Gi lim -/-"},
		{map[string]string{annoProxyMemoryLimit: "2Gi", annoProxyCPU: "x"}, "req -/- lim -/2Gi"},
	}
	for _, tc := range cases {
		if got := str(proxyResources(tc.annos, values)); got != tc.want {
			t.Errorf("proxyResources(%v) = %s, want %s", tc.annos, got, tc.want)
		}
	}
	if got := str(proxyResources(nil, Values{})); got != "req -/- lim -/-" {
		t.Errorf("no values: %s", got)
	}
}
