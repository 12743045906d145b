// Package inject adds the sidecar to pods: the injection policy (which pods
// get a proxy), annotation validation, the sidecar template and its
// rendering, the strategic merge of the rendered template into the pod, the
// post-processing that labels and annotates the result, the admission
// webhook that does all of this for the API server, and the kube-inject
// transformation that does it for YAML files.
//
// The flow for one pod is the seed's serveInject (004, steps 4-1 to 4-5):
//
//	policy (4-1) → validate annotations (4-2) → estimate concurrency (4-3)
//	→ render template and merge into the pod (4-4) → post-process (4-5)
//
// An Injector holds the current Settings (injector config, values, mesh
// config) behind an atomic pointer, so a watcher can swap them while
// requests are in flight; every request renders from one consistent
// snapshot.
package inject
