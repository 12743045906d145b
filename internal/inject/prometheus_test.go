package inject

import (
	"maps"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/wrapperspb"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestApplyPrometheusMerge holds the merge to Istio's applyPrometheusMerge:
// the pod's own scrape endpoint moves into the proxy's
// ISTIO_PROMETHEUS_ANNOTATIONS and its annotations point at the agent.
func TestApplyPrometheusMerge(t *testing.T) {
	merged := map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": "15020", "prometheus.io/path": "/stats/prometheus"}
	meshOff := &meshv1alpha1.MeshConfig{EnablePrometheusMerge: wrapperspb.Bool(false)}
	for _, tc := range []struct {
		name       string
		annos      map[string]string
		mesh       *meshv1alpha1.MeshConfig
		native     bool
		wantAnnos  map[string]string
		wantEnv    string // "" = no variable
		wantErr    string
		statusPort string
	}{
		{name: "no scrape annotations", wantAnnos: merged},
		{name: "port and path", annos: map[string]string{"prometheus.io/port": "9102", "prometheus.io/path": "/m"}, wantAnnos: merged,
			wantEnv: `{"scrape":"","path":"/m","port":"9102"}`},
		{name: "underscore spelling cleared too", annos: map[string]string{"prometheus_io_path": "/m", "prometheus.io/port": "9102"}, wantAnnos: merged,
			wantEnv: `{"scrape":"","path":"/m","port":"9102"}`},
		{name: "native sidecar", native: true, annos: map[string]string{"prometheus.io/port": "9102"}, wantAnnos: merged,
			wantEnv: `{"scrape":"","path":"","port":"9102"}`},
		{name: "scrape targets", annos: map[string]string{"prometheus.istio.io/scrape-targets": "9102:/a,9103"}, wantAnnos: merged,
			wantEnv: `{"scrape":"","path":"/a","port":"9102","targets":[{"port":"9102","path":"/a"},{"port":"9103","path":"/metrics"}]}`},
		{name: "scrape false", annos: map[string]string{"prometheus.io/scrape": "false", "prometheus.io/port": "9102"},
			wantAnnos: map[string]string{"prometheus.io/scrape": "false", "prometheus.io/port": "9102"}},
		{name: "mesh off", mesh: meshOff, annos: map[string]string{"prometheus.io/port": "9102"}, wantAnnos: map[string]string{"prometheus.io/port": "9102"}},
		{name: "pod on over mesh off", mesh: meshOff, annos: map[string]string{"prometheus.istio.io/merge-metrics": "true", "prometheus.io/port": "9102"},
			wantAnnos: map[string]string{"prometheus.istio.io/merge-metrics": "true", "prometheus.io/scrape": "true", "prometheus.io/port": "15020", "prometheus.io/path": "/stats/prometheus"},
			wantEnv:   `{"scrape":"","path":"","port":"9102"}`},
		{name: "already merged", annos: map[string]string{"prometheus.io/port": "15020", "prometheus.io/path": "/x"},
			wantAnnos: map[string]string{"prometheus.io/port": "15020", "prometheus.io/path": "/x"}},
		{name: "status port off", statusPort: "0", annos: map[string]string{"prometheus.io/port": "9102"}, wantAnnos: map[string]string{"prometheus.io/port": "9102"}},
		{name: "reserved port", annos: map[string]string{"prometheus.io/port": "15090"}, wantErr: "reserved for Istio (Envoy Prometheus"},
		{name: "not a port", annos: map[string]string{"prometheus.io/port": "metrics"}, wantErr: `invalid port "metrics"`},
		{name: "target without port", annos: map[string]string{"prometheus.istio.io/scrape-targets": ":/m"}, wantErr: "no port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: maps.Clone(tc.annos)}}
			if pod.Annotations == nil {
				pod.Annotations = map[string]string{}
			}
			proxy := corev1.Container{Name: ProxyContainerName, Env: []corev1.EnvVar{{Name: "POD_NAME"}}}
			pod.Spec.Containers = []corev1.Container{{Name: "app"}}
			if tc.native {
				pod.Spec.InitContainers = []corev1.Container{proxy}
			} else {
				pod.Spec.Containers = append(pod.Spec.Containers, proxy)
			}
			sp := tc.statusPort
			if sp == "" {
				sp = "15020"
			}
			err := applyPrometheusMerge(pod, tc.mesh, sp)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(pod.Annotations, tc.wantAnnos) {
				t.Errorf("annotations %v, want %v", pod.Annotations, tc.wantAnnos)
			}
			got := ""
			for _, e := range proxyContainer(pod).Env {
				if e.Name == "ISTIO_PROMETHEUS_ANNOTATIONS" {
					got = e.Value
				}
			}
			if got != tc.wantEnv {
				t.Errorf("ISTIO_PROMETHEUS_ANNOTATIONS = %q, want %q", got, tc.wantEnv)
			}
		})
	}
}
