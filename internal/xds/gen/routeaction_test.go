package gen_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/straitmesh/strait/internal/mesh"
	proxyroute "github.com/straitmesh/strait/internal/proxy/route"
	"github.com/straitmesh/strait/internal/proxypush"
	"github.com/straitmesh/strait/internal/xds/gen"
)

// TestRouteActionsCompileInProxy checks that what straitd emits for every
// route action is accepted by strait-proxy (which refuses any field it
// does not implement), and that the actions mean what the VirtualService
// asked.
func TestRouteActionsCompileInProxy(t *testing.T) {
	for _, sc := range []string{"router", "demo", "extended"} {
		g, _ := newGenerator(t, filepath.Join("testdata", sc))
		proxy, err := proxypush.ParseNodeID(map[string]string{
			"router":   "sidecar~10.99.0.10~client.demo~demo.svc.cluster.local",
			"demo":     "sidecar~10.99.0.10~client.demo~demo.svc.cluster.local",
			"extended": "sidecar~10.98.0.10~productpage.shop~shop.svc.cluster.local",
		}[sc])
		if err != nil {
			t.Fatal(err)
		}
		for _, rc := range g.BuildRoutes(proxy, nil) {
			if _, err := proxyroute.Compile(rc); err != nil {
				t.Errorf("%s: route config %s refused by strait-proxy: %v", sc, rc.Name, err)
			}
		}
	}
	g, _ := newGenerator(t, filepath.Join("testdata", "router"))
	proxy, _ := proxypush.ParseNodeID("sidecar~10.99.0.10~client.demo~demo.svc.cluster.local")
	tb, err := proxyroute.Compile(g.BuildRoutes(proxy, []string{"80"})[0])
	if err != nil {
		t.Fatal(err)
	}
	host := "echo.demo.svc.cluster.local"
	if r := tb.MatchHeaders(host, "/slow", nil); r == nil || r.Timeout.Seconds() != 1.5 || r.Retry == nil || r.Retry.NumRetries != 3 || r.Retry.PerTryTimeout.Seconds() != 0.5 {
		t.Errorf("/slow: %+v, want timeout 1.5s, 3 retries, 0.5s per try", r)
	}
	if r := tb.MatchHeaders(host, "/once", nil); r == nil || r.Retry != nil {
		t.Errorf("/once (attempts 0): retry %+v, want none", r.Retry)
	}
	if r := tb.MatchHeaders(host, "/anything", nil); r == nil || r.Retry == nil || r.Retry.NumRetries != 2 || len(r.Retry.StatusCodes) != 1 || r.Retry.StatusCodes[0] != 503 {
		t.Errorf("default policy: %+v, want 2 retries on 503", r.Retry)
	}
	if r := tb.MatchHeaders(host, "/old", nil); r == nil || r.Redirect == nil || r.Redirect.Code != 302 ||
		r.Redirect.Location("http", host, "/old", "?q=1", 4) != "http://elsewhere.example:8080/new?q=1" {
		t.Errorf("/old redirect: %+v", r)
	}
	if r := tb.MatchHeaders(host, "/derive", nil); r == nil || r.Redirect == nil ||
		r.Redirect.Location("http", host, "/derive", "", 7) != "https://"+host+":80/derive" {
		t.Errorf("/derive redirect (port 80 derived, kept for https as Istio keeps it): %+v", r)
	}
	if r := tb.MatchHeaders(host, "/docs/a", nil); r == nil || r.Redirect == nil || r.Redirect.Code != 308 ||
		r.Redirect.Location("http", host, "/docs/a", "", r.MatchedLen("/docs/a")) != "http://"+host+"/manual/a" {
		t.Errorf("/docs/ prefix redirect: %+v", r)
	}
	if r := tb.MatchHeaders(host, "/direct", nil); r == nil || r.Direct == nil || r.Direct.Status != 418 || r.Direct.Body != "I'm a teapot" {
		t.Errorf("/direct: %+v", r)
	}
	if r := tb.MatchHeaders(host, "/api/x", nil); r == nil || r.Rewrite == nil || r.Rewrite.Apply("/api/x", r.MatchedLen("/api/x")) != "/v2/x" || r.HostRewrite != "backend.internal" {
		t.Errorf("/api/ rewrite: %+v", r)
	}
	if r := tb.MatchHeaders(host, "/items/42", nil); r == nil || r.Rewrite == nil || r.Rewrite.Apply("/items/42", 9) != "/item?id=42" {
		t.Errorf("/items regex rewrite: %+v", r)
	}
}

