package gen_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"k8s.io/apimachinery/pkg/util/yaml"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/conformance"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/straitmesh/strait/internal/mesh"
	proxyroute "github.com/straitmesh/strait/internal/proxy/route"
	"github.com/straitmesh/strait/internal/proxypush"
	"github.com/straitmesh/strait/internal/registry/kube/gatewayapi"
	"github.com/straitmesh/strait/internal/xds/gen"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// conformanceObjects decodes the Gateways and HTTPRoutes of one of the
// upstream conformance suite's manifests (its module's embedded files),
// the class being istio.
func conformanceObjects(t *testing.T, path string) ([]*gwv1.Gateway, []*gwv1.HTTPRoute) {
	t.Helper()
	b, err := conformance.Manifests.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.ReplaceAll(b, []byte("{GATEWAY_CLASS_NAME}"), []byte(gatewayapi.DefaultClassName))
	var gws []*gwv1.Gateway
	var routes []*gwv1.HTTPRoute
	for _, doc := range strings.Split(string(b), "\n---") {
		var meta struct{ Kind string }
		if err := sigsyaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewYAMLOrJSONDecoder(strings.NewReader(doc), 4096)
		switch meta.Kind {
		case "Gateway":
			g := &gwv1.Gateway{}
			if err := dec.Decode(g); err != nil {
				t.Fatal(err)
			}
			gws = append(gws, g)
		case "HTTPRoute":
			r := &gwv1.HTTPRoute{}
			if err := dec.Decode(r); err != nil {
				t.Fatal(err)
			}
			routes = append(routes, r)
		}
	}
	return gws, routes
}

// TestGatewayAPIListenerIsolation: the conformance suite's
// GatewayHTTPListenerIsolation, from its own manifests through the
// translation, the snapshot and the gateway's route configuration to
// strait-proxy's route table: a request whose Host a more specific
// listener of the Gateway on the same port owns is answered only by that
// listener's routes (404 when none matches), also when a route of a
// less specific listener names that host (the hostname-intersection
// manifest).
func TestGatewayAPIListenerIsolation(t *testing.T) {
	const ns = "gateway-conformance-infra"
	cases := []struct {
		host, path string
		ok         bool
	}{
		{"bar.com", "/empty-hostname", true},
		{"bar.com", "/wildcard-example-com", false},
		{"bar.com", "/wildcard-foo-example-com", false},
		{"bar.com", "/abc-foo-example-com", false},
		{"bar.example.com", "/empty-hostname", false},
		{"bar.example.com", "/wildcard-example-com", true},
		{"bar.example.com", "/wildcard-foo-example-com", false},
		{"bar.example.com", "/abc-foo-example-com", false},
		{"bar.foo.example.com", "/empty-hostname", false},
		{"bar.foo.example.com", "/wildcard-example-com", false},
		{"bar.foo.example.com", "/wildcard-foo-example-com", true},
		{"bar.foo.example.com", "/abc-foo-example-com", false},
		{"abc.foo.example.com", "/empty-hostname", false},
		{"abc.foo.example.com", "/wildcard-example-com", false},
		{"abc.foo.example.com", "/wildcard-foo-example-com", false},
		{"abc.foo.example.com", "/abc-foo-example-com", true},
	}
	for _, manifest := range []string{"tests/gateway-http-listener-isolation.yaml", "tests/gateway-http-listener-isolation-with-hostname-intersection.yaml"} {
		t.Run(manifest, func(t *testing.T) {
			gws, routes := conformanceObjects(t, manifest)
			if len(gws) != 1 || len(routes) != 4 {
				t.Fatalf("manifest has %d Gateways and %d HTTPRoutes, want 1 and 4", len(gws), len(routes))
			}
			in := gatewayapi.Input{
				Domain:        "cluster.local",
				Gateways:      gws,
				HTTPRoutes:    routes,
				ServiceExists: func(string, string) bool { return true },
			}
			in.GatewayClasses = append(in.GatewayClasses, &gwv1.GatewayClass{Spec: gwv1.GatewayClassSpec{ControllerName: gatewayapi.ControllerName}})
			in.GatewayClasses[0].Name = gatewayapi.DefaultClassName
			out := gatewayapi.Translate(in)
			store := storeOf(t, fmt.Sprintf(`
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: gateway, namespace: %[1]s}
spec:
  address: 10.92.0.10
  labels: {gateway.networking.k8s.io/gateway-name: %[2]s, gateway.strait.io/namespace: %[1]s}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: infra-backend-v1, namespace: %[1]s}
spec:
  hosts: [infra-backend-v1.%[1]s.svc.cluster.local]
  ports: [{number: 8080, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.92.0.20}]
`, ns, gws[0].Name))
			for _, c := range out.Configs {
				if err := store.Add(c); err != nil {
					t.Fatal(err)
				}
			}
			snap, problems := mesh.Build(store, mesh.BuildOptions{})
			if len(problems) != 0 {
				t.Fatalf("problems %v", problems)
			}
			router, err := proxypush.ParseNodeID("router~10.92.0.10~gateway." + ns + "~" + ns + ".svc.cluster.local")
			if err != nil {
				t.Fatal(err)
			}
			res, err := gen.New(gen.SourceFunc(func() *mesh.Snapshot { return snap })).Generate(router, xdsapi.RouteType, []string{"http.80"}, &proxypush.PushRequest{Full: true})
			if err != nil {
				t.Fatal(err)
			}
			if len(res) != 1 {
				t.Fatalf("%d route configurations, want http.80", len(res))
			}
			var rc route.RouteConfiguration
			if err := res[0].GetResource().UnmarshalTo(&rc); err != nil {
				t.Fatal(err)
			}
			table, err := proxyroute.Compile(&rc)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range cases {
				r := table.Match(c.host, c.path, nil)
				if (r != nil) != c.ok {
					name := "none (404)"
					if r != nil {
						name = r.Name
					}
					t.Errorf("%s%s: route %s, want a route: %t", c.host, c.path, name, c.ok)
				}
			}
			if t.Failed() {
				var vhosts []string
				for _, vh := range rc.VirtualHosts {
					var names []string
					for _, r := range vh.Routes {
						names = append(names, r.Name)
					}
					vhosts = append(vhosts, fmt.Sprintf("%v: %v", vh.Domains, names))
				}
				t.Logf("virtual hosts:\n%s", strings.Join(vhosts, "\n"))
			}
		})
	}
}

