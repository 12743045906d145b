package install

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// FieldManager is the server-side apply field manager of straitctl.
const FieldManager = "straitctl"

// Client is what Apply, Wait and Uninstall need from the cluster.
type Client struct {
	Dynamic dynamic.Interface
	mapper  *restmapper.DeferredDiscoveryRESTMapper
	// Out receives progress lines; nil discards them.
	Out io.Writer
	// PollInterval is how often Wait and the CRD wait look (default 1s).
	PollInterval time.Duration
}

// Client-side rate limits when cfg sets none: client-go's default (5
// requests a second, bursts of 10) makes an install of some 30 objects,
// their discovery and the waits' polls queue behind each other.
const (
	defaultQPS   = 50
	defaultBurst = 100
)

// NewClient builds a Client for cfg.
func NewClient(cfg *rest.Config, out io.Writer) (*Client, error) {
	if cfg.QPS == 0 && cfg.Burst == 0 && cfg.RateLimiter == nil {
		cfg = rest.CopyConfig(cfg)
		cfg.QPS, cfg.Burst = defaultQPS, defaultBurst
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Client{
		Dynamic: dyn,
		mapper:  restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc)),
		Out:     out,
	}, nil
}

func (c *Client) printf(format string, args ...any) {
	if c.Out != nil {
		fmt.Fprintf(c.Out, format, args...)
	}
}

func (c *Client) interval() time.Duration {
	if c.PollInterval > 0 {
		return c.PollInterval
	}
	return time.Second
}

// resource returns the dynamic client of o's kind, namespaced when the
// kind is.
func (c *Client) resource(o *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := o.GroupVersionKind()
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("%s %s: the API server does not serve this kind: %w", gvk.Kind, o.GetName(), err)
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return c.Dynamic.Resource(m.Resource).Namespace(o.GetNamespace()), nil
	}
	return c.Dynamic.Resource(m.Resource), nil
}

var (
	namespaceGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	crdGVR       = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	deployGVR    = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
)

// Apply creates the namespace when it is missing, applies the CRDs and
// waits until they are served, then applies the other objects, all with
// server-side apply under FieldManager (forcing ownership of the fields
// the chart sets; fields others own, such as the webhook's caBundle that
// straitd writes, are left alone).
func (c *Client) Apply(ctx context.Context, r Rendered, namespace string) error {
	if err := c.checkSingleInstall(ctx, r, namespace, "install"); err != nil {
		return err
	}
	existing, err := c.Dynamic.Resource(namespaceGVR).Get(ctx, namespace, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		ns := &unstructured.Unstructured{}
		ns.SetAPIVersion("v1")
		ns.SetKind("Namespace")
		ns.SetName(namespace)
		if _, err := c.Dynamic.Resource(namespaceGVR).Create(ctx, ns, metav1.CreateOptions{FieldManager: FieldManager}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create namespace %s: %w", namespace, err)
		}
		c.printf("namespace/%s created\n", namespace)
	} else if err != nil {
		return fmt.Errorf("namespace %s: %w", namespace, err)
	} else if phase, _, _ := unstructured.NestedString(existing.Object, "status", "phase"); phase == "Terminating" {
		// The API server refuses new objects in it; say so once, before
		// the CRDs are applied, rather than fail on the first object.
		return fmt.Errorf("namespace %s is being deleted (Terminating): wait until `kubectl get namespace %s` finds nothing, then install again, or install into another namespace with -n", namespace, namespace)
	}
	for _, o := range r.CRDs {
		if _, err := c.Dynamic.Resource(crdGVR).Apply(ctx, o.GetName(), o, metav1.ApplyOptions{FieldManager: FieldManager, Force: true}); err != nil {
			return fmt.Errorf("apply CustomResourceDefinition %s: %w", o.GetName(), err)
		}
	}
	if len(r.CRDs) > 0 {
		c.printf("%d CustomResourceDefinitions applied\n", len(r.CRDs))
		if err := c.waitCRDs(ctx, r.CRDs); err != nil {
			return err
		}
		c.mapper.Reset()
	}
	for _, o := range r.Objects {
		res, err := c.resource(o)
		if err != nil {
			return err
		}
		if _, err := res.Apply(ctx, o.GetName(), o, metav1.ApplyOptions{FieldManager: FieldManager, Force: true}); err != nil {
			return fmt.Errorf("apply %s %s: %w", o.GetKind(), o.GetName(), err)
		}
		c.printf("%s/%s applied\n", o.GetKind(), o.GetName())
	}
	return nil
}

