package kuberoot

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/straitmesh/strait/internal/ca"
	"github.com/straitmesh/strait/internal/kubeapiserver"
)

// TestPublisher runs against a real kube-apiserver: every namespace gets
// istio-ca-root-cert with the CA's bundle, including one created later; a
// deleted or edited ConfigMap is put back; kube-public is skipped; a root
// added to the CA's bundle reaches every namespace.
func TestPublisher(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kube-apiserver")
	}
	env := kubeapiserver.Start(t, kubeapiserver.Options{NoIstioCRDs: true})
	kc := env.Client
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	authority, err := ca.Load(ca.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	mkNS := func(name string) {
		if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	mkNS("before")
	pctx, pcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- New(Options{Client: kc, Bundle: authority.TrustBundle, Changed: authority.Changed}).Run(pctx)
	}()
	defer func() {
		pcancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	waitData := func(ns, want string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		var last string
		for time.Now().Before(deadline) {
			cm, err := kc.CoreV1().ConfigMaps(ns).Get(ctx, ConfigMapName, metav1.GetOptions{})
			if err == nil && cm.Data[DataKey] == want && cm.Labels["istio.io/config"] == "true" {
				return
			}
			if err != nil {
				last = err.Error()
			} else {
				last = cm.Data[DataKey]
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("%s/%s never held the bundle; last: %.200s", ns, ConfigMapName, last)
	}
	bundle := string(authority.TrustBundle())
	waitData("before", bundle)
	waitData("default", bundle)
	waitData("kube-system", bundle)
	mkNS("after")
	waitData("after", bundle)

	if err := kc.CoreV1().ConfigMaps("after").Delete(ctx, ConfigMapName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitData("after", bundle)
	cm, err := kc.CoreV1().ConfigMaps("before").Get(ctx, ConfigMapName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data[DataKey] = "tampered"
	if _, err := kc.CoreV1().ConfigMaps("before").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitData("before", bundle)

	// A second root (step 1 of a rotation) reaches every namespace.
	other, err := ca.Load(ca.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	two := bundle + string(other.TrustBundle())
	if err := os.WriteFile(filepath.Join(dir, ca.RootCertFile), []byte(two), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := authority.Reload(); err != nil {
		t.Fatal(err)
	}
	waitData("before", two)
	waitData("after", two)

	if _, err := kc.CoreV1().ConfigMaps("kube-public").Get(ctx, ConfigMapName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("kube-public: %v, want not found", err)
	}
}