// TestGatewayAPISameNameInTwoNamespaces: the Gateways "web" of two
// namespaces each serve their own listeners to their own deployed pods
// (labelled as straitd deploys them, gatewayapi.PodSelector), not to
// the other's, though both pods have gateway-name web.
func TestGatewayAPISameNameInTwoNamespaces(t *testing.T) {
	var gws []*gwv1.Gateway
	for _, g := range []struct {
		ns   string
		port int
	}{{"team-a", 8001}, {"team-b", 8002}} {
		gw := &gwv1.Gateway{}
		if err := sigsyaml.Unmarshal(fmt.Appendf(nil, `
metadata: {name: web, namespace: %s}
spec:
  gatewayClassName: istio
  listeners: [{name: http, port: %d, protocol: HTTP}]
`, g.ns, g.port), gw); err != nil {
			t.Fatal(err)
		}
		gws = append(gws, gw)
	}
	class := &gwv1.GatewayClass{Spec: gwv1.GatewayClassSpec{ControllerName: gatewayapi.ControllerName}}
	class.Name = gatewayapi.DefaultClassName
	out := gatewayapi.Translate(gatewayapi.Input{Domain: "cluster.local", GatewayClasses: []*gwv1.GatewayClass{class}, Gateways: gws})
	var docs []string
	for i, ns := range []string{"team-a", "team-b"} {
		var labels []string
		for k, v := range gatewayapi.PodSelector(ns, "web") {
			labels = append(labels, k+": "+v)
		}
		docs = append(docs, fmt.Sprintf(`
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: web-istio, namespace: %s}
spec:
  address: 10.92.0.%d
  labels: {%s}
`, ns, 10+i, strings.Join(labels, ", ")))
	}
	store := storeOf(t, docs...)
	for _, c := range out.Configs {
		if err := store.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	snap, problems := mesh.Build(store, mesh.BuildOptions{})
	if len(problems) != 0 {
		t.Fatalf("problems %v", problems)
	}
	g := gen.New(gen.SourceFunc(func() *mesh.Snapshot { return snap }))
	for i, tc := range []struct{ ns, want string }{{"team-a", "0.0.0.0_8001"}, {"team-b", "0.0.0.0_8002"}} {
		router, err := proxypush.ParseNodeID(fmt.Sprintf("router~10.92.0.%d~web-istio-0.%s~%s.svc.cluster.local", 10+i, tc.ns, tc.ns))
		if err != nil {
			t.Fatal(err)
		}
		res, err := g.Generate(router, xdsapi.ListenerType, nil, &proxypush.PushRequest{Full: true})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, r := range res {
			names = append(names, r.GetName())
		}
		if len(names) != 1 || names[0] != tc.want {
			t.Errorf("router of %s has listeners %v, want %s only", tc.ns, names, tc.want)
		}
	}
}
