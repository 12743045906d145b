package inject

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"

	"google.golang.org/protobuf/proto"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Container names the default template injects.
const (
	ProxyContainerName = "istio-proxy"
	InitContainerName  = "istio-init"
)

// Options are fixed for an Injector's lifetime.
type Options struct {
	// Revision is the control plane revision recorded in the status
	// annotation; "" is written as "default".
	Revision string
	// ControlPlaneNamespace is injected only for gateway pods
	// (inject.istio.io/templates: gateway; default "istio-system").
	ControlPlaneNamespace string
	// NativeSidecars is ENABLE_NATIVE_SIDECARS: inject istio-proxy as a
	// native sidecar into every pod, not only those that ask with
	// sidecar.istio.io/nativeSidecar: "true".
	NativeSidecars bool
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Injector injects sidecars from its current Settings. It is safe for
// concurrent use; Update swaps the settings atomically.
type Injector struct {
	// Set at creation, read-only.
	opts         Options
	ignored      []string
	controlPlane string
	log          *slog.Logger

	settings atomic.Pointer[Settings]
}

// New returns an Injector that starts with s (nil is DefaultSettings).
func New(s *Settings, opts Options) *Injector {
	if s == nil {
		s = DefaultSettings()
	}
	if opts.ControlPlaneNamespace == "" {
		opts.ControlPlaneNamespace = "istio-system"
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	i := &Injector{
		opts:         opts,
		ignored:      slices.Clone(IgnoredNamespaces),
		controlPlane: opts.ControlPlaneNamespace,
		log:          opts.Logger.With("component", "inject"),
	}
	i.settings.Store(s)
	return i
}

// Update replaces the settings; requests already running finish with the
// old ones.
func (i *Injector) Update(s *Settings) { i.settings.Store(s) }

// Settings returns the current snapshot.
func (i *Injector) Settings() *Settings { return i.settings.Load() }

// Request is one pod to inject.
type Request struct {
	// Pod is the pod as submitted; it is not modified.
	Pod *corev1.Pod
	// Namespace is used when Pod.Namespace is empty (the API server sends
	// it beside the object); "" is "default".
	Namespace string
	// Workload and WorkloadMeta name what owns the pod (a Deployment for
	// kube-inject of a Deployment). Zero: derived from the pod's owner
	// references, else the pod itself.
	Workload     metav1.TypeMeta
	WorkloadMeta metav1.ObjectMeta
	// NamespaceLabels are the namespace's labels, nil when unknown: then
	// the caller is trusted to have chosen the namespace (the webhook's
	// namespaceSelector, or an explicit kube-inject).
	NamespaceLabels map[string]string
}

// Result is the outcome of Inject.
type Result struct {
	// Pod is the injected pod, nil when the pod is not injected.
	Pod *corev1.Pod
	// Skipped says why the pod is not injected (the policy, injection step 1).
	Skipped string
}

// Inject runs the five injection steps (see the package doc) for one pod. A pod the policy skips is a
// Result with Skipped set and no error; an invalid annotation or a template
// that fails is an error, and the pod must be refused.
func (i *Injector) Inject(req Request) (Result, error) {
	s := i.Settings()
	pod := req.Pod.DeepCopy()
	ns := pod.Namespace
	if ns == "" {
		ns = req.Namespace
	}
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	d := injectionRequired(policyInput{pod: pod, namespace: ns, nsLabels: req.NamespaceLabels, cfg: s.Config, ignored: i.ignored, controlPlane: i.controlPlane})
	if !d.inject {
		return Result{Skipped: d.reason}, nil
	}
	if err := ValidateAnnotations(pod.Annotations); err != nil {
		return Result{}, err
	}

	wk, wm := req.Workload, req.WorkloadMeta
	if wk.Kind == "" || wm.Name == "" {
		wk, wm = workloadOf(pod, ns)
	}
	if wm.Namespace == "" {
		wm.Namespace = ns
	}
	pc := mergedProxyConfig(s.Mesh, pod.Annotations)
	native := i.opts.NativeSidecars || s.Values.Bool("sidecarInjectorWebhook.enableNativeSidecars")
	if v, ok := pod.Annotations[annoNativeSidecar]; ok {
		native = isYes(v)
	}
	data := &TemplateData{
		TypeMeta:             wk,
		DeploymentMeta:       wm,
		ObjectMeta:           pod.ObjectMeta,
		Spec:                 pod.Spec,
		ProxyConfig:          pc,
		MeshConfig:           s.Mesh,
		Values:               s.Values,
		Revision:             i.opts.Revision,
		ProxyImage:           proxyImage(s.Values, pc, pod.Annotations),
		EstimatedConcurrency: EstimateConcurrency(pc, pod.Annotations, s.Values),
		ProxyResources:       proxyResources(pod.Annotations, s.Values),
		NativeSidecars:       native,
	}
	data.ObjectMeta.Namespace = ns

	names := s.Config.DefaultTemplates
	if t, ok := pod.Annotations[annoInjectTemplates]; ok {
		names = splitList(t)
	}
	var injected injectedNames
	out := pod
	for _, name := range names {
		t := s.templates[name]
		if t == nil {
			return Result{}, fmt.Errorf("annotation %s: %q is not a defined template (%s)", annoInjectTemplates, name, strings.Join(sortedKeys(s.Config.Templates), ", "))
		}
		tp, err := render(t, data)
		if err != nil {
			return Result{}, err
		}
		if native {
			toNativeSidecar(tp)
		}
		injected.add(tp)
		if out, err = mergeTemplate(out, tp); err != nil {
			return Result{}, fmt.Errorf("merge template %q: %w", name, err)
		}
	}
	reorder(out, &injected)
	if err := postProcess(out, postProcessInput{
		injected:   injected,
		revision:   i.opts.Revision,
		mesh:       s.Mesh,
		cfg:        s.Config,
		workload:   wm.Name,
		statusPort: annotation(pod.ObjectMeta, annoStatusPort, s.Values.Get("global.proxy.statusPort")),
	}); err != nil {
		return Result{}, err
	}
	return Result{Pod: out}, nil
}

// mergedProxyConfig is Istio's built-in default (REDIRECT, 15020) < mesh
// defaultConfig < the pod's proxy.istio.io/config.
func mergedProxyConfig(mesh *meshv1alpha1.MeshConfig, annotations map[string]string) *meshv1alpha1.ProxyConfig {
	pc := &meshv1alpha1.ProxyConfig{
		StatusPort:       15020,
		InterceptionMode: meshv1alpha1.ProxyConfig_REDIRECT,
	}
	if dc := mesh.GetDefaultConfig(); dc != nil {
		proto.Merge(pc, dc)
	}
	if s, ok := annotations[annoProxyConfig]; ok {
		if a, err := parseProxyConfig(s); err == nil {
			proto.Merge(pc, a)
		}
	}
	return pc
}

// proxyImage is sidecar.istio.io/proxyImage, else ProxyConfig.image, else
// the values' image: taken as is when it contains a "/", else
// HUB/IMAGE:TAG.
func proxyImage(values Values, pc *meshv1alpha1.ProxyConfig, annotations map[string]string) string {
	if img := annotations[annoProxyImage]; img != "" {
		return img
	}
	img := values.String("global.proxy.image")
	if t := pc.GetImage().GetImageType(); t != "" && t != "default" {
		img += "-" + t
	}
	if strings.Contains(img, "/") {
		return img
	}
	hub, tag := values.String("global.hub"), values.String("global.tag")
	if hub != "" {
		img = hub + "/" + img
	}
	if tag != "" {
		img += ":" + tag
	}
	return img
}

func isYes(s string) bool {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "y", "yes", "true", "on":
		return true
	}
	return false
}

var cronJobSuffix = regexp.MustCompile(`-[0-9]{6,}$`)

// workloadOf derives the owning workload from a pod's controller
// reference, as Istio does: a ReplicaSet named after its pod-template-hash
// is its Deployment's, a Job named NAME-<digits> is its CronJob's.
func workloadOf(pod *corev1.Pod, ns string) (metav1.TypeMeta, metav1.ObjectMeta) {
	name := pod.Name
	if name == "" {
		name = strings.TrimSuffix(pod.GenerateName, "-")
	}
	meta := metav1.ObjectMeta{Name: name, Namespace: ns}
	tm := metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return tm, meta
	}
	meta.Name = ref.Name
	tm = metav1.TypeMeta{APIVersion: ref.APIVersion, Kind: ref.Kind}
	switch ref.Kind {
	case "ReplicaSet":
		if h := pod.Labels["pod-template-hash"]; h != "" && strings.HasSuffix(ref.Name, "-"+h) {
			meta.Name = strings.TrimSuffix(ref.Name, "-"+h)
			tm = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}
		}
	case "Job":
		if loc := cronJobSuffix.FindStringIndex(ref.Name); loc != nil && loc[0] > 0 {
			meta.Name = ref.Name[:loc[0]]
			tm = metav1.TypeMeta{APIVersion: "batch/v1", Kind: "CronJob"}
		}
	}
	return tm, meta
}

