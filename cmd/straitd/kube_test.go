package main

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/straitmesh/strait/internal/kubeapiserver"
	"github.com/straitmesh/strait/internal/proxypush"
	"github.com/straitmesh/strait/internal/xdsapi"
)

func TestResolveMode(t *testing.T) {
	env := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	f := flags{injectAddr: ":15017"}
	err := resolveMode(&f, env(nil))
	if err == nil || !strings.Contains(err.Error(), "--config-dir") || !strings.Contains(err.Error(), "--kubeconfig") {
		t.Fatalf("no --config-dir, no --kubeconfig: %v", err)
	}
	f = flags{configDir: "d", injectAddr: ":15017"}
	if err := resolveMode(&f, env(map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.0.1"})); err != nil || f.kubeMode || f.injectAddr != "" {
		t.Fatalf("file mode: %+v %v (want file mode, webhook off)", f, err)
	}
	f = flags{configDir: "d", injectAddr: ":15017", injectAddrSet: true}
	if err := resolveMode(&f, env(nil)); err != nil || f.injectAddr != ":15017" {
		t.Fatalf("file mode with --inject-addr: %+v %v", f, err)
	}
	f = flags{injectAddr: ":15017"}
	if err := resolveMode(&f, env(map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.0.1"})); err != nil || !f.kubeMode || !f.gatewayAPI || f.injectAddr == "" {
		t.Fatalf("in cluster: %+v %v", f, err)
	}
	f = flags{kubeconfig: "k", configDir: "d"}
	if err := resolveMode(&f, env(map[string]string{"PILOT_ENABLE_GATEWAY_API": "false"})); err != nil || !f.kubeMode || f.gatewayAPI {
		t.Fatalf("--kubeconfig with PILOT_ENABLE_GATEWAY_API=false: %+v %v", f, err)
	}
	f = flags{kubeconfig: "k"}
	if err := resolveMode(&f, env(map[string]string{"PILOT_ENABLE_GATEWAY_API": "maybe"})); err == nil || !strings.Contains(err.Error(), `PILOT_ENABLE_GATEWAY_API="maybe"`) {
		t.Fatalf("bad PILOT_ENABLE_GATEWAY_API: %v", err)
	}
}

// TestKubeMode runs straitd against a real kube-apiserver: the webhook
// writes its CA bundle into the MutatingWebhookConfiguration and the API
// server injects pods through it; a Service and its EndpointSlice reach an
// ADS client; the file registry is served alongside.
func TestKubeMode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kube-apiserver")
	}
	env := kubeapiserver.Start(t, kubeapiserver.Options{})
	kc := env.Client
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// A non-default control-plane namespace: everything below follows it.
	const cpNamespace = "strait-cp"
	mustNamespace(ctx, t, kc, cpNamespace, nil)

	dir := t.TempDir()
	mesh, err := os.ReadFile(filepath.Join("..", "..", "examples", "demo", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "mesh.yaml"), mesh, 0o644); err != nil {
		t.Fatal(err)
	}
	listen := func() net.Listener {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	xdsLis, monLis, injLis := listen(), listen(), listen()
	f := flags{
		configDir: dir, kubeconfig: env.KubeconfigPath, kubeMode: true, gatewayAPI: true,
		domain: "cluster.local", namespace: cpNamespace,
		injectLis: injLis, injectConfigDir: t.TempDir(), webhookConfigName: "istio-sidecar-injector",
	}
	push := pushSettings{DebounceAfter: 20 * time.Millisecond, DebounceMax: time.Second, EnableEDSDebounce: true, PushThrottle: 10}
	logger := slog.New(slog.DiscardHandler)
	if testing.Verbose() {
		logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	serveCtx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- serve(serveCtx, f, push, logger, xdsLis, monLis) }()
	defer func() {
		stop()
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("serve returned %v after cancel, want nil", err)
			}
		case <-time.After(15 * time.Second):
			t.Error("serve did not return after cancel")
		}
	}()
	waitHTTP(t, "http://"+monLis.Addr().String()+"/healthz/ready", "ok")

	t.Run("webhook certificate names", func(t *testing.T) {
		conn, err := tls.Dial("tcp", injLis.Addr().String(), &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		names := conn.ConnectionState().PeerCertificates[0].DNSNames
		for _, want := range []string{"istiod." + cpNamespace + ".svc", "straitd." + cpNamespace + ".svc"} {
			if !slices.Contains(names, want) {
				t.Errorf("webhook certificate names %v lack %q", names, want)
			}
		}
		for _, n := range names {
			if strings.Contains(n, "istio-system") {
				t.Errorf("webhook certificate names %v still name istio-system", names)
			}
		}
	})

	t.Run("injection webhook", func(t *testing.T) {
		// Istio's sidecar-injector MutatingWebhookConfiguration, pointed at straitd.
		fail, none := admissionregistrationv1.Fail, admissionregistrationv1.SideEffectClassNone
		url := "https://" + injLis.Addr().String() + "/inject"
		mwc := &admissionregistrationv1.MutatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: "istio-sidecar-injector"},
			Webhooks: []admissionregistrationv1.MutatingWebhook{{
				Name:                    "namespace.sidecar-injector.istio.io",
				AdmissionReviewVersions: []string{"v1beta1", "v1"},
				ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url},
				FailurePolicy:           &fail,
				SideEffects:             &none,
				NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"istio-injection": "enabled"}},
				Rules: []admissionregistrationv1.RuleWithOperations{{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
				}},
			}},
		}
		mwcs := kc.AdmissionregistrationV1().MutatingWebhookConfigurations()
		if _, err := mwcs.Create(ctx, mwc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			got, err := mwcs.Get(ctx, mwc.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if b := got.Webhooks[0].ClientConfig.CABundle; len(b) > 0 {
				if !strings.Contains(string(b), "BEGIN CERTIFICATE") {
					t.Fatalf("caBundle is not PEM: %q", b)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("straitd did not write the webhook's caBundle within 30s")
			}
			time.Sleep(100 * time.Millisecond)
		}

		mustNamespace(ctx, t, kc, "injected", map[string]string{"istio-injection": "enabled"})
		mustNamespace(ctx, t, kc, "plain", nil)

		// The API server picks up the new configuration asynchronously:
		// retry until a pod comes back injected.
		var pod *corev1.Pod
		for i := 0; ; i++ {
			pod, err = kc.CoreV1().Pods("injected").Create(ctx, testPod("app-"+itoa(i), nil), metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("create pod in the labelled namespace: %v", err)
			}
			if hasContainer(pod, "istio-proxy") {
				break
			}
			if time.Now().After(deadline.Add(30 * time.Second)) {
				t.Fatalf("pod in the labelled namespace not injected: %+v", pod.Spec)
			}
			time.Sleep(200 * time.Millisecond)
		}
		// What is stored, not only what Create returned.
		stored, err := kc.CoreV1().Pods("injected").Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !hasContainer(stored, "istio-proxy") || !hasInit(stored, "istio-init") {
			t.Fatalf("stored pod lacks istio-proxy or istio-init: containers %v, init %v", names(stored.Spec.Containers), names(stored.Spec.InitContainers))
		}

		plain, err := kc.CoreV1().Pods("plain").Create(ctx, testPod("app", nil), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(plain.Spec.Containers) != 1 || len(plain.Spec.InitContainers) != 0 {
			t.Fatalf("pod in an unlabelled namespace was changed: containers %v, init %v", names(plain.Spec.Containers), names(plain.Spec.InitContainers))
		}

		_, err = kc.CoreV1().Pods("injected").Create(ctx, testPod("bad-cpu", map[string]string{"sidecar.istio.io/proxyCPU": "abc"}), metav1.CreateOptions{})
		if err == nil || !strings.Contains(err.Error(), "sidecar.istio.io/proxyCPU") {
			t.Fatalf("pod with sidecar.istio.io/proxyCPU=abc: err %v, want a refusal naming the annotation", err)
		}
		t.Logf("refusal: %v", err)
	})

	t.Run("injector ConfigMap", func(t *testing.T) {
		// --inject-config-dir is empty: the istio-sidecar-injector ConfigMap
		// in --namespace configures the injector, and edits apply live.
		cms := kc.CoreV1().ConfigMaps(cpNamespace)
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "istio-sidecar-injector"},
			Data:       map[string]string{"config": "injectedAnnotations:\n  strait.test/from: v1\n"},
		}
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitInjectedAnnotation(ctx, t, kc, "cm-a", "v1")
		cm.Data["config"] = "injectedAnnotations:\n  strait.test/from: v2\n"
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitInjectedAnnotation(ctx, t, kc, "cm-b", "v2")
	})

	t.Run("service to ADS", func(t *testing.T) {
		mustNamespace(ctx, t, kc, "shop", nil)
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "cart", Namespace: "shop"},
			Spec: corev1.ServiceSpec{
				Selector: map[string]string{"app": "cart"},
				Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
			},
		}
		if _, err := kc.CoreV1().Services("shop").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		name, port, ready := "http", int32(8080), true
		slice := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Name: "cart-abc", Namespace: "shop",
				Labels: map[string]string{discoveryv1.LabelServiceName: "cart"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.244.0.7"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
			Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port}},
		}
		if _, err := kc.DiscoveryV1().EndpointSlices("shop").Create(ctx, slice, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}

		conn, err := grpc.NewClient(xdsLis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		sctx, scancel := context.WithCancel(ctx)
		defer scancel()
		stream, err := discovery.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(sctx)
		if err != nil {
			t.Fatal(err)
		}
		// The demo's client WorkloadEntry (file registry) identifies the proxy.
		node := &core.Node{Id: proxypush.NodeID("10.99.0.10", "client", "demo", "")}
		if err := stream.Send(&discovery.DiscoveryRequest{Node: node, TypeUrl: xdsapi.ClusterType}); err != nil {
			t.Fatal(err)
		}
		want := "outbound|80||cart.shop.svc.cluster.local"
		deadline := time.Now().Add(20 * time.Second)
		for {
			resp := recvWithin(t, stream)
			if resp.TypeUrl == xdsapi.ClusterType && hasCluster(t, resp, want) {
				if !hasCluster(t, resp, "outbound|80||echo.demo.svc.cluster.local") {
					t.Errorf("CDS lacks the file registry's outbound|80||echo.demo.svc.cluster.local")
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no CDS response with %s within 20s", want)
			}
			if err := stream.Send(&discovery.DiscoveryRequest{TypeUrl: resp.TypeUrl, VersionInfo: resp.VersionInfo, ResponseNonce: resp.Nonce}); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func mustNamespace(ctx context.Context, t *testing.T, kc kubernetes.Interface, name string, labels map[string]string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if _, err := kc.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func testPod(name string, annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "nginx"}, Annotations: annotations},
		// The sidecar's projected istio-token needs a service account name
		// (no ServiceAccount admission plugin fills it in the test API server).
		Spec: corev1.PodSpec{ServiceAccountName: "default", Containers: []corev1.Container{{
			Name: "nginx", Image: "nginx", Ports: []corev1.ContainerPort{{ContainerPort: 80}},
		}}},
	}
}

func hasContainer(p *corev1.Pod, name string) bool {
	for _, c := range append(append([]corev1.Container(nil), p.Spec.Containers...), p.Spec.InitContainers...) {
		if c.Name == name {
			return true
		}
	}
	return false
}

func hasInit(p *corev1.Pod, name string) bool {
	for _, c := range p.Spec.InitContainers {
		if c.Name == name {
			return true
		}
	}
	return false
}

func names(cs []corev1.Container) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

func itoa(i int) string { return string(rune('a'+i%26)) + string(rune('a'+i/26%26)) }

// waitInjectedAnnotation creates pods in the labelled namespace until one
// comes back injected with strait.test/from=want.
func waitInjectedAnnotation(ctx context.Context, t *testing.T, kc kubernetes.Interface, prefix, want string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; ; i++ {
		pod, err := kc.CoreV1().Pods("injected").Create(ctx, testPod(prefix+"-"+itoa(i), nil), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := pod.Annotations["strait.test/from"]; got == want && hasContainer(pod, "istio-proxy") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("injected pods never got strait.test/from=%s from the ConfigMap; last: %v", want, pod.Annotations)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
