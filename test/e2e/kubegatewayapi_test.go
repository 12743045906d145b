package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/straitmesh/strait/internal/install"
	"github.com/straitmesh/strait/internal/kubenode"
)

// kubeGatewayAPINS is the namespace of the Gateway API step: not
// labelled for injection, so that only the deployed gateway's own pod
// label asks for it.
const kubeGatewayAPINS = "gwapi"

// kubeGatewayAPIYAML: a Gateway of class istio with an HTTP listener for
// web.example.com, its Service a ClusterIP one (the node has no load
// balancer), and an HTTPRoute from it to the demo's server, across
// namespaces (the listener allows routes from every namespace).
const kubeGatewayAPIYAML = `apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata:
  name: istio
spec:
  controllerName: istio.io/gateway-controller
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: web
  namespace: gwapi
  annotations: {networking.istio.io/service-type: ClusterIP}
spec:
  gatewayClassName: istio
  listeners:
  - name: http
    port: 80
    protocol: HTTP
    hostname: web.example.com
    allowedRoutes: {namespaces: {from: All}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: server
  namespace: demo
spec:
  parentRefs:
  - {name: web, namespace: gwapi}
  hostnames: [web.example.com]
  rules:
  - matches:
    - path: {type: PathPrefix, value: /api}
    filters:
    - type: RequestHeaderModifier
      requestHeaderModifier:
        set: [{name: x-from-route, value: server}]
    backendRefs:
    - {name: server, port: 80}
`

