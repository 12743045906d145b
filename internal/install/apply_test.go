package install

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/straitmesh/strait/internal/kubeapiserver"
)

// leftovers lists every object of the chart's kinds that still carries
// the release's labels.
func leftovers(ctx context.Context, t *testing.T, c *Client, r Rendered, ns string) []string {
	t.Helper()
	sel := metav1.ListOptions{LabelSelector: InstanceLabel + "=" + DefaultRelease}
	var left []string
	seen := map[string]bool{}
	for _, o := range r.All() {
		if seen[o.GetKind()] {
			continue
		}
		seen[o.GetKind()] = true
		probe := o.DeepCopy()
		probe.SetNamespace(ns)
		res, err := c.resource(probe)
		if err != nil {
			t.Fatal(err)
		}
		list, err := res.List(ctx, sel)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range list.Items {
			left = append(left, o.GetKind()+"/"+it.GetName())
		}
	}
	return left
}

// TestInstallUninstallCycle applies the chart to a real kube-apiserver
// with server-side apply, checks every object and the field manager, that
// a re-apply keeps the caBundle straitd wrote, the wait's timeout message,
// and that install → uninstall → install → uninstall --purge leaves
// nothing behind.
func TestInstallUninstallCycle(t *testing.T) {
	env := kubeapiserver.Start(t, kubeapiserver.Options{NoIstioCRDs: true})
	// The deadline bounds a hang, not speed: under -race next to a loaded
	// machine the API server took more than 3 minutes for this cycle.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var out bytes.Buffer
	c, err := NewClient(env.Config, &out)
	if err != nil {
		t.Fatal(err)
	}
	c.PollInterval = 100 * time.Millisecond
	r := render(t, RenderOptions{})
	ns := DefaultNamespace

	began := time.Now()
	if err := c.Apply(ctx, r, ns); err != nil {
		t.Fatalf("install: %v\n%s", err, out.String())
	}
	t.Logf("installed in %v", time.Since(began).Round(time.Millisecond))
	for _, o := range r.All() {
		probe := o.DeepCopy()
		probe.SetNamespace(ns)
		res, err := c.resource(probe)
		if err != nil {
			t.Fatal(err)
		}
		got, err := res.Get(ctx, o.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Errorf("%s %s not created: %v", o.GetKind(), o.GetName(), err)
			continue
		}
		managers := ""
		for _, mf := range got.GetManagedFields() {
			managers += mf.Manager + "/" + string(mf.Operation) + " "
		}
		if !strings.Contains(managers, FieldManager+"/Apply") {
			t.Errorf("%s %s managed by %s, want %s with Apply", o.GetKind(), o.GetName(), managers, FieldManager)
		}
	}

	// A second Strait in another namespace is refused before anything
	// changes (the webhook and ClusterRoles are the first's), and so is
	// an uninstall from a namespace without Strait.
	other := render(t, RenderOptions{Namespace: "other"})
	err = c.Apply(ctx, other, "other")
	if !errors.Is(err, ErrInstalledElsewhere) || !strings.Contains(err.Error(), "MutatingWebhookConfiguration istio-sidecar-injector calls istiod.istio-system") || !strings.Contains(err.Error(), "-n istio-system") {
		t.Errorf("install into other with Strait in istio-system: err %v, want ErrInstalledElsewhere naming the webhook and -n istio-system", err)
	}
	if _, err := env.Client.CoreV1().Namespaces().Get(ctx, "other", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("refused install created namespace other: %v", err)
	}
	deleted, err := c.Uninstall(ctx, other, UninstallOptions{Namespace: "other", Release: DefaultRelease})
	if !errors.Is(err, ErrInstalledElsewhere) || len(deleted) != 0 {
		t.Errorf("uninstall -n other with Strait in istio-system: deleted %v, err %v; want nothing deleted and ErrInstalledElsewhere", deleted, err)
	}
	if left := leftovers(ctx, t, c, r, ns); len(left) != len(r.All()) {
		t.Errorf("after the refused install and uninstall in other: %d of the %d objects left: %v", len(left), len(r.All()), left)
	}

	// straitd writes the CA bundle with an update; a second install must
	// not take it away.
	mwcs := env.Client.AdmissionregistrationV1().MutatingWebhookConfigurations()
	mwc, err := mwcs.Get(ctx, "istio-sidecar-injector", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range mwc.Webhooks {
		mwc.Webhooks[i].ClientConfig.CABundle = []byte("bundle")
	}
	if _, err := mwcs.Update(ctx, mwc, metav1.UpdateOptions{FieldManager: "straitd"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Apply(ctx, r, ns); err != nil {
		t.Fatalf("second install: %v", err)
	}
	mwc, err = mwcs.Get(ctx, "istio-sidecar-injector", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range mwc.Webhooks {
		if string(w.ClientConfig.CABundle) != "bundle" {
			t.Errorf("webhook %s caBundle %q after re-install, want straitd's", w.Name, w.ClientConfig.CABundle)
		}
	}

	// An upgrade that turns the PodDisruptionBudget off removes it, and
	// only it.
	noPDB := render(t, RenderOptions{Values: map[string]any{"global": map[string]any{"defaultPodDisruptionBudget": map[string]any{"enabled": false}}}})
	if err := c.Apply(ctx, noPDB, ns); err != nil {
		t.Fatal(err)
	}
	pruned, err := c.Prune(ctx, r, noPDB, UninstallOptions{Namespace: ns, Release: DefaultRelease})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(pruned, ",") != "PodDisruptionBudget/straitd" {
		t.Errorf("prune deleted %v, want only PodDisruptionBudget/straitd", pruned)
	}
	if err := c.Apply(ctx, r, ns); err != nil {
		t.Fatal(err)
	}

	// No controller-manager or kubelet here: the Deployment never becomes
	// available, and the wait says so with what it saw. The timeout leaves
	// a loaded API server time for a first answer: with 500 ms the first
	// read once did not come back before it.
	out.Reset()
	err = c.Wait(ctx, ns, 3*time.Second)
	if !errors.Is(err, ErrNotReady) || !strings.Contains(err.Error(), "0/1 replicas available") || !strings.Contains(err.Error(), "--timeout") {
		t.Errorf("wait: err %v, want not available with 0/1 replicas and the --timeout hint", err)
	}
	if !strings.Contains(out.String(), "waiting for straitd (istio-system/straitd): 0/1 replicas available") {
		t.Errorf("wait printed %q, want a progress line", out.String())
	}

	// A pod of the Deployment that cannot pull its image: the progress
	// line and the timeout say so, with the kubelet's message.
	dep := find(t, r.Objects, "Deployment", "straitd")
	podLabels, _, _ := unstructured.NestedStringMap(dep.Object, "spec", "selector", "matchLabels")
	pods := env.Client.CoreV1().Pods(ns)
	pod, err := pods.Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "straitd-abc", Labels: podLabels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "discovery", Image: "strait/straitd:latest"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "discovery", State: corev1.ContainerState{
		Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImageNeverPull", Message: `Container image "strait/straitd:latest" is not present with pull policy of Never`},
	}}}
	if _, err := pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	err = c.Wait(ctx, ns, 3*time.Second)
	const pullProblem = `pod straitd-abc: container discovery ErrImageNeverPull (Container image "strait/straitd:latest" is not present with pull policy of Never)`
	if err == nil || !strings.Contains(err.Error(), pullProblem) || !strings.Contains(out.String(), pullProblem) {
		t.Errorf("wait with a pod that cannot pull: err %v, printed %q; want both to contain %q", err, out.String(), pullProblem)
	}
	if err := pods.Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	// Interrupted (Ctrl-C) is not reported as the timeout.
	interrupted, stop := context.WithCancel(ctx)
	stop()
	if err := c.Wait(interrupted, ns, time.Minute); !errors.Is(err, context.Canceled) || errors.Is(err, ErrNotReady) {
		t.Errorf("wait interrupted: err %v, want context.Canceled", err)
	}

	// straitd's Leases, made at run time without the chart's labels, go
	// too.
	leaseGVR := schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}
	leaseNames := []string{WebhookLeaseName, StatusLeaseName}
	for _, name := range leaseNames {
		lease := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
			"metadata": map[string]any{"name": name, "namespace": ns},
		}}
		if _, err := c.Dynamic.Resource(leaseGVR).Namespace(ns).Create(ctx, lease, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("re-installs, prune and waits done at %v", time.Since(began).Round(time.Millisecond))
	deleted, err = c.Uninstall(ctx, r, UninstallOptions{Namespace: ns, Release: DefaultRelease})
	if err != nil {
		t.Fatal(err)
	}
	if len(deleted) != len(r.Objects)+len(leaseNames) {
		t.Errorf("uninstall deleted %d objects %v, want the %d it installed and straitd's Leases", len(deleted), deleted, len(r.Objects))
	}
	for _, name := range leaseNames {
		if _, err := c.Dynamic.Resource(leaseGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("straitd's Lease %s after uninstall: %v, want not found", name, err)
		}
	}
	left := leftovers(ctx, t, c, r, ns)
	if len(left) != len(r.CRDs) {
		t.Errorf("after uninstall without --purge: %v left, want only the %d CRDs", left, len(r.CRDs))
	}
	for _, l := range left {
		if !strings.HasPrefix(l, "CustomResourceDefinition/") {
			t.Errorf("after uninstall: %s left", l)
		}
	}

	if err := c.Apply(ctx, r, ns); err != nil {
		t.Fatalf("install again: %v", err)
	}
	if _, err := c.Uninstall(ctx, r, UninstallOptions{Namespace: ns, Release: DefaultRelease, Purge: true}); err != nil {
		t.Fatal(err)
	}
	// CRD deletion finishes asynchronously (the API server removes the
	// stored resources first).
	purged := time.Now()
	t.Logf("install again and uninstall --purge done at %v", time.Since(began).Round(time.Millisecond))
	for {
		left = leftovers(ctx, t, c, r, ns)
		if len(left) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("after uninstall --purge: %v left %v later", left, time.Since(purged).Round(time.Second))
		case <-time.After(200 * time.Millisecond):
		}
	}
	t.Logf("the purged objects were gone %v after the uninstall", time.Since(purged).Round(time.Millisecond))
}

