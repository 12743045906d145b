package inject

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Names the policy reads.
const (
	// NamespaceInjectionLabel enables injection for a namespace's pods
	// when it is "enabled" and disables it when it is "disabled".
	NamespaceInjectionLabel = "istio-injection"
	annoInject              = "sidecar.istio.io/inject"
)

// IgnoredNamespaces are never injected: Kubernetes' own and the local
// provisioner's. The control plane's namespace is added by the Injector.
var IgnoredNamespaces = []string{"kube-system", "kube-public", "kube-node-lease", "local-path-storage"}

// decision is the outcome of the policy (injection step 1): inject, or why not.
type decision struct {
	inject bool
	reason string
}

// policyInput is what the policy looks at.
type policyInput struct {
	pod       *corev1.Pod
	namespace string
	// nsLabels are the namespace's labels; nil when unknown (the webhook
	// without a namespace lister, kube-inject), in which case the caller
	// is trusted to have chosen the namespace: the API server's
	// namespaceSelector did, and kube-inject is an explicit request.
	nsLabels map[string]string
	cfg      *Config
	// ignored are the namespaces never injected.
	ignored []string
	// controlPlane is the control plane's namespace: only gateway pods
	// (inject.istio.io/templates: gateway) are injected there, as the
	// ingress and egress gateways Istio installs beside istiod.
	controlPlane string
}

// asksGatewayOnly reports whether pod asks for the gateway template alone.
func asksGatewayOnly(pod *corev1.Pod) bool {
	t, ok := pod.Annotations[annoInjectTemplates]
	return ok && slices.Equal(splitList(t), []string{GatewayTemplateName})
}

// injectionRequired decides whether pod gets a sidecar. It never fails: a
// pod it does not inject is still admitted.
func injectionRequired(in policyInput) decision {
	pod := in.pod
	if pod.Spec.HostNetwork {
		return decision{reason: "pod uses the host network"}
	}
	for _, ns := range in.ignored {
		if in.namespace == ns {
			return decision{reason: "namespace " + ns + " is never injected"}
		}
	}
	if in.controlPlane != "" && in.namespace == in.controlPlane && !asksGatewayOnly(pod) {
		return decision{reason: "namespace " + in.namespace + " is the control plane's: only gateway pods (" + annoInjectTemplates + ": " + GatewayTemplateName + ") are injected there"}
	}
	if _, ok := pod.Annotations[annoSidecarStatus]; ok {
		return decision{reason: "pod is already injected (" + annoSidecarStatus + " is set)"}
	}

	// The label wins over the annotation, as in Istio (the label is what
	// the webhook's objectSelector sees).
	ask, asked := pod.Labels[annoInject]
	if !asked {
		ask, asked = pod.Annotations[annoInject]
	}
	explicit, explicitYes := false, false
	if asked && strings.TrimSpace(ask) != "" {
		switch strings.ToLower(strings.TrimSpace(ask)) {
		case "y", "yes", "true", "on":
			explicit, explicitYes = true, true
		default:
			// "false", "no", anything else: only the yes-words inject.
			explicit = true
		}
	}
	if explicit && !explicitYes {
		return decision{reason: annoInject + " is " + quoteString(ask)}
	}
	if explicitYes {
		return decision{inject: true}
	}

	// No explicit request: the selectors of the injector config, then the
	// namespace, then the policy.
	if matchesAny(in.cfg.NeverInjectSelector, pod.Labels) {
		return decision{reason: "pod matches neverInjectSelector"}
	}
	if matchesAny(in.cfg.AlwaysInjectSelector, pod.Labels) {
		return decision{inject: true}
	}
	if in.nsLabels != nil {
		switch in.nsLabels[NamespaceInjectionLabel] {
		case "enabled":
		case "disabled":
			return decision{reason: "namespace has " + NamespaceInjectionLabel + "=disabled"}
		default:
			return decision{reason: "neither " + annoInject + " nor the namespace label " + NamespaceInjectionLabel + "=enabled asks for injection"}
		}
	}
	if in.cfg.Policy == PolicyDisabled {
		return decision{reason: "injection policy is disabled and the pod does not ask with " + annoInject}
	}
	return decision{inject: true}
}

func matchesAny(selectors []metav1.LabelSelector, podLabels map[string]string) bool {
	for i := range selectors {
		sel, err := metav1.LabelSelectorAsSelector(&selectors[i])
		if err != nil || sel.Empty() {
			// NewSettings refused invalid selectors; an empty one would
			// match everything, which nobody means.
			continue
		}
		if sel.Matches(labels.Set(podLabels)) {
			return true
		}
	}
	return false
}

func quoteString(s string) string { return `"` + s + `"` }
