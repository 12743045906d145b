package localmesh

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/testreq"
)

// TestPrometheusConfig: one job per metrics path, each pod's labels on its
// target, every string quoted so no name can break the YAML.
func TestPrometheusConfig(t *testing.T) {
	got := prometheusConfig([]ScrapeTarget{
		{Job: "sidecars", Addr: "10.0.0.2:15020", Path: "/stats/prometheus", Labels: map[string]string{"pod": "a", "namespace": "demo"}},
		{Job: "sidecars", Addr: "10.0.0.3:15020", Path: "/stats/prometheus"},
		{Job: "straitd", Addr: "127.0.0.1:15014", Path: "/metrics"},
	}, "", 2*time.Second)
	want := `global:
  scrape_interval: 2s
  scrape_timeout: 2s
scrape_configs:
- job_name: "sidecars"
  metrics_path: "/stats/prometheus"
  static_configs:
  - targets: ["10.0.0.2:15020"]
    labels:
      "namespace": "demo"
      "pod": "a"
  - targets: ["10.0.0.3:15020"]
- job_name: "straitd"
  metrics_path: "/metrics"
  static_configs:
  - targets: ["127.0.0.1:15014"]
`
	if got != want {
		t.Errorf("config:\n%s\nwant:\n%s", got, want)
	}
}

// TestPrometheusConfigKubernetesPods: with a pods file the config ends
// with Istio's kubernetes-pods job reading it, quoted; promtool (Debian's
// prometheus package) accepts the whole config.
func TestPrometheusConfigKubernetesPods(t *testing.T) {
	dir := t.TempDir()
	pods := filepath.Join(dir, `a "b".json`)
	if err := os.WriteFile(pods, []byte("[]"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := prometheusConfig([]ScrapeTarget{{Job: "straitd", Addr: "127.0.0.1:15014", Path: "/metrics"}}, pods, time.Second)
	for _, want := range []string{
		"- job_name: \"kubernetes-pods\"\n  file_sd_configs:\n  - files: [\"" + strings.ReplaceAll(pods, `"`, `\"`) + "\"]\n",
		"source_labels: [__meta_kubernetes_pod_annotation_prometheus_io_scrape]",
		"regex: (\\d+);((([0-9]+?)(\\.|$)){4})\n    replacement: $2:$1\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("config lacks %q:\n%s", want, got)
		}
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		testreq.Missing(t, "no promtool (make deps installs Debian's prometheus package)")
	}
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte(got), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "config", cfg).CombinedOutput(); err != nil {
		t.Errorf("promtool check config: %v\n%s", err, out)
	}
}

// TestPodTargets: each pod is a target group labelled as Kubernetes
// discovery labels it, label and annotation names sanitised.
func TestPodTargets(t *testing.T) {
	got, err := podTargets([]PodMeta{{Namespace: "demo", Name: "web-1", IP: "10.0.0.5", Phase: "Running",
		Labels:      map[string]string{"app": "web", "pod-template-hash": "x"},
		Annotations: map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": "15020"}}})
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"targets":["10.0.0.5"],"labels":{"__meta_kubernetes_namespace":"demo","__meta_kubernetes_pod_annotation_prometheus_io_port":"15020","__meta_kubernetes_pod_annotation_prometheus_io_scrape":"true","__meta_kubernetes_pod_ip":"10.0.0.5","__meta_kubernetes_pod_label_app":"web","__meta_kubernetes_pod_label_pod_template_hash":"x","__meta_kubernetes_pod_name":"web-1","__meta_kubernetes_pod_phase":"Running"}}]`
	if string(got) != want {
		t.Errorf("targets:\n%s\nwant:\n%s", got, want)
	}
}
