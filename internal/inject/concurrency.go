package inject

import (
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// DefaultConcurrency is the proxy's worker count when nothing says
// otherwise.
const DefaultConcurrency = 2

// EstimateConcurrency is step (3) of injection: a positive ProxyConfig concurrency wins;
// otherwise the first CPU figure present among the
// sidecar.istio.io/proxyCPULimit annotation, the sidecar.istio.io/proxyCPU
// annotation, the proxy's CPU limit and the proxy's CPU request (from the
// values) gives ceil(millicores/1000), at least 1; otherwise 2.
func EstimateConcurrency(pc *meshv1alpha1.ProxyConfig, annotations map[string]string, values Values) int {
	if c := pc.GetConcurrency(); c != nil && c.GetValue() > 0 {
		return int(c.GetValue())
	}
	for _, s := range []string{
		annotations[annoProxyCPULimit],
		annotations[annoProxyCPU],
		values.String("global.proxy.resources.limits.cpu"),
		values.String("global.proxy.resources.requests.cpu"),
	} {
		if s == "" {
			continue
		}
		q, err := resource.ParseQuantity(s)
		if err != nil || q.Sign() <= 0 {
			continue
		}
		return cpuWorkers(q)
	}
	return DefaultConcurrency
}

func cpuWorkers(q resource.Quantity) int {
	m := q.MilliValue()
	n := int((m + 999) / 1000)
	return max(n, 1)
}

// proxyResources are the sidecar's requests and limits: when any of the
// proxy resource annotations is set, those annotations alone (so a request
// raised by annotation never sits above a limit from the values); else the
// values' global.proxy.resources.
func proxyResources(annotations map[string]string, values Values) corev1.ResourceRequirements {
	var rr corev1.ResourceRequirements
	set := func(list *corev1.ResourceList, name corev1.ResourceName, s string) {
		if s == "" {
			return
		}
		q, err := resource.ParseQuantity(s)
		if err != nil {
			return
		}
		if *list == nil {
			*list = corev1.ResourceList{}
		}
		(*list)[name] = q
	}
	_, a := annotations[annoProxyCPU]
	_, b := annotations[annoProxyCPULimit]
	_, c := annotations[annoProxyMemory]
	_, d := annotations[annoProxyMemoryLimit]
	if a || b || c || d {
		set(&rr.Requests, corev1.ResourceCPU, annotations[annoProxyCPU])
		set(&rr.Requests, corev1.ResourceMemory, annotations[annoProxyMemory])
		set(&rr.Limits, corev1.ResourceCPU, annotations[annoProxyCPULimit])
		set(&rr.Limits, corev1.ResourceMemory, annotations[annoProxyMemoryLimit])
		return rr
	}
	set(&rr.Requests, corev1.ResourceCPU, values.String("global.proxy.resources.requests.cpu"))
	set(&rr.Requests, corev1.ResourceMemory, values.String("global.proxy.resources.requests.memory"))
	set(&rr.Limits, corev1.ResourceCPU, values.String("global.proxy.resources.limits.cpu"))
	set(&rr.Limits, corev1.ResourceMemory, values.String("global.proxy.resources.limits.memory"))
	return rr
}
