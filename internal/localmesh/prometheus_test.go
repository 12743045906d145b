package localmesh

import (
	"testing"
	"time"
)

// TestPrometheusConfig: one job per metrics path, each pod's labels on its
// target, every string quoted so no name can break the YAML.
func TestPrometheusConfig(t *testing.T) {
	got := prometheusConfig([]ScrapeTarget{
		{Job: "sidecars", Addr: "10.0.0.2:15020", Path: "/stats/prometheus", Labels: map[string]string{"pod": "a", "namespace": "demo"}},
		{Job: "sidecars", Addr: "10.0.0.3:15020", Path: "/stats/prometheus"},
		{Job: "straitd", Addr: "127.0.0.1:15014", Path: "/metrics"},
	}, 2*time.Second)
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
