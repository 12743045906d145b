package kube

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/straitmesh/strait/internal/istioconfig"
	"github.com/straitmesh/strait/internal/kubeapiserver"
	"github.com/straitmesh/strait/internal/mesh"
	"github.com/straitmesh/strait/internal/proxypush"
	"github.com/straitmesh/strait/internal/registry/kube/gatewayapi"
	"github.com/straitmesh/strait/internal/xds/gen"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// gwOrderCase is one Gateway API setup of TestGatewayAPIRouteReachesRouter:
// a GatewayClass, a Gateway in namespace gwNS whose listener allows routes
// from routeNS, and an HTTPRoute in routeNS bound to it across namespaces,
// as the e2e's step applies them.
// fixedSource serves one snapshot to a generator.
type fixedSource struct{ snap *mesh.Snapshot }

func (f fixedSource) Snapshot() *mesh.Snapshot { return f.snap }

type gwOrderCase struct {
	class, gateway, gwNS, routeNS string
}

func (c gwOrderCase) docs(allowed string) (class, gateway, httpRoute string) {
	class = fmt.Sprintf(`
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: %s}
spec: {controllerName: istio.io/gateway-controller}
`, c.class)
	gateway = fmt.Sprintf(`
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: %s
  namespace: %s
  annotations: {networking.istio.io/service-type: ClusterIP}
spec:
  gatewayClassName: %s
  listeners:
  - name: http
    port: 80
    protocol: HTTP
    hostname: web.example.com
    allowedRoutes: {namespaces: %s}
`, c.gateway, c.gwNS, c.class, allowed)
	httpRoute = fmt.Sprintf(`
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: server, namespace: %s}
spec:
  parentRefs: [{name: %s, namespace: %s}]
  hostnames: [web.example.com]
  rules:
  - matches: [{path: {type: PathPrefix, value: /api}}]
    filters:
    - type: RequestHeaderModifier
      requestHeaderModifier: {set: [{name: x-from-route, value: server}]}
    backendRefs: [{name: server, port: 80}]
`, c.routeNS, c.gateway, c.gwNS)
	return class, gateway, httpRoute
}

