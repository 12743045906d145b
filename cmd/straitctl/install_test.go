package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/straitmesh/strait/internal/kubeapiserver"
)

func runStraitctl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	cmd := newRootCmd()
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

// TestInstallRefusesUnknownValue: a values file with an unknown key is
// refused, naming the key, before any cluster is contacted.
func TestInstallRefusesUnknownValue(t *testing.T) {
	f := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(f, []byte("global:\n  hub: example.com\n  proxyy:\n    image: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := runStraitctl(t, "install", "-f", f, "--kubeconfig", filepath.Join(t.TempDir(), "none"))
	if err == nil || !strings.Contains(err.Error(), "proxyy") {
		t.Errorf("install -f with global.proxyy: err %v, want it to name proxyy", err)
	}
	// With several files, the error names the one with the unknown key,
	// and ends with the key (Helm's message ends in a newline).
	good := filepath.Join(t.TempDir(), "good.yaml")
	if err := os.WriteFile(good, []byte("global:\n  hub: example.com\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = runStraitctl(t, "install", "--dry-run", "-f", good, "-f", f)
	if err == nil || !strings.HasPrefix(err.Error(), "values file "+f+": ") || !strings.HasSuffix(err.Error(), "'proxyy' not allowed") {
		t.Errorf("install -f good -f bad: err %q, want it to start with the bad file %s and end with the key", err, f)
	}
	out, err := runStraitctl(t, "install", "--dry-run", "--set-string", "global.tag=1.20", "-n", "mesh")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "image: strait/straitd:1.20") || !strings.Contains(out, "namespace: mesh") {
		t.Errorf("--dry-run output lacks the straitd image strait/straitd:1.20 in namespace mesh:\n%.2000s", out)
	}
}

// TestInstallCommand runs straitctl install and uninstall against a real
// kube-apiserver (no kubelet: straitd never runs, so the wait times out).
func TestInstallCommand(t *testing.T) {
	env := kubeapiserver.Start(t, kubeapiserver.Options{NoIstioCRDs: true})
	kc := env.KubeconfigPath

	// Bounds a hang, not speed: a dozen straitctl runs, an upgrade, an
	// uninstall and the CRDs' deletion took minutes under -race on a
	// loaded machine.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	// A namespace being deleted (no controller manager here finishes
	// it) is refused before anything is applied.
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "doomed"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.CoreV1().Namespaces().Delete(ctx, "doomed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	out, err := runStraitctl(t, "install", "--kubeconfig", kc, "--wait=false", "-n", "doomed")
	if err == nil || !strings.Contains(err.Error(), "namespace doomed is being deleted") {
		t.Errorf("install -n doomed (Terminating): err %v, want the namespace named as being deleted", err)
	}
	if strings.Contains(out, "applied") {
		t.Errorf("install -n doomed applied objects before failing:\n%s", out)
	}

	out, err = runStraitctl(t, "install", "--kubeconfig", kc, "--wait=false", "--set", "global.hub=example.com/mesh")
	if err != nil {
		t.Fatalf("install --wait=false: %v\n%s", err, out)
	}
	if !strings.Contains(out, "Deployment/straitd applied") || !strings.Contains(out, "not waiting") {
		t.Errorf("install output:\n%s", out)
	}

	// A second install in another namespace is refused, naming the first.
	if _, err := runStraitctl(t, "install", "--kubeconfig", kc, "--wait=false", "-n", "second"); err == nil || !strings.Contains(err.Error(), "upgrade it with -n istio-system") {
		t.Errorf("install -n second with Strait in istio-system: err %v, want a refusal naming istio-system", err)
	}

	// Credentials the API server refuses are reported as such, naming
	// the kubeconfig.
	bad := filepath.Join(t.TempDir(), "kubeconfig")
	raw, err := os.ReadFile(kc)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), env.Token()) {
		t.Fatalf("kubeconfig %s does not hold the token", kc)
	}
	if err := os.WriteFile(bad, []byte(strings.ReplaceAll(string(raw), env.Token(), "wrong-token")), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := runStraitctl(t, "install", "--kubeconfig", bad, "--wait=false"); err == nil || !strings.Contains(err.Error(), "refused the credentials") || !strings.Contains(err.Error(), bad) {
		t.Errorf("install with a wrong token: err %v, want refused credentials naming %s", err, bad)
	}

	dep, err := env.Client.AppsV1().Deployments("istio-system").Get(ctx, "straitd", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if img := dep.Spec.Template.Spec.Containers[0].Image; img != "example.com/mesh/straitd:latest" {
		t.Errorf("straitd image %s, want the --set hub", img)
	}

	// Upgrade: the PodDisruptionBudget turned off goes away.
	out, err = runStraitctl(t, "install", "--kubeconfig", kc, "--wait=false", "--set", "global.defaultPodDisruptionBudget.enabled=false")
	if err != nil {
		t.Fatalf("upgrade: %v\n%s", err, out)
	}
	if !strings.Contains(out, "PodDisruptionBudget/straitd deleted") {
		t.Errorf("upgrade without the PodDisruptionBudget printed:\n%s", out)
	}
	if _, err := env.Client.PolicyV1().PodDisruptionBudgets("istio-system").Get(ctx, "straitd", metav1.GetOptions{}); err == nil {
		t.Error("PodDisruptionBudget straitd still there after the upgrade that turned it off")
	}

	out, err = runStraitctl(t, "install", "--kubeconfig", kc, "--timeout", "2s")
	if err == nil || !strings.Contains(err.Error(), "not available after 2s") {
		t.Errorf("install --timeout 2s with no kubelet: err %v, want not available after 2s", err)
	}
	if !strings.Contains(out, "waiting for straitd (istio-system/straitd):") {
		t.Errorf("install printed no progress line:\n%s", out)
	}

	if out, err := runStraitctl(t, "uninstall", "--kubeconfig", kc, "--purge"); err != nil {
		t.Fatalf("uninstall --purge: %v\n%s", err, out)
	}
	sel := metav1.ListOptions{LabelSelector: "app.kubernetes.io/part-of=strait"}
	purged := time.Now()
	for {
		var left []string
		for _, gvr := range []schema.GroupVersionResource{
			{Group: "apps", Version: "v1", Resource: "deployments"}, {Version: "v1", Resource: "services"},
			{Version: "v1", Resource: "configmaps"}, {Version: "v1", Resource: "serviceaccounts"},
			{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
			{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingwebhookconfigurations"},
			{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"},
		} {
			list, err := env.Dynamic.Resource(gvr).List(ctx, sel)
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range list.Items {
				left = append(left, gvr.Resource+"/"+it.GetName())
			}
		}
		if len(left) == 0 {
			t.Logf("the purged objects were gone %v after the uninstall", time.Since(purged).Round(time.Millisecond))
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("after uninstall --purge: %v left %v later", left, time.Since(purged).Round(time.Second))
		case <-time.After(200 * time.Millisecond):
		}
	}

	// A second uninstall finds nothing, and says so.
	out, err = runStraitctl(t, "uninstall", "--kubeconfig", kc)
	if err != nil || !strings.Contains(out, "nothing to uninstall: no object labelled app.kubernetes.io/instance=strait,app.kubernetes.io/part-of=strait in namespace istio-system or cluster-wide (the CRDs aside") {
		t.Errorf("uninstall with nothing installed: err %v, printed %q", err, out)
	}
	out, err = runStraitctl(t, "uninstall", "--kubeconfig", kc, "--purge")
	if err != nil || !strings.HasSuffix(out, "or cluster-wide\n") {
		t.Errorf("uninstall --purge with nothing installed: err %v, printed %q", err, out)
	}
}
