package kube

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/straitmesh/strait/internal/xds/gen"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// TestGatewayAPIMeshOnRealAPIServer: an HTTPRoute whose parentRef is a
// Service (GAMMA) applied to a real API server reaches the sidecar of a
// client of that Service: its route configuration 80 sends the
// Service's requests to the route's backend with the route's header
// set; the route's status has the Service parent Accepted and
// ResolvedRefs, as Istio writes it; deleting the route restores the
// Service's own route.
func TestGatewayAPIMeshOnRealAPIServer(t *testing.T) {
	env := sharedEnv(t)
	f := newFixture(t, env, "kgamma")
	if err := env.InstallGatewayAPICRDs(f.ctx); err != nil {
		t.Fatal(err)
	}
	node := f.pod("client", "10.200.10.1", nil)
	f.service("web", corev1.ServicePort{Name: "http", Port: 80})
	f.service("web-v2", corev1.ServicePort{Name: "http", Port: 80})
	p := startPlane(t, env.Config, Options{GatewayAPI: true})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := p.reg.WriteStatus(ctx); err != nil {
			t.Errorf("WriteStatus: %v", err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })

	c := dialADS(t, p.addr, node)
	c.subscribe(t, xdsapi.ClusterType)
	c.subscribe(t, xdsapi.ListenerType)
	c.subscribe(t, xdsapi.RouteType, "80")
	c.wait(t, "RDS", 10*time.Second, func() bool { return c.routeConfig("80") != nil })

	routes := env.Dynamic.Resource(gwapiGVR("httproutes")).Namespace(f.ns)
	if _, err := routes.Create(f.ctx, fromYAML(t, `
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web}
spec:
  parentRefs: [{group: "", kind: Service, name: web, port: 80}]
  rules:
  - filters: [{type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: x-from-route, value: mesh}]}}]
    backendRefs: [{name: web-v2, port: 80}]
`), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	v2 := gen.OutboundClusterName(80, "", f.host("web-v2"))
	// served reports whether the client's route to web goes to web-v2
	// with the route's header.
	served := func() bool {
		rc := c.routeConfig("80")
		if rc == nil {
			return false
		}
		for _, vh := range rc.VirtualHosts {
			if !slices.Contains(vh.Domains, f.host("web")) {
				continue
			}
			for _, r := range vh.Routes {
				if r.GetRoute().GetCluster() == v2 && hasHeader(r.RequestHeadersToAdd, "x-from-route", "mesh") {
					return true
				}
			}
		}
		return false
	}
	c.wait(t, "the client's route to web through the HTTPRoute", 15*time.Second, served)

	u := waitStatus(t, routes, "web", "the Service parent Accepted and ResolvedRefs", func(u *unstructured.Unstructured) bool {
		p := routeParent(u)
		conds, _ := p["conditions"].([]any)
		return hasCondition(conds, "Accepted", "True", "Accepted") && hasCondition(conds, "ResolvedRefs", "True", "ResolvedRefs")
	})
	ref, _ := routeParent(u)["parentRef"].(map[string]any)
	if ref["kind"] != "Service" || ref["name"] != "web" || ref["port"] != int64(80) {
		t.Errorf("status parentRef %v, want the Service web port 80 as written", ref)
	}

	if err := routes.Delete(f.ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.wait(t, "the Service's own route after the HTTPRoute is deleted", 15*time.Second, func() bool { return !served() })
}
