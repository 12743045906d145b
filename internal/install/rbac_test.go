package install

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/straitmesh/strait/internal/freeport"
	"github.com/straitmesh/strait/internal/istioconfig"
	"github.com/straitmesh/strait/internal/kubeapiserver"
	"github.com/straitmesh/strait/internal/testreq"
)

// straitdBinary is $STRAIT_BIN_DIR/straitd (make test builds it) or a
// fresh build.
func straitdBinary(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("STRAIT_BIN_DIR"); dir != "" {
		return filepath.Join(dir, "straitd")
	}
	goTool := testreq.Binary(t, "go", "golang-go", "/usr/local/go/bin/go")
	_, file, _, _ := runtime.Caller(0)
	out := t.TempDir()
	cmd := exec.Command(goTool, "build", "-o", out+"/", "./cmd/straitd")
	cmd.Dir = filepath.Join(filepath.Dir(file), "..", "..")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build straitd: %v\n%s", err, b)
	}
	return filepath.Join(out, "straitd")
}

func freePort(t *testing.T) string {
	t.Helper()
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// syncBuffer is a bytes.Buffer safe for the process's writer and the
// test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestChartRBACIsEnough runs straitd, with the arguments of the chart's
// Deployment, as the chart's ServiceAccount (impersonated) against a real
// kube-apiserver: the ClusterRole and Role must let it sync and become
// ready, win the Lease and write the webhook's caBundle, and publish the
// root certificate ConfigMap into a new namespace, write a refused
// VirtualService's status, and deploy a Gateway API Gateway's gateway and
// write its status; nothing is forbidden. With
// global.istiod.enableAnalysis false, straitd writes no status (and is
// granted none) and only logs the refusal.
func TestChartRBACIsEnough(t *testing.T) {
	t.Run("analysis on", func(t *testing.T) { chartRBACRun(t, true) })
	t.Run("analysis off", func(t *testing.T) { chartRBACRun(t, false) })
}

func chartRBACRun(t *testing.T, analysis bool) {
	env := kubeapiserver.Start(t, kubeapiserver.Options{NoIstioCRDs: true, GatewayAPI: true})
	bin := straitdBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := NewClient(env.Config, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.PollInterval = 100 * time.Millisecond
	r := render(t, RenderOptions{Values: map[string]any{"global": map[string]any{"istiod": map[string]any{"enableAnalysis": analysis}}}})
	if err := c.Apply(ctx, r, DefaultNamespace); err != nil {
		t.Fatal(err)
	}

	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: env.Config.Host, CertificateAuthorityData: env.CAData()}
	kc.AuthInfos["straitd"] = &clientcmdapi.AuthInfo{Token: env.Token(), Impersonate: "system:serviceaccount:" + DefaultNamespace + ":straitd"}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "straitd"}
	kc.CurrentContext = "c"
	kcPath := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, kcPath); err != nil {
		t.Fatal(err)
	}

	var args []string
	for _, o := range r.Objects {
		if o.GetKind() == "Deployment" {
			cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			args = toStrings(cs[0].(map[string]any)["args"])
		}
	}
	if len(args) == 0 {
		t.Fatal("no straitd args in the chart's Deployment")
	}
	mon := freePort(t)
	args = append(args, "--kubeconfig="+kcPath, "--xds-addr="+freePort(t), "--monitoring-addr="+mon,
		"--secure-xds-addr="+freePort(t), "--inject-addr="+freePort(t),
		"--ca-dir="+t.TempDir(), "--cacerts-dir="+t.TempDir())
	var logs syncBuffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("straitd log:\n%s", logs.String())
		}
	}()

	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for !ok() {
			select {
			case <-ctx.Done():
				t.Fatalf("straitd as the chart's ServiceAccount: %s did not happen", what)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	waitFor("ready on /healthz/ready", func() bool {
		resp, err := http.Get("http://" + mon + "/healthz/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	waitFor("caBundle written into the webhook", func() bool {
		mwc, err := env.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "istio-sidecar-injector", metav1.GetOptions{})
		return err == nil && len(mwc.Webhooks) > 0 && len(mwc.Webhooks[0].ClientConfig.CABundle) > 0
	})
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "demo"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("istio-ca-root-cert published into namespace demo", func() bool {
		_, err := env.Client.CoreV1().ConfigMaps("demo").Get(ctx, "istio-ca-root-cert", metav1.GetOptions{})
		return err == nil
	})
	// A VirtualService that sets a field Strait refuses gets the reason
	// on its status, written by straitd as the chart's ServiceAccount.
	vsGVR := schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1", Resource: "virtualservices"}
	vs := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
		"metadata": map[string]any{"name": "refused", "namespace": "demo"},
		"spec": map[string]any{"hosts": []any{"web"}, "http": []any{map[string]any{
			"match": []any{map[string]any{"statPrefix": "x"}},
			"route": []any{map[string]any{"destination": map[string]any{"host": "web"}}},
		}}},
	}}
	if _, err := env.Dynamic.Resource(vsGVR).Namespace("demo").Create(ctx, vs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const reason = "spec.http[0].match[0].statPrefix: not supported by Strait yet"
	statusNames := func() []string {
		u, err := env.Dynamic.Resource(vsGVR).Namespace("demo").Get(ctx, "refused", metav1.GetOptions{})
		if err != nil {
			return nil
		}
		msgs, _, _ := unstructured.NestedSlice(u.Object, "status", "validationMessages")
		var names []string
		for _, m := range msgs {
			name, _, _ := unstructured.NestedString(m.(map[string]any), "type", "name")
			names = append(names, name)
		}
		return names
	}
	if analysis {
		waitFor("the refused VirtualService's status.validationMessages naming the field", func() bool {
			return slices.ContainsFunc(statusNames(), func(n string) bool { return strings.Contains(n, reason) })
		})
	} else {
		waitFor("the refusal logged", func() bool { return strings.Contains(logs.String(), reason) })
		// The writer, had it run, writes within a second of the refusal.
		time.Sleep(2 * time.Second)
		if names := statusNames(); len(names) != 0 {
			t.Errorf("status written with analysis off: %q", names)
		}
		if strings.Contains(logs.String(), "writing config status") {
			t.Errorf("straitd started its status writer with --config-status=false")
		}
	}
	// A Gateway API Gateway of class istio: straitd deploys its gateway
	// and, with analysis on, writes its status.
	gwGVR := func(res string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: res}
	}
	class := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
		"metadata": map[string]any{"name": "istio"},
		"spec":     map[string]any{"controllerName": "istio.io/gateway-controller"},
	}}
	gw := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
		"metadata": map[string]any{"name": "gw", "namespace": "demo"},
		"spec": map[string]any{"gatewayClassName": "istio", "listeners": []any{
			map[string]any{"name": "http", "port": int64(80), "protocol": "HTTP"},
		}},
	}}
	if _, err := env.Dynamic.Resource(gwGVR("gatewayclasses")).Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Dynamic.Resource(gwGVR("gateways")).Namespace("demo").Create(ctx, gw, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("the Gateway's Deployment, Service and ServiceAccount gw-istio", func() bool {
		_, e1 := env.Client.AppsV1().Deployments("demo").Get(ctx, "gw-istio", metav1.GetOptions{})
		_, e2 := env.Client.CoreV1().Services("demo").Get(ctx, "gw-istio", metav1.GetOptions{})
		_, e3 := env.Client.CoreV1().ServiceAccounts("demo").Get(ctx, "gw-istio", metav1.GetOptions{})
		return e1 == nil && e2 == nil && e3 == nil
	})
	if analysis {
		waitFor("the Gateway's status Accepted", func() bool {
			u, err := env.Dynamic.Resource(gwGVR("gateways")).Namespace("demo").Get(ctx, "gw", metav1.GetOptions{})
			if err != nil {
				return false
			}
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			for _, c := range conds {
				if m := c.(map[string]any); m["type"] == "Accepted" && m["status"] == "True" {
					return true
				}
			}
			return false
		})
	}
	if l := logs.String(); strings.Contains(strings.ToLower(l), "forbidden") {
		t.Errorf("straitd was refused something by the chart's RBAC:\n%s", grepLines(l, "forbidden"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(strings.ToLower(l), sub) {
			out = append(out, l)
		}
	}
	return fmt.Sprint(strings.Join(out, "\n"))
}

// TestChartRBACStatusKinds: the ClusterRole lets straitd update the status
// subresource of exactly the Istio and Gateway API kinds it translates,
// and do nothing else with any status; with global.istiod.enableAnalysis
// false, no status at all.
func TestChartRBACStatusKinds(t *testing.T) {
	t.Run("analysis off", func(t *testing.T) {
		r := render(t, RenderOptions{Values: map[string]any{"global": map[string]any{"istiod": map[string]any{"enableAnalysis": false}}}})
		if got := statusGrants(t, r); len(got) != 0 {
			t.Errorf("ClusterRole grants status of %v with analysis off, want none", got)
		}
	})
	r := render(t, RenderOptions{})
	plural := map[string]string{} // GROUP/Kind → GROUP/plural
	for _, crd := range r.CRDs {
		group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
		p, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
		plural[group+"/"+kind] = group + "/" + p
	}
	var want []string
	for _, k := range istioconfig.Kinds {
		p := plural[istioconfig.GroupOf(k)+"/"+string(k)]
		if p == "" {
			t.Fatalf("no CRD in the chart for %s", k)
		}
		want = append(want, p+"/status")
	}
	// The Gateway API kinds translated (registry/kube/gatewayapi).
	for _, res := range []string{"gatewayclasses", "gateways", "httproutes", "grpcroutes", "tlsroutes", "tcproutes"} {
		want = append(want, "gateway.networking.k8s.io/"+res+"/status")
	}
	got := statusGrants(t, r)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("ClusterRole grants status of\n %v\nwant the translated kinds'\n %v", got, want)
	}
}

// statusGrants lists GROUP/RESOURCE/status of each status grant in the
// chart's ClusterRoles, checking each grants update only.
func statusGrants(t *testing.T, r Rendered) []string {
	t.Helper()
	var got []string
	for _, o := range r.Objects {
		if o.GetKind() != "ClusterRole" {
			continue
		}
		rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
		for _, rule := range rules {
			m := rule.(map[string]any)
			for _, res := range toStrings(m["resources"]) {
				if !strings.HasSuffix(res, "/status") && res != "*/status" {
					continue
				}
				if verbs := toStrings(m["verbs"]); !slices.Equal(verbs, []string{"update"}) {
					t.Errorf("%s: verbs %v, want only update (straitd writes status with UpdateStatus)", res, verbs)
				}
				for _, g := range toStrings(m["apiGroups"]) {
					got = append(got, g+"/"+res)
				}
			}
		}
	}
	return got
}

// TestChartGatewaySecretsReview: with the ingress gateway enabled, the
// chart lets straitd ask the API server (a SubjectAccessReview, as the
// chart's ServiceAccount) whether a gateway may have its Secrets, and
// the answer is yes for the gateway's service account (its Role) and no
// for the namespace's default one: straitd serves a Gateway's
// credentialName only on a yes (registry/kube secretauthz.go).
func TestChartGatewaySecretsReview(t *testing.T) {
	env := kubeapiserver.Start(t, kubeapiserver.Options{NoIstioCRDs: true})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := NewClient(env.Config, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.PollInterval = 100 * time.Millisecond
	vals, err := MergeValues(nil, []string{"gateways.istio-ingressgateway.enabled=true"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Apply(ctx, render(t, RenderOptions{Values: vals}), DefaultNamespace); err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + DefaultNamespace + ":straitd"}
	asStraitd, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for sa, want := range map[string]bool{"istio-ingressgateway-service-account": true, "default": false} {
		resp, err := asStraitd.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:               "system:serviceaccount:" + DefaultNamespace + ":" + sa,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: DefaultNamespace, Verb: "list", Resource: "secrets"},
		}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("straitd's SubjectAccessReview: %v", err)
		}
		if resp.Status.Allowed != want {
			t.Errorf("%s may list the namespace's Secrets: %t, want %t (%s)", sa, resp.Status.Allowed, want, resp.Status.Reason)
		}
	}
}