// TestWaitWithoutAnswer: an API server that never answers before the
// timeout is reported as such, not as a missing Deployment.
func TestWaitWithoutAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	var out bytes.Buffer
	c, err := NewClient(&rest.Config{Host: srv.URL}, &out)
	if err != nil {
		t.Fatal(err)
	}
	c.PollInterval = 10 * time.Millisecond
	err = c.Wait(context.Background(), DefaultNamespace, 200*time.Millisecond)
	if !errors.Is(err, ErrNotReady) || !strings.Contains(err.Error(), "no answer from the API server") {
		t.Errorf("wait: err %v, want not available with no answer from the API server", err)
	}
	if strings.Contains(out.String(), "not found") {
		t.Errorf("wait printed %q: a read the timeout cut short is not a missing Deployment", out.String())
	}
}

// TestPodProblem: what the wait's progress line says about one pod.
func TestPodProblem(t *testing.T) {
	for _, tc := range []struct {
		name string
		pod  string
		want string
	}{
		{"running", `{"status":{"containerStatuses":[{"name":"discovery","state":{"running":{}}}]}}`, ""},
		{"creating is not a problem", `{"status":{"containerStatuses":[{"name":"discovery","state":{"waiting":{"reason":"ContainerCreating"}}}]}}`, ""},
		{"pull back-off", `{"status":{"containerStatuses":[{"name":"discovery","state":{"waiting":{"reason":"ImagePullBackOff","message":"Back-off pulling image\n\"x\""}}}]}}`, `container discovery ImagePullBackOff (Back-off pulling image "x")`},
		{"init container first", `{"status":{"initContainerStatuses":[{"name":"init","state":{"waiting":{"reason":"CrashLoopBackOff"}}}],"containerStatuses":[{"name":"discovery","state":{"waiting":{"reason":"PodInitializing"}}}]}}`, "container init CrashLoopBackOff"},
		{"exited", `{"status":{"containerStatuses":[{"name":"discovery","state":{"terminated":{"exitCode":1,"reason":"Error"}}}]}}`, "container discovery exited with 1 (Error)"},
		{"exited cleanly", `{"status":{"containerStatuses":[{"name":"discovery","state":{"terminated":{"exitCode":0,"reason":"Completed"}}}]}}`, ""},
		{"unschedulable", `{"status":{"conditions":[{"type":"PodScheduled","status":"False","reason":"Unschedulable","message":"0/1 nodes are available"}]}}`, "not scheduled: Unschedulable (0/1 nodes are available)"},
		{"scheduled", `{"status":{"conditions":[{"type":"PodScheduled","status":"True"}]}}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON([]byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},` + tc.pod[1:])); err != nil {
				t.Fatal(err)
			}
			if got := podProblem(u.Object); got != tc.want {
				t.Errorf("podProblem = %q, want %q", got, tc.want)
			}
		})
	}
	long := strings.Repeat("x", 300)
	if got := joinReason("r", long); got != "r ("+strings.Repeat("x", 200)+"...)" {
		t.Errorf("joinReason of 300 characters = %q, want it cut at 200", got)
	}
}
