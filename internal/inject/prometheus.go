package inject

import (
	"encoding/json"
	"fmt"
	"strconv"

	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
	corev1 "k8s.io/api/core/v1"

	"github.com/straitmesh/strait/internal/promscrape"
)

// MergedMetricsPath is served by the agent on the status port (15020):
// the proxy's, the agent's and the app's metrics in one exposition.
const MergedMetricsPath = "/stats/prometheus"

// applyPrometheusMerge is Istio's metrics merge (pkg/kube/inject/webhook.go,
// applyPrometheusMerge): unless the pod's prometheus.io/scrape is false or
// the merge is off (the pod's prometheus.istio.io/merge-metrics, else the
// mesh's enablePrometheusMerge, default on), the pod's own scrape
// annotations go to the proxy container as ISTIO_PROMETHEUS_ANNOTATIONS
// (JSON), so the agent scrapes the app where Prometheus would have, and
// the annotations are rewritten to the agent's merged endpoint. A pod
// whose prometheus.io/port already names the status port was injected
// before and is left alone; a scrape port the agent must not scrape (its
// own, one of Istio's, not a port) fails the injection, as in Istio.
func applyPrometheusMerge(pod *corev1.Pod, mesh *meshv1alpha1.MeshConfig, statusPort string) error {
	port, err := strconv.Atoi(statusPort)
	if err != nil || port == 0 || !prometheusScrape(pod.Annotations) || !prometheusMergeOn(mesh, pod.Annotations) {
		return nil
	}
	for k, v := range pod.Annotations {
		if promscrape.IsPortAnnotation(k) && v == statusPort {
			return nil
		}
	}
	scrape, err := promscrape.FromAnnotations(pod.Annotations)
	if err != nil {
		return err
	}
	if scrape, err = scrape.ForInjection(port); err != nil {
		return err
	}
	if proxy := proxyContainer(pod); proxy != nil && !scrape.IsEmpty() {
		by, err := json.Marshal(scrape)
		if err != nil {
			return fmt.Errorf("encode %s: %w", promscrape.EnvVar, err)
		}
		proxy.Env = append(proxy.Env, corev1.EnvVar{Name: promscrape.EnvVar, Value: string(by)})
	}
	// Every spelling of the annotations goes (prometheus_io_path as well
	// as prometheus.io/path), or Prometheus would pick one at random.
	for k := range pod.Annotations {
		if promscrape.IsScrapeAnnotation(k) {
			delete(pod.Annotations, k)
		}
	}
	pod.Annotations[promscrape.AnnotationPort] = statusPort
	pod.Annotations[promscrape.AnnotationPath] = MergedMetricsPath
	pod.Annotations[promscrape.AnnotationScrape] = "true"
	return nil
}

// prometheusScrape is false only when the pod's prometheus.io/scrape
// says so (getPrometheusScrape).
func prometheusScrape(a map[string]string) bool {
	for k, v := range a {
		if promscrape.IsScrapeFlagAnnotation(k) {
			if on, err := strconv.ParseBool(v); err == nil {
				return on
			}
		}
	}
	return true
}

// prometheusMergeOn is the pod's prometheus.istio.io/merge-metrics, else
// the mesh's enablePrometheusMerge, else true (enablePrometheusMerge).
func prometheusMergeOn(mesh *meshv1alpha1.MeshConfig, a map[string]string) bool {
	if v, ok := a[annoPrometheusMerge]; ok {
		if on, err := strconv.ParseBool(v); err == nil {
			return on
		}
	}
	if v := mesh.GetEnablePrometheusMerge(); v != nil {
		return v.GetValue()
	}
	return true
}

// proxyContainer is the injected istio-proxy container, among the
// containers or (native sidecars) the init containers.
func proxyContainer(pod *corev1.Pod) *corev1.Container {
	for _, cs := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range cs {
			if cs[i].Name == ProxyContainerName {
				return &cs[i]
			}
		}
	}
	return nil
}
