// Package inject adds the sidecar to pods: the injection policy (which pods
// get a proxy), annotation validation, the sidecar template and its
// rendering, the strategic merge of the rendered template into the pod, the
// post-processing that labels and annotates the result, the admission
// webhook that does all of this for the API server, and the kube-inject
// transformation that does it for YAML files.
//
// The flow for one pod follows Istio's injector (pkg/kube/inject/webhook.go,
// injectPod and its callees), in five steps that the code's comments name:
//
//	(1) policy → (2) validate annotations → (3) estimate concurrency
//	→ (4) render the template and merge it into the pod → (5) post-process
//
// An Injector holds the current Settings (injector config, values, mesh
// config) behind an atomic pointer, so a watcher can swap them while
// requests are in flight; every request renders from one consistent
// snapshot.
package inject
