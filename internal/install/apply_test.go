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

	// Interrupted (Ctrl-C) is not reported as the timeout.
	interrupted, stop := context.WithCancel(ctx)
	stop()
	if err := c.Wait(interrupted, ns, time.Minute); !errors.Is(err, context.Canceled) || errors.Is(err, ErrNotReady) {
		t.Errorf("wait interrupted: err %v, want context.Canceled", err)
	}

	// straitd's webhook CA Lease, made at run time without the chart's
	// labels, goes too.
	leaseGVR := schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}
	lease := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
		"metadata": map[string]any{"name": WebhookLeaseName, "namespace": ns},
	}}
	if _, err := c.Dynamic.Resource(leaseGVR).Namespace(ns).Create(ctx, lease, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("re-installs, prune and waits done at %v", time.Since(began).Round(time.Millisecond))
	deleted, err := c.Uninstall(ctx, r, UninstallOptions{Namespace: ns, Release: DefaultRelease})
	if err != nil {
		t.Fatal(err)
	}
	if len(deleted) != len(r.Objects)+1 {
		t.Errorf("uninstall deleted %d objects %v, want the %d it installed and straitd's Lease", len(deleted), deleted, len(r.Objects))
	}
	if _, err := c.Dynamic.Resource(leaseGVR).Namespace(ns).Get(ctx, WebhookLeaseName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("straitd's Lease %s after uninstall: %v, want not found", WebhookLeaseName, err)
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