// crdTimeout bounds the wait for the API server to serve new CRDs (a
// second or two normally).
const crdTimeout = 2 * time.Minute

// waitCRDs waits until every CRD is Established.
func (c *Client) waitCRDs(ctx context.Context, crds []*unstructured.Unstructured) error {
	ctx, cancel := context.WithTimeout(ctx, crdTimeout)
	defer cancel()
	for _, crd := range crds {
		for {
			u, err := c.Dynamic.Resource(crdGVR).Get(ctx, crd.GetName(), metav1.GetOptions{})
			if err == nil && established(u) {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("CustomResourceDefinition %s not established: %w", crd.GetName(), ctx.Err())
			case <-time.After(c.interval()):
			}
		}
	}
	return nil
}

func established(u *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, cd := range conds {
		m, _ := cd.(map[string]any)
		if m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// ErrNotReady is wrapped by Wait's error when the timeout passes.
var ErrNotReady = errors.New("not available")

// Wait waits until the straitd Deployment in namespace has all its
// replicas updated and available, printing a progress line whenever the
// counts change, or until timeout passes.
func (c *Client) Wait(parent context.Context, namespace string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	last, lastWhy := "", ""
	for {
		d, err := c.Dynamic.Resource(deployGVR).Namespace(namespace).Get(ctx, "straitd", metav1.GetOptions{})
		status := "Deployment not found"
		switch {
		case err == nil:
			want, _, _ := unstructured.NestedInt64(d.Object, "spec", "replicas")
			avail, _, _ := unstructured.NestedInt64(d.Object, "status", "availableReplicas")
			updated, _, _ := unstructured.NestedInt64(d.Object, "status", "updatedReplicas")
			observed, _, _ := unstructured.NestedInt64(d.Object, "status", "observedGeneration")
			if observed >= d.GetGeneration() && avail >= want && updated >= want {
				c.printf("straitd: %d/%d replicas available\n", avail, want)
				return nil
			}
			status = fmt.Sprintf("%d/%d replicas available, %d updated", avail, want, updated)
			// A pod list that fails (the timeout cut it short) says
			// nothing new about the pods: keep what was last seen.
			if why, err := c.podProblems(ctx, d); err == nil {
				lastWhy = why
			}
			if lastWhy != "" {
				status += "; " + lastWhy
			}
		case !apierrors.IsNotFound(err) && last != "":
			// A failed poll (throttled, or a read the timeout cut short)
			// says nothing new about straitd: keep what was last seen.
			status = last
		case ctx.Err() != nil:
			status = "no answer from the API server"
		case !apierrors.IsNotFound(err):
			status = err.Error()
		}
		if status != last {
			c.printf("waiting for straitd (%s/straitd): %s\n", namespace, status)
			last = status
		}
		select {
		case <-ctx.Done():
			if parent.Err() != nil {
				return fmt.Errorf("waiting for straitd: %w", parent.Err())
			}
			return fmt.Errorf("straitd Deployment %s/straitd %w after %v: %s (see `kubectl -n %s describe deployment straitd` and its pods' events; --timeout waits longer, --wait=false does not wait)",
				namespace, ErrNotReady, timeout, status, namespace)
		case <-time.After(c.interval()):
		}
	}
}

var podGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// podProblems says why the Deployment's pods are not ready, as kubectl
// get pods would show it: a pod not scheduled, a container waiting with
// a reason (ImagePullBackOff, ErrImageNeverPull, CrashLoopBackOff, ...)
// and its message, a container that exited. Empty when the pods show
// nothing wrong; an error when they cannot be listed. A user who forgot
// to load the images sees it in the progress line instead of only "0/1
// available".
func (c *Client) podProblems(ctx context.Context, d *unstructured.Unstructured) (string, error) {
	match, _, _ := unstructured.NestedStringMap(d.Object, "spec", "selector", "matchLabels")
	if len(match) == 0 {
		return "", nil
	}
	var sel []string
	for k, v := range match {
		sel = append(sel, k+"="+v)
	}
	slices.Sort(sel)
	pods, err := c.Dynamic.Resource(podGVR).Namespace(d.GetNamespace()).List(ctx, metav1.ListOptions{LabelSelector: strings.Join(sel, ",")})
	if err != nil {
		return "", fmt.Errorf("listing straitd's pods: %w", err)
	}
	var out []string
	for _, p := range pods.Items {
		if p.GetDeletionTimestamp() != nil {
			continue
		}
		if why := podProblem(p.Object); why != "" {
			out = append(out, "pod "+p.GetName()+": "+why)
		}
	}
	slices.Sort(out)
	return strings.Join(out, "; "), nil
}

// podProblem is one pod's: the first container (init containers first)
// that waits with a reason or has terminated with an error, else an
// unschedulable pod's scheduler message.
func podProblem(pod map[string]any) string {
	for _, field := range []string{"initContainerStatuses", "containerStatuses"} {
		statuses, _, _ := unstructured.NestedSlice(pod, "status", field)
		for _, st := range statuses {
			m, _ := st.(map[string]any)
			name, _, _ := unstructured.NestedString(m, "name")
			if reason, _, _ := unstructured.NestedString(m, "state", "waiting", "reason"); reason != "" && reason != "ContainerCreating" && reason != "PodInitializing" {
				msg, _, _ := unstructured.NestedString(m, "state", "waiting", "message")
				return joinReason("container "+name+" "+reason, msg)
			}
			if code, ok, _ := unstructured.NestedInt64(m, "state", "terminated", "exitCode"); ok && code != 0 {
				reason, _, _ := unstructured.NestedString(m, "state", "terminated", "reason")
				return fmt.Sprintf("container %s exited with %d (%s)", name, code, reason)
			}
		}
	}
	conds, _, _ := unstructured.NestedSlice(pod, "status", "conditions")
	for _, cd := range conds {
		m, _ := cd.(map[string]any)
		if m["type"] == "PodScheduled" && m["status"] == "False" {
			reason, _ := m["reason"].(string)
			msg, _ := m["message"].(string)
			return joinReason("not scheduled: "+reason, msg)
		}
	}
	return ""
}

// joinReason appends a Kubernetes status message, cut to one line of
// reasonable length.
func joinReason(reason, msg string) string {
	msg = strings.TrimSpace(strings.ReplaceAll(msg, "\n", " "))
	if msg == "" {
		return reason
	}
	const max = 200
	if len(msg) > max {
		msg = msg[:max] + "..."
	}
	return reason + " (" + msg + ")"
}

// ErrInstalledElsewhere is wrapped by Apply's and Uninstall's error when
// the cluster-wide objects of the release belong to a straitd in another
// namespace.
var ErrInstalledElsewhere = errors.New("Strait is installed in another namespace") //nolint:staticcheck // ST1005: Strait is a name

var (
	webhookGVR = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingwebhookconfigurations"}
	crbGVR     = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"}
)

// installedNamespaces returns the namespaces whose straitd the release's
// cluster-wide objects serve, each with the object that says so: the
// webhook's service namespace and the ClusterRoleBinding's service
// account namespace. Empty when the release is not installed.
func (c *Client) installedNamespaces(ctx context.Context, release string) (map[string]string, error) {
	sel := metav1.ListOptions{LabelSelector: fmt.Sprintf("%s=%s,%s=%s", InstanceLabel, release, PartOfLabel, PartOfValue)}
	found := map[string]string{}
	hooks, err := c.Dynamic.Resource(webhookGVR).List(ctx, sel)
	if err != nil {
		return nil, fmt.Errorf("list MutatingWebhookConfigurations: %w", err)
	}
	for _, h := range hooks.Items {
		list, _, _ := unstructured.NestedSlice(h.Object, "webhooks")
		for _, w := range list {
			m, _ := w.(map[string]any)
			ns, _, _ := unstructured.NestedString(m, "clientConfig", "service", "namespace")
			svc, _, _ := unstructured.NestedString(m, "clientConfig", "service", "name")
			if ns != "" {
				found[ns] = fmt.Sprintf("MutatingWebhookConfiguration %s calls %s.%s", h.GetName(), svc, ns)
			}
		}
	}
	crbs, err := c.Dynamic.Resource(crbGVR).List(ctx, sel)
	if err != nil {
		return nil, fmt.Errorf("list ClusterRoleBindings: %w", err)
	}
	for _, b := range crbs.Items {
		subjects, _, _ := unstructured.NestedSlice(b.Object, "subjects")
		for _, sub := range subjects {
			m, _ := sub.(map[string]any)
			ns, _ := m["namespace"].(string)
			name, _ := m["name"].(string)
			if _, ok := found[ns]; ns != "" && !ok {
				found[ns] = fmt.Sprintf("ClusterRoleBinding %s binds %s/%s", b.GetName(), ns, name)
			}
		}
	}
	return found, nil
}

// checkSingleInstall refuses to install into, or uninstall from,
// namespace when the release's cluster-wide objects (the webhook, whose
// name is fixed, the CRDs, the ClusterRoles) serve a straitd elsewhere:
// an install would take the webhook from it and prune its ClusterRole,
// an uninstall would delete its cluster-wide objects and leave it
// running without them.
func (c *Client) checkSingleInstall(ctx context.Context, r Rendered, namespace, verb string) error {
	release := DefaultRelease
	for _, o := range r.All() {
		if l := o.GetLabels()[InstanceLabel]; l != "" {
			release = l
			break
		}
	}
	found, err := c.installedNamespaces(ctx, release)
	if err != nil || len(found) == 0 {
		return err
	}
	if _, ok := found[namespace]; ok && verb == "uninstall" {
		return nil
	}
	var others []string
	for ns := range found {
		if ns != namespace {
			others = append(others, ns)
		}
	}
	if len(others) == 0 {
		return nil
	}
	slices.Sort(others)
	there := others[0]
	if verb == "uninstall" {
		return fmt.Errorf("%w: nothing of it in %s; it is in %s (%s): uninstall with -n %s", ErrInstalledElsewhere, namespace, there, found[there], there)
	}
	return fmt.Errorf("%w: %s (%s); the webhook and the CRDs are cluster-wide, so a cluster has one Strait: upgrade it with -n %s, or remove it first with `straitctl uninstall -n %s`",
		ErrInstalledElsewhere, there, found[there], there, there)
}

// UninstallOptions configure Uninstall.
type UninstallOptions struct {
	Namespace, Release string
	// Purge also deletes the CRDs, and with them every Istio resource in
	// the cluster.
	Purge bool
}

// Uninstall deletes every object of the kinds in r that carries the
// release's instance and part-of labels (in the namespace for namespaced
// kinds), in reverse install order, and straitd's Leases; CRDs
// only with Purge. The namespace stays. It returns the deleted objects as KIND/NAME.
func (c *Client) Uninstall(ctx context.Context, r Rendered, opts UninstallOptions) ([]string, error) {
	if err := c.checkSingleInstall(ctx, r, opts.Namespace, "uninstall"); err != nil {
		return nil, err
	}
	objs := r.Objects
	if opts.Purge {
		objs = r.All()
	}
	deleted, err := c.deleteLabelled(ctx, objs, opts, nil)
	if err != nil {
		return deleted, err
	}
	// The Leases straitd's replicas elect the webhook CA writer and the
	// status writer with are made at run time (no chart labels); they go
	// with straitd.
	leases := c.Dynamic.Resource(schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}).Namespace(opts.Namespace)
	for _, name := range []string{WebhookLeaseName, StatusLeaseName} {
		switch err := leases.Delete(ctx, name, metav1.DeleteOptions{}); {
		case err == nil:
			deleted = append(deleted, "Lease/"+name)
			c.printf("Lease/%s deleted\n", name)
		case !apierrors.IsNotFound(err):
			return deleted, fmt.Errorf("delete Lease %s: %w", name, err)
		}
	}
	return deleted, nil
}

// WebhookLeaseName is the Lease straitd creates in its namespace to elect
// the writer of the webhook's CA bundle (cmd/straitd's webhookLeaseName).
const WebhookLeaseName = "strait-webhook-ca"

// StatusLeaseName is the Lease straitd creates in its namespace to elect
// the writer of the Istio objects' status (cmd/straitd's statusLeaseName).
const StatusLeaseName = "strait-status"

// Prune deletes the release's objects of the kinds in all that are not in
// keep: what an upgrade no longer renders (a PodDisruptionBudget turned
// off). CRDs are never pruned. kinds is usually the chart rendered with
// its defaults and every optional object on, so every kind the chart can
// make is looked at.
func (c *Client) Prune(ctx context.Context, kinds, keep Rendered, opts UninstallOptions) ([]string, error) {
	kept := map[string]bool{}
	for _, o := range keep.Objects {
		kept[objectKey(o.GroupVersionKind().GroupKind().String(), o.GetName())] = true
	}
	return c.deleteLabelled(ctx, kinds.Objects, opts, kept)
}

func objectKey(groupKind, name string) string { return groupKind + "/" + name }

// deleteLabelled deletes, for each kind of objs (in reverse order), the
// release's labelled objects whose key is not in keep.
func (c *Client) deleteLabelled(ctx context.Context, objs []*unstructured.Unstructured, opts UninstallOptions, keep map[string]bool) ([]string, error) {
	selector := metav1.ListOptions{LabelSelector: fmt.Sprintf("%s=%s,%s=%s", InstanceLabel, opts.Release, PartOfLabel, PartOfValue)}
	var deleted []string
	seen := map[schema.GroupVersionKind]bool{}
	for i := len(objs) - 1; i >= 0; i-- {
		o := objs[i]
		gvk := o.GroupVersionKind()
		if seen[gvk] {
			continue
		}
		seen[gvk] = true
		probe := o.DeepCopy()
		probe.SetNamespace(opts.Namespace)
		res, err := c.resource(probe)
		if err != nil {
			return deleted, err
		}
		list, err := res.List(ctx, selector)
		if err != nil {
			return deleted, fmt.Errorf("list %s: %w", gvk.Kind, err)
		}
		bg := metav1.DeletePropagationBackground
		for _, item := range list.Items {
			if keep[objectKey(gvk.GroupKind().String(), item.GetName())] {
				continue
			}
			err := res.Delete(ctx, item.GetName(), metav1.DeleteOptions{PropagationPolicy: &bg})
			if err != nil && !apierrors.IsNotFound(err) {
				return deleted, fmt.Errorf("delete %s %s: %w", gvk.Kind, item.GetName(), err)
			}
			deleted = append(deleted, gvk.Kind+"/"+item.GetName())
			c.printf("%s/%s deleted\n", gvk.Kind, item.GetName())
		}
	}
	return deleted, nil
}