// checkKubeGatewayAPI, a step of TestKubeSeedFlow: with the Gateway API's
// CRDs installed, a Gateway of class istio gets its gateway deployed by
// straitd (Deployment web-istio, its pod injected as a gateway: one
// istio-proxy container in router mode), its status Accepted and
// Programmed, and an HTTPRoute bound to it carries a request from the
// node to the demo's server, with the route's header set; a path the
// route does not match gets 404 from the gateway.
//
// When the gateway does not answer, the step logs what explains it:
// the HTTPRoute's and the Gateway's status, what straitd serves the
// gateway's proxy (/debug/config_dump: its listeners and routes) and
// the tail of straitd's log.
func checkKubeGatewayAPI(ctx context.Context, t *testing.T, node *kubenode.Node, client kubernetes.Interface, debugToken string) {
	if err := node.API.InstallGatewayAPICRDs(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kubeGatewayAPINS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	applyIstio(ctx, t, node, kubeGatewayAPIYAML)
	pods := waitPodsReady(ctx, t, client, kubeGatewayAPINS, "gateway.networking.k8s.io/gateway-name=web", 1, 1)
	gw := pods[0]
	if len(gw.Spec.InitContainers) != 0 || len(gw.Spec.Containers) != 1 || gw.Spec.Containers[0].Name != "istio-proxy" {
		t.Fatalf("gateway pod %s: init %v, containers %v; want only istio-proxy", gw.Name, containerNames(gw.Spec.InitContainers), containerNames(gw.Spec.Containers))
	}
	gwRes := node.API.Dynamic.Resource(schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gateways"}).Namespace(kubeGatewayAPINS)
	waitEvery(ctx, t, 2*time.Minute, kubePollInterval, "Gateway gwapi/web Accepted and Programmed", func() error {
		u, err := gwRes.Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, want := range []string{"Accepted", "Programmed"} {
			ok := false
			for _, c := range conds {
				if m, _ := c.(map[string]any); m["type"] == want && m["status"] == "True" {
					ok = true
				}
			}
			if !ok {
				return fmt.Errorf("no %s=True in %v", want, conds)
			}
		}
		return nil
	})
	hc := &http.Client{Timeout: 5 * time.Second}
	get := func(path string) (int, echoReply, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(gw.Status.PodIP, "80")+path, nil)
		if err != nil {
			return 0, echoReply{}, err
		}
		req.Host = "web.example.com"
		resp, err := hc.Do(req)
		if err != nil {
			return 0, echoReply{}, err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var r echoReply
		if resp.StatusCode == http.StatusOK && json.Unmarshal(body, &r) != nil {
			return resp.StatusCode, r, fmt.Errorf("not the echo's reply: %s", strings.TrimSpace(string(body)))
		}
		return resp.StatusCode, r, nil
	}
	defer func() {
		if t.Failed() {
			logGatewayAPIState(ctx, t, node, client, debugToken, gw.Name)
		}
	}()
	waitEvery(ctx, t, 2*time.Minute, kubePollInterval, "the Gateway API gateway answers for web.example.com/api", func() error {
		code, r, err := get("/api/x")
		if err != nil {
			return err
		}
		if code != http.StatusOK || r.Path != "/api/x" || !strings.HasPrefix(r.Version, "v") {
			return fmt.Errorf("status %d, reply %+v", code, r)
		}
		if got := r.Headers["X-From-Route"]; got != "server" {
			return fmt.Errorf("the server saw x-from-route %q, want the route's \"server\"", got)
		}
		return nil
	})
	if code, _, err := get("/other"); err != nil || code != http.StatusNotFound {
		t.Errorf("a path no rule matches: %d %v, want 404 from the gateway", code, err)
	}
}

// logGatewayAPIState logs the Gateway API step's state for a failure:
// the statuses of the Gateway and the HTTPRoute, straitd's config dump
// for the gateway's proxy (listeners and route configurations), and the
// tail of straitd's log.
func logGatewayAPIState(ctx context.Context, t *testing.T, node *kubenode.Node, client kubernetes.Interface, debugToken, gwPod string) {
	t.Helper()
	// straitd's pod now: an earlier step's install may have replaced it.
	pods, err := client.CoreV1().Pods(install.DefaultNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app=istiod"})
	if err != nil || len(pods.Items) == 0 {
		t.Logf("no straitd pod: %v", err)
		return
	}
	straitdPod := pods.Items[0]
	straitd := straitdDebug{addr: net.JoinHostPort(straitdPod.Status.PodIP, "15014"), token: debugToken}
	for _, o := range []struct{ resource, ns, name string }{{"gateways", kubeGatewayAPINS, "web"}, {"httproutes", kubeDemoNS, "server"}} {
		gvr := schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: o.resource}
		u, err := node.API.Dynamic.Resource(gvr).Namespace(o.ns).Get(ctx, o.name, metav1.GetOptions{})
		if err != nil {
			t.Logf("%s %s/%s: %v", o.resource, o.ns, o.name, err)
			continue
		}
		st, _ := json.MarshalIndent(u.Object["status"], "", "  ")
		t.Logf("%s %s/%s generation %d status:\n%s", o.resource, o.ns, o.name, u.GetGeneration(), st)
	}
	st, err := syncz(ctx, straitd)
	if err != nil {
		t.Logf("straitd's syncz: %v", err)
	}
	id := ""
	for _, s := range st {
		if strings.HasPrefix(proxyPod(s.ProxyID), gwPod+".") {
			id = s.ProxyID
			t.Logf("straitd's syncz for the gateway: %+v", s)
		}
	}
	if id == "" {
		t.Logf("the gateway's proxy (pod %s) is not connected to straitd: syncz %+v", gwPod, st)
	} else {
		out, err := exec.CommandContext(ctx, "curl", "-s", "--max-time", "5", "-H", "Authorization: Bearer "+straitd.token,
			"http://"+straitd.addr+"/debug/config_dump?proxyID="+url.QueryEscape(id)).CombinedOutput()
		t.Logf("straitd's config_dump for %s (%v):\n%s", id, err, out)
	}
	tail := int64(200)
	logs, err := client.CoreV1().Pods(install.DefaultNamespace).GetLogs(straitdPod.Name, &corev1.PodLogOptions{TailLines: &tail}).DoRaw(ctx)
	t.Logf("straitd's (%s) log, last %d lines (%v):\n%s", straitdPod.Name, tail, err, logs)
}

// kubeGatewayAPIMeshYAML: an HTTPRoute whose parent is the demo's Service
// server (GAMMA): the client's sidecar sets the route's header on its
// requests to the server.
const kubeGatewayAPIMeshYAML = `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: server-mesh
  namespace: demo
spec:
  parentRefs:
  - {group: "", kind: Service, name: server, port: 80}
  rules:
  - filters:
    - type: RequestHeaderModifier
      requestHeaderModifier:
        set: [{name: x-from-mesh-route, value: gamma}]
    backendRefs:
    - {name: server, port: 80}
`

// checkKubeGatewayAPIMesh, a step of TestKubeSeedFlow after
// checkKubeGatewayAPI (the CRDs installed): an HTTPRoute whose parent is
// the Service server applies to the client's sidecar, which sets the
// route's header on the requests it sends the server; once the route is
// deleted the header is gone (the later steps route the server with
// VirtualServices).
func checkKubeGatewayAPIMesh(ctx context.Context, t *testing.T, node *kubenode.Node, clientPod string) {
	// header is what the server saw of x-from-mesh-route on a request
	// from the client pod.
	header := func() (string, error) {
		out, _, err := node.Exec(ctx, kubeDemoNS, clientPod, "echo", "strait-echo", "get", "-n", "1", "http://"+serverHost+"/mesh")
		if err != nil {
			return "", err
		}
		var l struct {
			Status int        `json:"status"`
			Reply  *echoReply `json:"reply"`
		}
		if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &l); err != nil {
			return "", fmt.Errorf("strait-echo get printed %q: %w", out, err)
		}
		if l.Status != http.StatusOK || l.Reply == nil {
			return "", fmt.Errorf("status %d: %s", l.Status, strings.TrimSpace(out))
		}
		return l.Reply.Headers["X-From-Mesh-Route"], nil
	}
	applyIstio(ctx, t, node, kubeGatewayAPIMeshYAML)
	routes := node.API.Dynamic.Resource(schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "httproutes"}).Namespace(kubeDemoNS)
	defer func() {
		if err := routes.Delete(ctx, "server-mesh", metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete the mesh route: %v", err)
			return
		}
		waitEvery(ctx, t, time.Minute, kubePollInterval, "the mesh route's header gone once it is deleted", func() error {
			h, err := header()
			if err != nil {
				return err
			}
			if h != "" {
				return fmt.Errorf("the server still sees x-from-mesh-route %q", h)
			}
			return nil
		})
	}()
	waitEvery(ctx, t, 2*time.Minute, kubePollInterval, "the client's sidecar applies the Service's HTTPRoute", func() error {
		h, err := header()
		if err != nil {
			return err
		}
		if h != "gamma" {
			return fmt.Errorf("the server saw x-from-mesh-route %q, want the route's \"gamma\"", h)
		}
		return nil
	})
	waitEvery(ctx, t, time.Minute, kubePollInterval, "the mesh route's status: the Service server Accepted by istio.io/gateway-controller", func() error {
		u, err := routes.Get(ctx, "server-mesh", metav1.GetOptions{})
		if err != nil {
			return err
		}
		parents, _, _ := unstructured.NestedSlice(u.Object, "status", "parents")
		if len(parents) != 1 {
			return fmt.Errorf("status.parents %v, want the Service's", parents)
		}
		p, _ := parents[0].(map[string]any)
		ref, _ := p["parentRef"].(map[string]any)
		conds, _ := p["conditions"].([]any)
		accepted := false
		for _, c := range conds {
			if m, _ := c.(map[string]any); m["type"] == "Accepted" && m["status"] == "True" {
				accepted = true
			}
		}
		if ref["kind"] != "Service" || ref["name"] != "server" || p["controllerName"] != "istio.io/gateway-controller" || !accepted {
			return fmt.Errorf("status.parents[0] %v", p)
		}
		return nil
	})
}
