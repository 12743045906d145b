package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

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
func checkKubeGatewayAPI(ctx context.Context, t *testing.T, node *kubenode.Node, client kubernetes.Interface) {
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