// A single destination's headers: a Host among them rewrites the
// authority unless the rule's rewrite.authority does; other headers leave
// the authority alone.
func TestDestinationHeadersAuthority(t *testing.T) {
	const docs = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: echo, namespace: demo}
spec:
  hosts: [echo.example.com]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.1.0.1}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: echo, namespace: demo}
spec:
  hosts: [echo.example.com]
  http:
  - name: plain
    match: [{uri: {prefix: /plain}}]
    route: [{destination: {host: echo.example.com}, headers: {request: {set: {x-a: b}}}}]
  - name: host
    match: [{uri: {prefix: /host}}]
    route: [{destination: {host: echo.example.com}, headers: {request: {set: {host: h.example}}}}]
  - name: rewrite
    match: [{uri: {prefix: /rewrite}}]
    rewrite: {authority: r.example}
    route: [{destination: {host: echo.example.com}, headers: {request: {set: {host: h.example}}}}]
`
	snap := build(t, storeOf(t, docs), mesh.BuildOptions{})
	proxy, err := proxypush.ParseNodeID("sidecar~10.1.0.9~client.demo~demo.svc.cluster.local")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, rc := range gen.New(gen.SourceFunc(func() *mesh.Snapshot { return snap })).BuildRoutes(proxy, []string{"80"}) {
		for _, vh := range rc.GetVirtualHosts() {
			for _, r := range vh.GetRoutes() {
				if a := r.GetRoute(); a != nil {
					got[r.GetName()] = fmt.Sprintf("%T %s", a.GetHostRewriteSpecifier(), a.GetHostRewriteLiteral())
				}
			}
		}
	}
	for name, want := range map[string]string{
		"plain":   "<nil> ",
		"host":    "*routev3.RouteAction_HostRewriteLiteral h.example",
		"rewrite": "*routev3.RouteAction_HostRewriteLiteral r.example",
	} {
		if got[name] != want {
			t.Errorf("route %s: host rewrite %q, want %q", name, got[name], want)
		}
	}
}

// A redirect's port: the scheme's default port is left out of the
// Location (Envoy adds none then), any other is kept; derivePort takes the
// port the request came to.
func TestRedirectPort(t *testing.T) {
	const docs = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: echo, namespace: demo}
spec:
  hosts: [echo.example.com]
  ports: [{number: 8080, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.1.0.1}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: echo, namespace: demo}
spec:
  hosts: [echo.example.com]
  http:
  - {name: http-80, match: [{uri: {prefix: /a}}], redirect: {port: 80}}
  - {name: http-443, match: [{uri: {prefix: /b}}], redirect: {port: 443}}
  - {name: https-443, match: [{uri: {prefix: /c}}], redirect: {port: 443, scheme: https}}
  - {name: https-80, match: [{uri: {prefix: /d}}], redirect: {port: 80, scheme: https}}
  - {name: derived, match: [{uri: {prefix: /e}}], redirect: {derivePort: FROM_REQUEST_PORT}}
`
	snap := build(t, storeOf(t, docs), mesh.BuildOptions{})
	proxy, err := proxypush.ParseNodeID("sidecar~10.1.0.9~client.demo~demo.svc.cluster.local")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint32{}
	for _, rc := range gen.New(gen.SourceFunc(func() *mesh.Snapshot { return snap })).BuildRoutes(proxy, []string{"8080"}) {
		for _, vh := range rc.GetVirtualHosts() {
			for _, r := range vh.GetRoutes() {
				if rd := r.GetRedirect(); rd != nil {
					got[r.GetName()] = rd.GetPortRedirect()
				}
			}
		}
	}
	want := map[string]uint32{"http-80": 0, "http-443": 443, "https-443": 0, "https-80": 80, "derived": 8080}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("redirect ports %v, want %v", got, want)
	}
}