// create applies one Gateway API object written as YAML.
func createGatewayAPI(t *testing.T, ctx context.Context, dyn dynamic.Interface, resource, doc string) {
	t.Helper()
	u := fromYAML(t, doc)
	gvr := schema.GroupVersionResource{Group: GatewayAPIGroup, Version: "v1", Resource: resource}
	var err error
	if u.GetNamespace() == "" {
		_, err = dyn.Resource(gvr).Create(ctx, u, metav1.CreateOptions{})
	} else {
		_, err = dyn.Resource(gvr).Namespace(u.GetNamespace()).Create(ctx, u, metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatalf("create %s %s: %v", resource, u.GetName(), err)
	}
}

// routerFor creates the pod of the Gateway gateway in f's namespace
// (as straitd deploys it) and connects its proxy (type router).
func routerFor(t *testing.T, p *plane, f *fixture, gateway, ip string) *adsClient {
	t.Helper()
	f.pod(gateway+"-istio-0", ip, gatewayapi.PodSelector(f.ns, gateway))
	return dialRouter(t, p, f.ns, gateway, ip)
}

// dialRouter connects the proxy of the Gateway's pod, subscribed to
// the listeners and to the route configuration http.80.
func dialRouter(t *testing.T, p *plane, ns, gateway, ip string) *adsClient {
	t.Helper()
	c := dialADS(t, p.addr, proxypush.TypedNodeID(proxypush.Router, ip, gateway+"-istio-0", ns, ""))
	c.subscribe(t, xdsapi.ListenerType)
	c.subscribe(t, xdsapi.RouteType, "http.80")
	return c
}

// routeServed reports whether the router's http.80 has the HTTPRoute's
// rule: a virtual host web.example.com whose /api prefix route sets
// x-from-route, and a description of what it has.
func routeServed(c *adsClient) (bool, string) {
	rc := c.routeConfig("http.80")
	if rc == nil {
		return false, "no route configuration http.80"
	}
	var vhosts []string
	for _, vh := range rc.VirtualHosts {
		vhosts = append(vhosts, vh.Name)
		if !slices.Contains(vh.Domains, "web.example.com") {
			continue
		}
		for _, r := range vh.Routes {
			// PathPrefix /api matches whole segments: the regex
			// /api(/.*)? (gatewayapi's translation).
			if r.GetMatch().GetSafeRegex().GetRegex() != "/api(/.*)?" {
				continue
			}
			if hasHeader(r.RequestHeadersToAdd, "x-from-route", "server") {
				return true, ""
			}
		}
	}
	return false, fmt.Sprintf("http.80 has virtual hosts %v", vhosts)
}

func hasHeader(hs []*core.HeaderValueOption, name, value string) bool {
	for _, h := range hs {
		if strings.EqualFold(h.GetHeader().GetKey(), name) && h.GetHeader().GetValue() == value {
			return true
		}
	}
	return false
}

// waitRouteServed waits until the router serves the HTTPRoute's rule,
// failing with the snapshot's translation when it does not.
func waitRouteServed(t *testing.T, p *plane, c *adsClient, what string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		ok, got := routeServed(c)
		if ok {
			return
		}
		if time.Now().After(deadline) {
			var configs []string
			for _, kind := range []proxypush.Kind{istioconfig.KindGateway, istioconfig.KindVirtualService} {
				for _, c := range p.reg.Snapshot().Configs.List(kind) {
					configs = append(configs, string(kind)+" "+c.Namespace+"/"+c.Name)
				}
			}
			t.Fatalf("%s: the router does not serve the HTTPRoute: %s; the snapshot's Gateways and VirtualServices: %v", what, got, configs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestGatewayAPIRouteReachesRouter: an HTTPRoute bound across namespaces
// to a Gateway reaches the Gateway's proxy (a router connected before any
// of it exists) whatever the order the objects arrive in: the route
// before its Gateway and GatewayClass, the CRDs installed while straitd
// runs, the route's namespace labelled for the listener's selector
// after the route exists, and a straitd started after everything.
func TestGatewayAPIRouteReachesRouter(t *testing.T) {
	sharedEnv(t) // skips when the binaries cannot be had
	// The Gateway API CRDs are installed while straitd runs, as in the
	// e2e.
	env := kubeapiserver.Start(t, kubeapiserver.Options{})
	p := startPlane(t, env.Config, Options{GatewayAPI: true})
	// The leader's writers run, as in straitd: statuses, and the
	// gateways' Deployments and Services.
	lctx, lcancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = p.reg.WriteStatus(lctx) })
	wg.Go(func() { _ = p.reg.DeployGateways(lctx) })
	t.Cleanup(func() { lcancel(); wg.Wait() })
	all := `{from: All}`

	t.Run("objects right after the CRDs", func(t *testing.T) {
		// As the e2e applies them: before straitd has listed the kinds.
		// The e2e's names.
		c := gwOrderCase{class: "istio", gateway: "web", gwNS: "gwapi", routeNS: "demo"}
		gwf, rtf := newFixture(t, env, c.gwNS), newFixture(t, env, c.routeNS)
		ctx := gwf.ctx
		rtf.service("server", corev1.ServicePort{Name: "http", Port: 80})
		// The e2e's earlier step: an Istio Gateway of the chart's
		// ingress gateway on port 80, and a VirtualService bound to it.
		istioNS := newFixture(t, env, "istio-system")
		for _, o := range []struct{ resource, doc string }{{"gateways", `
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: ingress, namespace: istio-system}
spec:
  selector: {istio: ingressgateway}
  servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: ["*"]}]
`}, {"virtualservices", `
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: server-ingress, namespace: demo}
spec:
  hosts: [server.example.com]
  gateways: [istio-system/ingress]
  http: [{route: [{destination: {host: server.demo.svc.cluster.local}}]}]
`}} {
			u := fromYAML(t, o.doc)
			gvr := schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1", Resource: o.resource}
			if _, err := env.Dynamic.Resource(gvr).Namespace(u.GetNamespace()).Create(istioNS.ctx, u, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if err := env.InstallGatewayAPICRDs(ctx); err != nil {
			t.Fatal(err)
		}
		class, gw, rt := c.docs(all)
		createGatewayAPI(t, ctx, env.Dynamic, "gatewayclasses", class)
		createGatewayAPI(t, ctx, env.Dynamic, "gateways", gw)
		createGatewayAPI(t, ctx, env.Dynamic, "httproutes", rt)
		// The gateway's pod comes up once the Gateway is deployed.
		time.Sleep(time.Second)
		router := routerFor(t, p, gwf, c.gateway, "10.200.9.10")
		waitRouteServed(t, p, router, c.gwNS)

		// The backend's pods become ready: an endpoints-only change
		// (the registry's fast path, mesh.Snapshot.UpdateEndpoints). The
		// snapshot it publishes still gives the gateway its route: what
		// straitd serves a gateway proxy that connects or is pushed then
		// (the e2e's gateway answered 404 after its own pod's
		// EndpointSlice, the snapshot having lost every VirtualService).
		before := p.reg.Snapshot()
		rtf.endpoints("server", "http", 8080, []string{"10.200.9.20"}, nil)
		deadline := time.Now().Add(10 * time.Second)
		for p.reg.Snapshot() == before {
			if time.Now().After(deadline) {
				t.Fatal("the EndpointSlice did not reach the snapshot")
			}
			time.Sleep(5 * time.Millisecond)
		}
		after := p.reg.Snapshot()
		proxy, err := proxypush.ParseNodeID(proxypush.TypedNodeID(proxypush.Router, "10.200.9.10", c.gateway+"-istio-0", c.gwNS, ""))
		if err != nil {
			t.Fatal(err)
		}
		res, err := gen.New(fixedSource{after}).Generate(proxy, xdsapi.RouteType, []string{"http.80"}, &proxypush.PushRequest{Full: true})
		if err != nil {
			t.Fatal(err)
		}
		var rc route.RouteConfiguration
		if len(res) != 1 || res[0].GetResource().UnmarshalTo(&rc) != nil || !slices.ContainsFunc(rc.VirtualHosts, func(vh *route.VirtualHost) bool {
			return slices.Contains(vh.Domains, "web.example.com")
		}) {
			t.Fatalf("after an endpoints-only change (snapshot %d → %d) the gateway's http.80 has no web.example.com: %v", before.Version, after.Version, &rc)
		}
		waitRouteServed(t, p, dialRouter(t, p, c.gwNS, c.gateway, "10.200.9.10"), c.gwNS+" after an endpoints-only change")
	})
	deadline := time.Now().Add(30 * time.Second)
	for !slices.Contains(p.reg.WatchedKinds(), GatewayAPIGroup+"/HTTPRoute") || !slices.Contains(p.reg.WatchedKinds(), GatewayAPIGroup+"/Gateway") {
		if time.Now().After(deadline) {
			t.Fatalf("Gateway API kinds not watched after their CRDs were installed: %v", p.reg.WatchedKinds())
		}
		time.Sleep(50 * time.Millisecond)
	}

	t.Run("gateway then route", func(t *testing.T) {
		c := gwOrderCase{class: "istio1", gateway: "web1", gwNS: "gw1", routeNS: "rt1"}
		gwf, rtf := newFixture(t, env, c.gwNS), newFixture(t, env, c.routeNS)
		ctx := gwf.ctx
		rtf.service("server", corev1.ServicePort{Name: "http", Port: 80})
		router := routerFor(t, p, gwf, c.gateway, "10.200.9.1")
		class, gw, rt := c.docs(all)
		createGatewayAPI(t, ctx, env.Dynamic, "gatewayclasses", class)
		createGatewayAPI(t, ctx, env.Dynamic, "gateways", gw)
		createGatewayAPI(t, ctx, env.Dynamic, "httproutes", rt)
		waitRouteServed(t, p, router, c.gwNS)
	})
	t.Run("route then gateway then class", func(t *testing.T) {
		c := gwOrderCase{class: "istio2", gateway: "web2", gwNS: "gw2", routeNS: "rt2"}
		gwf, rtf := newFixture(t, env, c.gwNS), newFixture(t, env, c.routeNS)
		ctx := gwf.ctx
		rtf.service("server", corev1.ServicePort{Name: "http", Port: 80})
		router := routerFor(t, p, gwf, c.gateway, "10.200.9.2")
		class, gw, rt := c.docs(all)
		createGatewayAPI(t, ctx, env.Dynamic, "httproutes", rt)
		createGatewayAPI(t, ctx, env.Dynamic, "gateways", gw)
		createGatewayAPI(t, ctx, env.Dynamic, "gatewayclasses", class)
		waitRouteServed(t, p, router, c.gwNS)
	})
	t.Run("namespace labelled after the route", func(t *testing.T) {
		c := gwOrderCase{class: "istio3", gateway: "web3", gwNS: "gw3", routeNS: "rt3"}
		gwf, rtf := newFixture(t, env, c.gwNS), newFixture(t, env, c.routeNS)
		ctx := gwf.ctx
		rtf.service("server", corev1.ServicePort{Name: "http", Port: 80})
		router := routerFor(t, p, gwf, c.gateway, "10.200.9.3")
		class, gw, rt := c.docs(`{from: Selector, selector: {matchLabels: {routes: allowed}}}`)
		createGatewayAPI(t, ctx, env.Dynamic, "gatewayclasses", class)
		createGatewayAPI(t, ctx, env.Dynamic, "gateways", gw)
		createGatewayAPI(t, ctx, env.Dynamic, "httproutes", rt)
		time.Sleep(500 * time.Millisecond)
		if ok, _ := routeServed(router); ok {
			t.Fatal("the route is served before its namespace has the label the listener selects")
		}
		ns, err := env.Client.CoreV1().Namespaces().Get(ctx, c.routeNS, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ns.Labels = map[string]string{"routes": "allowed"}
		if _, err := env.Client.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitRouteServed(t, p, router, c.gwNS)
	})
	t.Run("straitd started after", func(t *testing.T) {
		// The objects of the cases above, read by a straitd that lists
		// them all at start.
		q := startPlane(t, env.Config, Options{GatewayAPI: true})
		waitRouteServed(t, q, dialRouter(t, q, "gwapi", "web", "10.200.9.10"), "gwapi")
		for i := range 3 {
			ns, gateway, ip := fmt.Sprintf("gw%d", i+1), fmt.Sprintf("web%d", i+1), fmt.Sprintf("10.200.9.%d", i+1)
			waitRouteServed(t, q, dialRouter(t, q, ns, gateway, ip), ns)
		}
	})
}