// injectedNames records what the templates added, for the status
// annotation and for ordering.
type injectedNames struct {
	initContainers, containers, volumes, imagePullSecrets []string
}

func (n *injectedNames) add(tp *corev1.Pod) {
	for _, c := range tp.Spec.InitContainers {
		n.initContainers = appendNew(n.initContainers, c.Name)
	}
	for _, c := range tp.Spec.Containers {
		n.containers = appendNew(n.containers, c.Name)
	}
	for _, v := range tp.Spec.Volumes {
		n.volumes = appendNew(n.volumes, v.Name)
	}
	for _, s := range tp.Spec.ImagePullSecrets {
		n.imagePullSecrets = appendNew(n.imagePullSecrets, s.Name)
	}
}

func appendNew(list []string, s string) []string {
	for _, e := range list {
		if e == s {
			return list
		}
	}
	return append(list, s)
}

// sidecarStatus is the sidecar.istio.io/status annotation; field order is
// Istio's.
type sidecarStatus struct {
	InitContainers   []string `json:"initContainers"`
	Containers       []string `json:"containers"`
	Volumes          []string `json:"volumes"`
	ImagePullSecrets []string `json:"imagePullSecrets"`
	Revision         string   `json:"revision"`
}

func (n injectedNames) status(revision string) string {
	if revision == "" {
		revision = "default"
	}
	b, _ := json.Marshal(sidecarStatus{
		InitContainers:   n.initContainers,
		Containers:       n.containers,
		Volumes:          n.volumes,
		ImagePullSecrets: n.imagePullSecrets,
		Revision:         revision,
	})
	return string(b)
}
