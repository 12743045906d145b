package localmesh

// The app metrics of a local pod, declared as a Kubernetes pod declares
// them: the WorkloadEntry's prometheus.io/port and /path annotations (or
// prometheus.istio.io/scrape-targets). Istio's injector would move them
// into the agent's ISTIO_PROMETHEUS_ANNOTATIONS and point Prometheus at
// 15020; local up does the same for the pod it starts, so the agent merges
// the app's metrics into 15020's /stats/prometheus.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/straitmesh/strait/internal/promscrape"
)

// StatusPort is where each pod's agent serves /healthz/ready and the
// merged metrics (/stats/prometheus).
const StatusPort = 15020

// annotationMergeMetrics turns the merge off for one workload, as on a pod.
const annotationMergeMetrics = "prometheus.istio.io/merge-metrics"

// appMetricsFromAnnotations is the ISTIO_PROMETHEUS_ANNOTATIONS value for
// a WorkloadEntry's annotations ("" for none) and the port its app serves
// metrics on (0 for none), with the injector's rules and errors.
func appMetricsFromAnnotations(a map[string]string) (string, int, error) {
	if v, ok := a[annotationMergeMetrics]; ok {
		if on, err := strconv.ParseBool(v); err == nil && !on {
			return "", 0, nil
		}
	}
	scrape, err := promscrape.FromAnnotations(a)
	if err != nil {
		return "", 0, err
	}
	if scrape.IsEmpty() || scrape.Scrape == "false" {
		return "", 0, nil
	}
	if scrape, err = scrape.ForInjection(StatusPort); err != nil {
		return "", 0, err
	}
	by, err := json.Marshal(scrape)
	if err != nil {
		return "", 0, err
	}
	port, _ := strconv.Atoi(scrape.Port)
	if scrape.Port == "" {
		port, _ = strconv.Atoi(promscrape.DefaultPort)
	}
	return string(by), port, nil
}

// Metrics fetches the pod's merged metrics from its agent
// (127.0.0.1:15020/stats/prometheus), as Prometheus scrapes them: the
// proxy's, the agent's and the app's.
func (p *Pod) Metrics(ctx context.Context) ([]byte, error) {
	client := p.HTTPClient()
	defer client.CloseIdleConnections()
	url := fmt.Sprintf("http://127.0.0.1:%d/stats/prometheus", StatusPort)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("agent metrics: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("agent metrics: %s", resp.Status)
	}
	return body, nil
}
