package inject

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestInjectionPolicy(t *testing.T) {
	enabled := &Config{Policy: PolicyEnabled}
	disabled := &Config{Policy: PolicyDisabled}
	selectors := &Config{
		Policy:               PolicyEnabled,
		NeverInjectSelector:  []metav1.LabelSelector{{MatchLabels: map[string]string{"mesh": "never"}}},
		AlwaysInjectSelector: []metav1.LabelSelector{{MatchLabels: map[string]string{"mesh": "always"}}},
	}
	nsOn := map[string]string{"istio-injection": "enabled"}
	nsOff := map[string]string{"istio-injection": "disabled"}
	nsNone := map[string]string{}
	pod := func(labels, annotations map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: labels, Annotations: annotations}}
	}
	ask := func(v string) map[string]string { return map[string]string{"sidecar.istio.io/inject": v} }
	cases := []struct {
		name   string
		pod    *corev1.Pod
		ns     string
		labels map[string]string
		cfg    *Config
		want   bool
	}{
		{"namespace enabled", pod(nil, nil), "default", nsOn, enabled, true},
		{"namespace enabled, pod says false", pod(ask("false"), nil), "default", nsOn, enabled, false},
		{"namespace enabled, annotation says false", pod(nil, ask("false")), "default", nsOn, enabled, false},
		{"namespace unlabelled", pod(nil, nil), "default", nsNone, enabled, false},
		{"namespace unlabelled, label true", pod(ask("true"), nil), "default", nsNone, enabled, true},
		{"label y", pod(ask("y"), nil), "default", nsNone, enabled, true},
		{"label yes", pod(ask("yes"), nil), "default", nsNone, enabled, true},
		{"label on", pod(ask("on"), nil), "default", nsNone, enabled, true},
		{"annotation TRUE", pod(nil, ask("TRUE")), "default", nsNone, enabled, true},
		{"label wins over annotation", pod(ask("false"), ask("true")), "default", nsOn, enabled, false},
		{"unknown word is not a yes", pod(ask("maybe"), nil), "default", nsOn, enabled, false},
		{"empty value is no opinion", pod(ask(""), nil), "default", nsOn, enabled, true},
		{"namespace disabled", pod(nil, nil), "default", nsOff, enabled, false},
		{"namespace unknown (webhook selector chose it)", pod(nil, nil), "default", nil, enabled, true},
		{"policy disabled, no ask", pod(nil, nil), "default", nsOn, disabled, false},
		{"policy disabled, asks", pod(ask("true"), nil), "default", nil, disabled, true},
		{"host network", &corev1.Pod{Spec: corev1.PodSpec{HostNetwork: true}, ObjectMeta: metav1.ObjectMeta{Labels: ask("true")}}, "default", nsOn, enabled, false},
		{"kube-system", pod(ask("true"), nil), "kube-system", nsOn, enabled, false},
		{"kube-public", pod(ask("true"), nil), "kube-public", nsOn, enabled, false},
		{"kube-node-lease", pod(ask("true"), nil), "kube-node-lease", nsOn, enabled, false},
		{"local-path-storage", pod(ask("true"), nil), "local-path-storage", nsOn, enabled, false},
		{"control plane", pod(ask("true"), nil), "istio-system", nsOn, enabled, false},
		{"control plane, gateway", pod(ask("true"), map[string]string{"inject.istio.io/templates": "gateway"}), "istio-system", nsNone, enabled, true},
		{"control plane, gateway and sidecar", pod(ask("true"), map[string]string{"inject.istio.io/templates": "gateway,sidecar"}), "istio-system", nsNone, enabled, false},
		{"already injected", pod(ask("true"), map[string]string{"sidecar.istio.io/status": "{}"}), "default", nsOn, enabled, false},
		{"never selector", pod(map[string]string{"mesh": "never"}, nil), "default", nsOn, selectors, false},
		{"never selector, but asks", pod(map[string]string{"mesh": "never", "sidecar.istio.io/inject": "true"}, nil), "default", nsOn, selectors, true},
		{"always selector in unlabelled namespace", pod(map[string]string{"mesh": "always"}, nil), "default", nsNone, selectors, true},
	}
	ignored := IgnoredNamespaces
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := injectionRequired(policyInput{pod: tc.pod, namespace: tc.ns, nsLabels: tc.labels, cfg: tc.cfg, ignored: ignored, controlPlane: "istio-system"})
			if d.inject != tc.want {
				t.Errorf("inject = %v (%s), want %v", d.inject, d.reason, tc.want)
			}
			if !d.inject && d.reason == "" {
				t.Error("a skipped pod has no reason")
			}
		})
	}
}
