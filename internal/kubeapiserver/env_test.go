package kubeapiserver

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/daemon"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

func TestCRDSources(t *testing.T) {
	istio, err := IstioCRDs()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, c := range istio {
		names[c.GetName()] = true
	}
	for _, want := range []string{"virtualservices.networking.istio.io", "serviceentries.networking.istio.io", "authorizationpolicies.security.istio.io"} {
		if !names[want] {
			t.Errorf("istio.io/api CRDs lack %s (have %d CRDs)", want, len(istio))
		}
	}
}

// TestAPIServer starts the real API server and exercises it through
// client-go: namespaces, Services, the Istio and Gateway API CRDs, the
// kubeconfig, client-certificate auth, an API server restart, and clean-up.
func TestAPIServer(t *testing.T) {
	env := Start(t, Options{GatewayAPI: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "demo"}}
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "demo"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "web"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80}},
		},
	}
	got, err := env.Client.CoreV1().Services("demo").Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create service: %v", err)
	}
	if got.Spec.ClusterIP == "" {
		t.Errorf("service got no cluster IP")
	}

	// The Istio and Gateway API kinds are served.
	for _, gvr := range []schema.GroupVersionResource{
		{Group: "networking.istio.io", Version: "v1", Resource: "virtualservices"},
		{Group: "security.istio.io", Version: "v1", Resource: "authorizationpolicies"},
		{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "httproutes"},
	} {
		if _, err := env.Dynamic.Resource(gvr).Namespace("demo").List(ctx, metav1.ListOptions{}); err != nil {
			t.Errorf("list %s: %v", gvr, err)
		}
	}

	// The kubeconfig works on its own, and so does the client certificate.
	cfg, err := clientcmd.BuildConfigFromFlags("", env.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]*kubernetesConfig{"kubeconfig": {cfg}, "client certificate": {env.ClientCertConfig()}} {
		cs, err := kubernetes.NewForConfig(c.Config)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cs.CoreV1().Services("demo").Get(ctx, "web", metav1.GetOptions{}); err != nil {
			t.Errorf("%s: get service: %v", name, err)
		}
	}

	// An API server restart keeps the data (etcd keeps running).
	env.StopAPIServer()
	if _, err := env.Client.CoreV1().Namespaces().Get(ctx, "demo", metav1.GetOptions{}); err == nil {
		t.Errorf("API server still answers after StopAPIServer")
	}
	if err := env.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.CoreV1().Services("demo").Get(ctx, "web", metav1.GetOptions{}); err != nil {
		t.Errorf("after restart: %v", err)
	}

	// Stop ends both processes and removes the directory.
	env.mu.Lock()
	procs := []*daemon.Process{env.etcd, env.apiserver}
	env.mu.Unlock()
	if err := env.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		if !p.Exited() {
			t.Errorf("%s still running after Stop", p.Name)
		}
	}
	if _, err := os.Stat(env.Dir); !os.IsNotExist(err) {
		t.Errorf("%s still exists after Stop (%v)", env.Dir, err)
	}
}

type kubernetesConfig struct{ Config *rest.Config }

func TestBinariesUnavailable(t *testing.T) {
	t.Setenv(EnvBinDir, t.TempDir())
	_, err := Binaries(context.Background(), nil)
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Binaries with an empty $%s: %v, want ErrUnavailable", EnvBinDir, err)
	}
	if _, err := StartContext(context.Background(), Options{}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("StartContext without binaries: %v, want ErrUnavailable", err)
	}
}
