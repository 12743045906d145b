package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/straitmesh/strait/internal/install"
	"github.com/straitmesh/strait/internal/kubenode"
	"github.com/straitmesh/strait/internal/testreq"
)

// The seed's flow on a real one-node cluster (internal/kubenode): Strait's
// images imported into the node's containerd, `straitctl install`, a
// labelled namespace whose pods straitd's webhook injects, the init
// container programming the pod's netns, the sidecars fed by straitd over
// the cluster network, and traffic from a client pod through both
// sidecars.
const (
	kubeDemoNS   = "demo"
	kubeImageTag = "e2e"
	serverHost   = "server.demo.svc.cluster.local"
)

// kubePollInterval is the pause between two checks of a wait on the
// Kubernetes node (API lists, execs, straitd's syncz through curl).
const kubePollInterval = 250 * time.Millisecond

// echoLine is one line of `strait-echo get`.
type echoLine struct {
	Status int    `json:"status"`
	Error  string `json:"error"`
	Reply  *struct {
		Version string `json:"version"`
		Pod     string `json:"pod"`
		Remote  string `json:"remote"`
		Attempt int    `json:"attempt"`
	} `json:"reply"`
}

func TestKubeSeedFlow(t *testing.T) {
	if binDir == "" {
		testreq.Missing(t, "no binaries: run as root or set STRAIT_BIN_DIR")
	}
	if err := kubenode.Available(); err != nil {
		testreq.Missing(t, "no Kubernetes node: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	imgs, err := kubenode.StraitImages(ctx, t.TempDir(), "strait", kubeImageTag)
	if err != nil {
		t.Fatal(err)
	}
	node := kubenode.Start(t, kubenode.Options{Images: imgs})
	client := node.API.Client
	straitctl := func(t *testing.T, args ...string) string {
		t.Helper()
		if args[0] == "install" || args[0] == "uninstall" {
			args = append(args, "--kubeconfig", node.API.KubeconfigPath)
		}
		cmd := exec.CommandContext(ctx, filepath.Join(binDir, "straitctl"), args...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("straitctl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}

	// 1. straitctl install; straitd runs as a pod.
	t.Log(straitctl(t, "install", "--set", "global.tag="+kubeImageTag, "--timeout", "4m"))
	straitdPod := waitPodsReady(ctx, t, client, install.DefaultNamespace, "app=istiod", 1, 1)[0]

	// 2. A labelled namespace, the server in two versions, a client.
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: kubeDemoNS, Labels: map[string]string{"istio-injection": "enabled"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitServiceAccount(ctx, t, client, kubeDemoNS)
	if _, err := client.CoreV1().Services(kubeDemoNS).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "server", Namespace: kubeDemoNS},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "server"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The pods find straitd (istiod.istio-system.svc) and the server
	// by name through the node's cluster DNS: no hostAliases.
	for _, d := range []*appsv1.Deployment{
		echoDeployment("server-v1", map[string]string{"app": "server", "version": "v1"}, nil),
		echoDeployment("server-v2", map[string]string{"app": "server", "version": "v2"}, nil),
		echoDeployment("client", map[string]string{"app": "client"}, nil),
	} {
		if _, err := client.AppsV1().Deployments(kubeDemoNS).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// 3. Injected, 2/2 Running, the init container done, every sidecar
	// SYNCED.
	var demoPods []corev1.Pod
	for _, app := range []string{"app=server,version=v1", "app=server,version=v2", "app=client"} {
		pods := waitPodsReady(ctx, t, client, kubeDemoNS, app, 1, 2)
		demoPods = append(demoPods, pods...)
	}
	for _, p := range demoPods {
		if len(p.Spec.InitContainers) == 0 || p.Spec.InitContainers[0].Name != "istio-init" {
			t.Errorf("pod %s: no istio-init init container (init containers %v)", p.Name, containerNames(p.Spec.InitContainers))
		}
		if names := containerNames(p.Spec.Containers); !contains(names, "istio-proxy") {
			t.Errorf("pod %s: no istio-proxy sidecar (containers %v)", p.Name, names)
		}
	}
	var table []string
	for _, p := range demoPods {
		table = append(table, podState(p))
	}
	t.Logf("pods in %s (name ready phase):\n%s", kubeDemoNS, strings.Join(table, "\n"))
	// straitd's debug pages answer callers from other hosts only with a
	// token of its namespace, as istiod's do: the one istioctl uses, the
	// default service account's for audience istio-ca.
	monitoring := straitdDebug{addr: net.JoinHostPort(straitdPod.Status.PodIP, "15014"), token: debugToken(ctx, t, client)}
	waitSynced(ctx, t, monitoring, demoPods)
	tokenFile := filepath.Join(t.TempDir(), "debug-token")
	if err := os.WriteFile(tokenFile, []byte(monitoring.token), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Log(straitctl(t, "proxy-status", "--straitd-addr", monitoring.addr, "--token-file", tokenFile))

	t.Run("debug pages need a token of straitd's namespace", func(t *testing.T) {
		// The checks run through the kube-apiserver's TokenReview: a
		// token of another namespace is genuine but refused (403), one
		// for another audience or made up is not genuine (401).
		otherNS := serviceAccountToken(ctx, t, client, kubeDemoNS, "istio-ca")
		wrongAudience := serviceAccountToken(ctx, t, client, install.DefaultNamespace, "not-istio-ca")
		forged := strings.Join([]string{"eyJhbGciOiJSUzI1NiIsImtpZCI6IngifQ", "eyJpc3MiOiJrdWJlcm5ldGVzL3NlcnZpY2VhY2NvdW50Iiwic3ViIjoic3lzdGVtOnNlcnZpY2VhY2NvdW50OmlzdGlvLXN5c3RlbTpkZWZhdWx0In0", "c2ln"}, ".")
		for _, c := range []struct {
			name, path, token string
			want              int
		}{
			{"no token", "/debug/syncz", "", http.StatusUnauthorized},
			{"no token, pprof", "/debug/pprof/goroutine", "", http.StatusUnauthorized},
			{"forged token", "/debug/syncz", forged, http.StatusUnauthorized},
			{"token for another audience", "/debug/syncz", wrongAudience, http.StatusUnauthorized},
			{"token of " + kubeDemoNS, "/debug/syncz", otherNS, http.StatusForbidden},
			{"token of " + install.DefaultNamespace, "/debug/syncz", monitoring.token, http.StatusOK},
			{"metrics, no token", "/metrics", "", http.StatusOK},
			{"readiness, no token", "/healthz/ready", "", http.StatusOK},
		} {
			if got := debugStatus(ctx, t, monitoring, c.path, c.token); got != c.want {
				t.Errorf("%s: GET %s answered %d, want %d", c.name, c.path, got, c.want)
			}
		}
	})

	clientPod := podNamed(demoPods, "client")
	get := func(t *testing.T, n int, url string) []echoLine {
		t.Helper()
		out, _, err := node.Exec(ctx, kubeDemoNS, clientPod, "echo", "strait-echo", "get", "-n", fmt.Sprint(n), url)
		if err != nil {
			t.Fatal(err)
		}
		return parseEchoLines(t, out)
	}

	t.Run("through both sidecars", func(t *testing.T) {
		// Each name resolves through the cluster DNS (the short ones by
		// the pod's search path) and matches the server's virtual host.
		for _, host := range []string{serverHost, "server.demo", "server"} {
			for _, l := range get(t, 5, "http://"+host+"/") {
				if l.Status != 200 || l.Reply == nil {
					t.Fatalf("request to http://%s/ from the client pod: %+v", host, l)
				}
				if host, _, _ := net.SplitHostPort(l.Reply.Remote); host != "127.0.0.6" {
					t.Errorf("the server app saw the request from %s, want 127.0.0.6 (its sidecar)", l.Reply.Remote)
				}
			}
		}
	})

	t.Run("ingress gateway from the chart", func(t *testing.T) {
		checkKubeIngressGateway(ctx, t, node, client, straitctl) // kubegateway_test.go
	})

	t.Run("Gateway API gateway deployed by straitd", func(t *testing.T) {
		checkKubeGatewayAPI(ctx, t, node, client, monitoring.token) // kubegatewayapi_test.go
	})

	t.Run("Gateway API route of a Service through the sidecars (GAMMA)", func(t *testing.T) {
		checkKubeGatewayAPIMesh(ctx, t, node, clientPod) // kubegatewayapi_test.go
	})

	// applySplit applies the split and waits until the client's sidecar
	// has ACKed the route configuration that carries it.
	applySplit := func(t *testing.T, v1, v2 int) {
		t.Helper()
		before := syncOf(ctx, t, monitoring, clientPod)
		applyIstio(ctx, t, node, fmt.Sprintf(splitYAML, v1, v2))
		waitSyncChange(ctx, t, monitoring, clientPod, "rds", before)
		waitSynced(ctx, t, monitoring, demoPods)
	}
	t.Run("Prometheus and Istio's dashboards", func(t *testing.T) {
		// All of the client's requests to v1, so each reporter's series
		// come from one scrape target (kubeprometheus_test.go).
		applySplit(t, 100, 0)
		checkKubePrometheus(ctx, t, node, client, clientPod)
	})
	t.Run("split 80/20 and a live change", func(t *testing.T) {
		// 200 requests: 160 expected at 80%, standard deviation 5.7; the
		// bounds are 3.5 deviations wide on either side.
		applySplit(t, 80, 20)
		versionShare(t, get, "v1", 140, 180)
		applySplit(t, 20, 80)
		versionShare(t, get, "v1", 20, 60)
	})

	t.Run("scaling changes EDS only", func(t *testing.T) {
		before := syncOf(ctx, t, monitoring, clientPod)
		scale(ctx, t, client, "server-v1", 2)
		waitPodsReady(ctx, t, client, kubeDemoNS, "app=server,version=v1", 2, 2)
		after := waitSyncChange(ctx, t, monitoring, clientPod, "eds", before)
		for _, typ := range []string{"cds", "lds", "rds"} {
			if before[typ] != after[typ] {
				t.Errorf("scaling server-v1 re-sent %s to the client's sidecar (nonce %q -> %q); want EDS only", typ, before[typ], after[typ])
			}
		}
	})

	t.Run("inject false is left alone and reaches the service", func(t *testing.T) {
		d := echoDeployment("plain", map[string]string{"app": "plain"}, map[string]string{"sidecar.istio.io/inject": "false"})
		if _, err := client.AppsV1().Deployments(kubeDemoNS).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		p := waitPodsReady(ctx, t, client, kubeDemoNS, "app=plain", 1, 1)[0]
		if len(p.Spec.InitContainers) != 0 || len(p.Spec.Containers) != 1 {
			t.Errorf("inject=false pod was changed: init %v, containers %v", containerNames(p.Spec.InitContainers), containerNames(p.Spec.Containers))
		}
		out, _, err := node.Exec(ctx, kubeDemoNS, p.Name, "echo", "strait-echo", "get", "-n", "5", "http://"+serverHost+"/")
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range parseEchoLines(t, out) {
			if l.Status != 200 {
				t.Errorf("request from the inject=false pod: %+v", l)
			}
		}
	})

	t.Run("link-local IPv6 to an injected pod is refused", func(t *testing.T) {
		// istio-init captures IPv4 only (no --dual-stack); the server
		// pod's eth0 still has an IPv6 link-local address, which must
		// not reach the app past its sidecar: from the node, a
		// namespace on the node's bridge, the injected client and the
		// inject=false pod.
		server := podNamed(demoPods, "server")
		var serverIP string
		for _, p := range demoPods {
			if p.Name == server {
				serverIP = p.Status.PodIP
			}
		}
		serverNS := podNetnsByIP(ctx, t, serverIP)
		inPod := func(pod string) func(args ...string) (string, error) {
			return func(args ...string) (string, error) {
				out, _, err := node.Exec(ctx, kubeDemoNS, pod, "echo", args...)
				return out, err
			}
		}
		checkIPv6Refused(ctx, t, interfaceWithIP(ctx, t, node.IP.String()), serverNS, 8080, inPod(clientPod))
		plain := waitPodsReady(ctx, t, client, kubeDemoNS, "app=plain", 1, 1)[0].Name
		ll := ipv6LinkLocal(ctx, t, serverNS, "eth0")
		out, err := inPod(plain)("strait-echo", "get", "-n", "1", fmt.Sprintf("http://[%s%%25eth0]:8080/", ll))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range parseEchoLines(t, out) {
			if l.Error == "" || !strings.Contains(l.Error, "connection refused") {
				t.Errorf("plaintext from the inject=false pod to the server's [%s]:8080: %+v, want connection refused", ll, l)
			}
		}
		// The mesh path still works.
		for _, l := range get(t, 3, "http://"+serverHost+"/") {
			if l.Status != 200 {
				t.Errorf("mesh request after the IPv6 checks: %+v", l)
			}
		}
	})

	t.Run("deleting a pod drains without failed requests", func(t *testing.T) {
		pods := waitPodsReady(ctx, t, client, kubeDemoNS, "app=server,version=v1", 2, 2)
		type result struct {
			out string
			err error
		}
		done := make(chan result, 1)
		// The requests carry a key, so that the pod to be deleted counts
		// them: the delete waits until they flow through it (an exec can
		// take seconds to start on a loaded machine), and the check below
		// proves it fell inside them.
		const key = "drain"
		go func() {
			out, _, err := node.Exec(ctx, kubeDemoNS, clientPod, "echo", "strait-echo", "get", "-n", "300", "-interval", "20ms",
				"-header", "x-echo-key="+key, "http://"+serverHost+"/")
			done <- result{out, err}
		}()
		probes := 0
		waitEvery(ctx, t, time.Minute, kubePollInterval, "requests through pod "+pods[0].Name, func() error {
			// A request with the same key from inside the pod to its own
			// app (loopback is not captured): its attempt counts the
			// stream's requests and the probes.
			out, _, err := node.Exec(ctx, kubeDemoNS, pods[0].Name, "echo", "strait-echo", "get", "-header", "x-echo-key="+key, "http://127.0.0.1:8080/")
			if err != nil {
				return err
			}
			probes++
			lines := parseEchoLines(t, out)
			if len(lines) != 1 || lines[0].Reply == nil {
				return fmt.Errorf("probe of the app in %s: %q", pods[0].Name, out)
			}
			if n := lines[0].Reply.Attempt - probes; n < 3 {
				return fmt.Errorf("%d requests of the stream reached it, want 3", n)
			}
			return nil
		})
		if err := client.CoreV1().Pods(kubeDemoNS).Delete(ctx, pods[0].Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		r := <-done
		if r.err != nil {
			t.Fatal(r.err)
		}
		failed, fromDeleted, lastFromDeleted := 0, 0, -1
		lines := parseEchoLines(t, r.out)
		for i, l := range lines {
			if l.Status != 200 || l.Reply == nil {
				failed++
				t.Logf("failed: %+v", l)
				continue
			}
			if l.Reply.Pod == pods[0].Name {
				fromDeleted++
				lastFromDeleted = i
			}
		}
		if failed > 0 || len(lines) != 300 {
			t.Errorf("%d of %d requests failed while pod %s was deleted", failed, len(lines), pods[0].Name)
		}
		// The deleted pod was in rotation, and left it before the end.
		if fromDeleted == 0 || lastFromDeleted > len(lines)-50 {
			t.Errorf("pod %s answered %d requests, the last at %d of %d: the delete did not happen while requests flowed", pods[0].Name, fromDeleted, lastFromDeleted, len(lines))
		}
	})

	t.Run("native sidecar", func(t *testing.T) {
		d := echoDeployment("native", map[string]string{"app": "native"}, map[string]string{"sidecar.istio.io/nativeSidecar": "true"})
		if _, err := client.AppsV1().Deployments(kubeDemoNS).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		p := waitPodsReady(ctx, t, client, kubeDemoNS, "app=native", 1, 1)[0]
		t.Logf("native sidecar pod: %s, init containers %v", podState(p), containerNames(p.Spec.InitContainers))
		native := false
		for _, c := range p.Spec.InitContainers {
			if c.Name == "istio-proxy" && c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
				native = true
			}
		}
		if !native || contains(containerNames(p.Spec.Containers), "istio-proxy") {
			t.Fatalf("pod %s: want istio-proxy as an init container with restartPolicy Always (init %v, containers %v)",
				p.Name, containerNames(p.Spec.InitContainers), containerNames(p.Spec.Containers))
		}
		waitSynced(ctx, t, monitoring, []corev1.Pod{p})
		out, _, err := node.Exec(ctx, kubeDemoNS, p.Name, "echo", "strait-echo", "get", "-n", "5", "http://"+serverHost+"/")
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range parseEchoLines(t, out) {
			if l.Status != 200 || l.Reply == nil {
				t.Fatalf("request from the native-sidecar pod: %+v", l)
			}
			if host, _, _ := net.SplitHostPort(l.Reply.Remote); host != "127.0.0.6" {
				t.Errorf("the server app saw the native-sidecar pod's request from %s, want 127.0.0.6", l.Reply.Remote)
			}
		}
	})

	t.Run("install, uninstall, install leaves nothing behind", func(t *testing.T) {
		straitctl(t, "uninstall", "--purge")
		if left := leftovers(ctx, t, node); len(left) > 0 {
			t.Errorf("after uninstall --purge: %v", left)
		}
		straitctl(t, "install", "--set", "global.tag="+kubeImageTag, "--timeout", "4m")
		waitPodsReady(ctx, t, client, install.DefaultNamespace, "app=istiod", 1, 1)
		straitctl(t, "uninstall", "--purge")
		if left := leftovers(ctx, t, node); len(left) > 0 {
			t.Errorf("after install, uninstall, install, uninstall --purge: %v", left)
		}
	})
}

// leftovers lists the chart's objects (rendered with its defaults, CRDs
// included) that are still in the cluster.
func leftovers(ctx context.Context, t *testing.T, node *kubenode.Node) []string {
	t.Helper()
	chart, err := install.LoadChart()
	if err != nil {
		t.Fatal(err)
	}
	r, err := install.Render(chart, install.RenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(node.API.Config)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	var left []string
	// Deletion of a namespaced object can take a moment (finalizers).
	deadline := time.Now().Add(time.Minute)
	for _, o := range r.All() {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			continue // the kind itself is gone (its CRD was deleted)
		}
		res := node.API.Dynamic.Resource(m.Resource)
		for {
			var getErr error
			if m.Scope.Name() == "namespace" {
				_, getErr = res.Namespace(o.GetNamespace()).Get(ctx, o.GetName(), metav1.GetOptions{})
			} else {
				_, getErr = res.Get(ctx, o.GetName(), metav1.GetOptions{})
			}
			if apierrors.IsNotFound(getErr) || (getErr != nil && strings.Contains(getErr.Error(), "the server could not find the requested resource")) {
				break
			}
			if time.Now().After(deadline) {
				left = append(left, fmt.Sprintf("%s %s/%s (%v)", gvk.Kind, o.GetNamespace(), o.GetName(), getErr))
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	return append(left, namespaceLeftovers(ctx, t, node, install.DefaultNamespace)...)
}

// namespaceLeftovers lists every object in ns (every listable namespaced
// kind the API serves) but what uninstall keeps by design (Istio's too):
// the namespace's own default ServiceAccount and kube-root-ca.crt, the
// istio-ca-root-cert ConfigMap straitd wrote, and Events. Pods that are
// terminating are waited for.
func namespaceLeftovers(ctx context.Context, t *testing.T, node *kubenode.Node, ns string) []string {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(node.API.Config)
	if err != nil {
		t.Fatal(err)
	}
	lists, err := dc.ServerPreferredNamespacedResources()
	if err != nil {
		t.Fatal(err)
	}
	// v1 Endpoints would warn on every list (deprecated); its
	// EndpointSlices are listed anyway.
	cfg := rest.CopyConfig(node.API.Config)
	cfg.WarningHandler = rest.NoWarnings{}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	keep := map[string]bool{"ServiceAccount/default": true, "ConfigMap/kube-root-ca.crt": true, "ConfigMap/istio-ca-root-cert": true}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var left []string
		for _, l := range lists {
			gv, err := schema.ParseGroupVersion(l.GroupVersion)
			if err != nil {
				continue
			}
			for _, r := range l.APIResources {
				if !contains(r.Verbs, "list") || r.Kind == "Event" {
					continue
				}
				items, err := dyn.Resource(gv.WithResource(r.Name)).Namespace(ns).List(ctx, metav1.ListOptions{})
				if err != nil {
					continue
				}
				for _, it := range items.Items {
					if key := r.Kind + "/" + it.GetName(); !keep[key] {
						left = append(left, key)
					}
				}
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// echoDeployment is a one-replica strait-echo Deployment (server on 8080,
// its version from the version label, default v1).
func echoDeployment(name string, labels map[string]string, annotations map[string]string) *appsv1.Deployment {
	version := labels["version"]
	if version == "" {
		version = "v1"
	}
	one := int32(1)
	grace := int64(10)
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: kubeDemoNS},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: &grace,
					// The client resolves the Service's name for every
					// request (a new connection each). Parallel A and
					// AAAA queries from one UDP socket can lose one to
					// the kernel's conntrack race, which costs the
					// resolver its timeout: ask one after the other, and
					// retry after 1 s rather than the default 5 s (the
					// client's own request timeout).
					DNSConfig: &corev1.PodDNSConfig{Options: []corev1.PodDNSConfigOption{
						{Name: "single-request-reopen"}, {Name: "timeout", Value: ptr("1")}, {Name: "attempts", Value: ptr("3")}}},
					Containers: []corev1.Container{{
						Name:            "echo",
						Image:           "strait/strait-echo:" + kubeImageTag,
						ImagePullPolicy: corev1.PullIfNotPresent,
						Args:            []string{"--addr", ":8080", "--version", version},
						Ports:           []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
						Env: []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{
							FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
					}},
				},
			},
		},
	}
}

func parseEchoLines(t *testing.T, out string) []echoLine {
	t.Helper()
	var lines []echoLine
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var e echoLine
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("strait-echo get printed %q: %v", l, err)
		}
		lines = append(lines, e)
	}
	return lines
}

// versionShare sends 200 requests from the client pod and checks that
// between lo and hi of them were answered by version.
func versionShare(t *testing.T, get func(*testing.T, int, string) []echoLine, version string, lo, hi int) {
	t.Helper()
	lines := get(t, 200, "http://"+serverHost+"/")
	n := 0
	for _, l := range lines {
		if l.Status != 200 || l.Reply == nil {
			t.Fatalf("request failed: %+v", l)
		}
		if l.Reply.Version == version {
			n++
		}
	}
	t.Logf("%s answered %d of %d", version, n, len(lines))
	if n < lo || n > hi || len(lines) != 200 {
		t.Errorf("%s answered %d of %d requests, want %d to %d of 200", version, n, len(lines), lo, hi)
	}
}

// applyIstio creates or updates the Istio objects of a YAML stream.
func applyIstio(ctx context.Context, t *testing.T, node *kubenode.Node, stream string) {
	t.Helper()
	applyIstioTo(ctx, t, node.API.Dynamic, stream)
}

// applyIstioTo creates or updates the Istio objects of a YAML stream
// through dyn.
func applyIstioTo(ctx context.Context, t *testing.T, dyn dynamic.Interface, stream string) {
	t.Helper()
	for _, doc := range strings.Split(stream, "\n---\n") {
		var u unstructured.Unstructured
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		gvk := u.GroupVersionKind()
		resource := strings.ToLower(gvk.Kind) + "s"
		if base, ok := strings.CutSuffix(strings.ToLower(gvk.Kind), "ry"); ok {
			resource = base + "ries" // WorkloadEntry, ServiceEntry
		}
		if strings.HasSuffix(gvk.Kind, "s") {
			resource = strings.ToLower(gvk.Kind) + "es" // GatewayClass
		}
		gvr := schema.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: resource}
		res := dyn.Resource(gvr).Namespace(u.GetNamespace())
		cur, err := res.Get(ctx, u.GetName(), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = res.Create(ctx, &u, metav1.CreateOptions{})
		case err == nil:
			u.SetResourceVersion(cur.GetResourceVersion())
			_, err = res.Update(ctx, &u, metav1.UpdateOptions{})
		}
		if err != nil {
			t.Fatalf("apply %s %s: %v", gvk.Kind, u.GetName(), err)
		}
	}
}

func scale(ctx context.Context, t *testing.T, client kubernetes.Interface, name string, replicas int32) {
	t.Helper()
	s, err := client.AppsV1().Deployments(kubeDemoNS).GetScale(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Spec.Replicas = replicas
	if _, err := client.AppsV1().Deployments(kubeDemoNS).UpdateScale(ctx, name, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}
