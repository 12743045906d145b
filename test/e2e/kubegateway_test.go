package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/straitmesh/strait/internal/install"
	"github.com/straitmesh/strait/internal/kubenode"
)

// kubeGatewayYAML binds the demo's server to the chart's ingress gateway
// for the host server.example.com.
const kubeGatewayYAML = `apiVersion: networking.istio.io/v1
kind: Gateway
metadata:
  name: ingress
  namespace: istio-system
spec:
  selector:
    istio: ingressgateway
  servers:
  - port: {number: 80, name: http, protocol: HTTP}
    hosts: ["*"]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: server-ingress
  namespace: demo
spec:
  hosts: [server.example.com]
  gateways: [istio-system/ingress]
  http:
  - route:
    - destination: {host: server.demo.svc.cluster.local}
`

// checkKubeIngressGateway: `straitctl install` with
// gateways.istio-ingressgateway.enabled brings up the chart's ingress
// gateway, injected by straitd with the gateway template (one container,
// istio-proxy running proxy router, no istio-init), and a Gateway with a
// VirtualService bound to it carries a request from the node to the
// demo's server through the gateway's proxy.
func checkKubeIngressGateway(ctx context.Context, t *testing.T, node *kubenode.Node, client kubernetes.Interface, straitctl func(*testing.T, ...string) string) {
	t.Log(straitctl(t, "install", "--set", "global.tag="+kubeImageTag, "--set", "gateways.istio-ingressgateway.enabled=true",
		"--set", "gateways.istio-ingressgateway.type=ClusterIP", "--timeout", "4m"))
	gw := waitPodsReady(ctx, t, client, install.DefaultNamespace, "istio=ingressgateway", 1, 1)[0]
	if len(gw.Spec.InitContainers) != 0 || len(gw.Spec.Containers) != 1 || gw.Spec.Containers[0].Name != "istio-proxy" {
		t.Fatalf("gateway pod %s: init %v, containers %v; want only istio-proxy", gw.Name, containerNames(gw.Spec.InitContainers), containerNames(gw.Spec.Containers))
	}
	if args := gw.Spec.Containers[0].Args; !slices.Contains(args, "router") || gw.Spec.Containers[0].Image == "auto" {
		t.Fatalf("gateway container image %s args %v: want the proxy image running proxy router", gw.Spec.Containers[0].Image, args)
	}
	applyIstio(ctx, t, node, kubeGatewayYAML)
	hc := &http.Client{Timeout: 5 * time.Second}
	url := "http://" + net.JoinHostPort(gw.Status.PodIP, "80") + "/through-gateway"
	waitEvery(ctx, t, 2*time.Minute, kubePollInterval, "the ingress gateway answers for server.example.com", func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		req.Host = "server.example.com"
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var r echoReply
		if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &r) != nil || r.Path != "/through-gateway" {
			return fmt.Errorf("status %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
		}
		if !strings.HasPrefix(r.Version, "v") {
			return fmt.Errorf("answered by %q, not the demo's server", r.Version)
		}
		return nil
	})
}
