package inject

import (
	"istio.io/api/label"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
	corev1 "k8s.io/api/core/v1"
)

type postProcessInput struct {
	injected injectedNames
	revision string
	mesh     *meshv1alpha1.MeshConfig
	cfg      *Config
	// workload is the owning workload's name, the canonical name of last
	// resort.
	workload string
	// statusPort is the agent's status port as a string ("0" is off).
	statusPort string
}

// postProcess is injection step 5: the status annotation, the default-container
// annotations, the Prometheus metrics merge (prometheus.go) and the labels
// that mark the pod as part of the mesh.
func postProcess(pod *corev1.Pod, in postProcessInput) error {
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	a, l := pod.Annotations, pod.Labels

	a[annoSidecarStatus] = in.injected.status(in.revision)
	for k, v := range in.cfg.InjectedAnnotations {
		a[k] = v
	}

	// kubectl logs/exec pick the app, not the proxy.
	if app := firstAppContainer(pod, in.injected.containers); app != "" {
		setDefault(a, annoDefaultContainer, app)
		setDefault(a, annoDefaultLogContainer, app)
	}

	if err := applyPrometheusMerge(pod, in.mesh, in.statusPort); err != nil {
		return err
	}

	setDefault(l, label.SecurityTlsMode.Name, "istio")
	name, rev := canonicalNames(l, in.workload)
	setDefault(l, label.ServiceCanonicalName.Name, name)
	setDefault(l, label.ServiceCanonicalRevision.Name, rev)
	return nil
}

func setDefault(m map[string]string, k, v string) {
	if _, ok := m[k]; !ok {
		m[k] = v
	}
}

func firstAppContainer(pod *corev1.Pod, injected []string) string {
	for _, c := range pod.Spec.Containers {
		isInjected := false
		for _, n := range injected {
			isInjected = isInjected || n == c.Name
		}
		if !isInjected && c.Name != ProxyContainerName {
			return c.Name
		}
	}
	return ""
}

// canonicalNames are the service.istio.io/canonical-name and -revision
// values: the labels that already say so, else app.kubernetes.io/name and
// /version, else app and version, else the workload name and "latest".
func canonicalNames(l map[string]string, workload string) (string, string) {
	name := firstNonEmpty(l[label.ServiceCanonicalName.Name], l["app.kubernetes.io/name"], l["app"], workload)
	rev := firstNonEmpty(l[label.ServiceCanonicalRevision.Name], l["app.kubernetes.io/version"], l["version"], "latest")
	return name, rev
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}