// A destination without a port goes to its service's only port, so that
// port's consistentHash applies; a service of two ports is reached on the
// request's port, where that port-level setting does not apply.
func TestHashPolicyDestinationPort(t *testing.T) {
	se := func(name, ports string) string {
		return "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: " + name + ", namespace: demo}\nspec:\n  hosts: [" + name +
			".example.com]\n  ports: " + ports + "\n  resolution: STATIC\n  endpoints: [{address: 10.1.0.1}]\n"
	}
	hash := func(name string) string {
		return "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: " + name + ", namespace: demo}\nspec:\n  host: " + name +
			".example.com\n  trafficPolicy:\n    portLevelSettings:\n    - port: {number: 9090}\n      loadBalancer: {consistentHash: {httpHeaderName: x-" + name + "}}\n"
	}
	const vs = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: a, namespace: demo}
spec:
  hosts: [a.example.com]
  http:
  - {name: one, match: [{uri: {prefix: /one}}], route: [{destination: {host: one.example.com}}]}
  - {name: two, match: [{uri: {prefix: /two}}], route: [{destination: {host: two.example.com}}]}
  - {name: two-9090, match: [{uri: {prefix: /9090}}], route: [{destination: {host: two.example.com, port: {number: 9090}}}]}
`
	snap := build(t, storeOf(t,
		se("a", "[{number: 80, name: http, protocol: HTTP}]"),
		se("one", "[{number: 9090, name: http, protocol: HTTP}]"),
		se("two", "[{number: 9090, name: http, protocol: HTTP}, {number: 9091, name: http-b, protocol: HTTP}]"),
		hash("one"), hash("two"), vs), mesh.BuildOptions{})
	proxy, err := proxypush.ParseNodeID("sidecar~10.1.0.9~client.demo~demo.svc.cluster.local")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, rc := range gen.New(gen.SourceFunc(func() *mesh.Snapshot { return snap })).BuildRoutes(proxy, []string{"80"}) {
		for _, vh := range rc.GetVirtualHosts() {
			for _, r := range vh.GetRoutes() {
				var hs []string
				for _, h := range r.GetRoute().GetHashPolicy() {
					hs = append(hs, h.GetHeader().GetHeaderName())
				}
				got[r.GetName()] = fmt.Sprint(hs)
			}
		}
	}
	for name, want := range map[string]string{"one": "[x-one]", "two": "[]", "two-9090": "[x-two]"} {
		if got[name] != want {
			t.Errorf("route %s: hash on %s, want %s", name, got[name], want)
		}
	}
}

// TestLargeDirectResponseCompilesInProxy: a directResponse body above
// Envoy's 4 KiB default (Istio allows 1 MiB) reaches strait-proxy with
// the route configuration's max_direct_response_body_size_bytes raised,
// as Istio emits it; without it the proxy refuses the whole route table.
func TestLargeDirectResponseCompilesInProxy(t *testing.T) {
	dir := t.TempDir()
	mesh, err := os.ReadFile(filepath.Join("testdata", "router", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	body := strings.Repeat("x", 5000)
	vs := `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: big, namespace: demo}
spec:
  hosts: [echo.demo.svc.cluster.local]
  http:
  - directResponse:
      status: 200
      body: {string: "` + body + `"}
`
	for name, data := range map[string][]byte{"mesh.yaml": mesh, "vs.yaml": []byte(vs)} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	g, _ := newGenerator(t, dir)
	proxy, err := proxypush.ParseNodeID("sidecar~10.99.0.10~client.demo~demo.svc.cluster.local")
	if err != nil {
		t.Fatal(err)
	}
	rcs := g.BuildRoutes(proxy, []string{"80"})
	if len(rcs) != 1 {
		t.Fatalf("route configs for port 80: %d, want 1", len(rcs))
	}
	tb, err := proxyroute.Compile(rcs[0])
	if err != nil {
		t.Fatalf("strait-proxy refuses the route config: %v", err)
	}
	r := tb.MatchHeaders("echo.demo.svc.cluster.local", "/", nil)
	if r == nil || r.Direct == nil || len(r.Direct.Body) != len(body) {
		t.Errorf("route for /: %+v, want the 5000-byte direct response", r)
	}
}
