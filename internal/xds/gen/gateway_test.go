package gen_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/straitmesh/strait/internal/mesh"
	"github.com/straitmesh/strait/internal/proxypush"
	"github.com/straitmesh/strait/internal/xds/gen"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// TestGatewayConflicts: Gateway ingress/late claims port 80 with TCP
// after ingress/gw holds it with HTTP. mesh.Build reports it naming both
// Gateways and the dropped server's field; the router keeps gw's HTTP
// chain on 0.0.0.0_80 and late's other server (8443).
func TestGatewayConflicts(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "gateway", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.Replace(string(b), "  servers:\n  - port: {number: 8443",
		"  servers:\n  - port: {number: 80, name: tcp, protocol: TCP}\n    hosts: [\"*\"]\n  - port: {number: 8443", 1)
	if doc == string(b) {
		t.Fatal("testdata/gateway/mesh.yaml changed: Gateway late's servers not found")
	}
	snap, problems := mesh.Build(storeOf(t, doc), mesh.BuildOptions{})
	const want = "spec.servers[0].port: port 80: TCP of Gateway ingress/late conflicts with HTTP of Gateway ingress/gw, which holds the port; the server of ingress/late is left out"
	if len(problems) != 1 || !strings.HasSuffix(problems[0].Error(), want) {
		t.Fatalf("problems %v\nwant one ending %q", problems, want)
	}
	g := gen.New(gen.SourceFunc(func() *mesh.Snapshot { return snap }))
	router, err := proxypush.ParseNodeID("router~10.92.0.10~ingressgateway.ingress~ingress.svc.cluster.local")
	if err != nil {
		t.Fatal(err)
	}
	if c := g.GatewayConflicts(router); len(c) != 1 || c[0].Dropped.Name() != "ingress/late" || c[0].Kept.Name() != "ingress/gw" {
		t.Errorf("conflicts %v", c)
	}
	res, err := g.Generate(router, xdsapi.ListenerType, nil, &proxypush.PushRequest{Full: true})
	if err != nil {
		t.Fatal(err)
	}
	got := string(render(t, res))
	for _, s := range []string{`"name": "0.0.0.0_80"`, `"routeConfigName": "http.80"`, `"name": "0.0.0.0_8443"`} {
		if !strings.Contains(got, s) {
			t.Errorf("listeners lack %s", s)
		}
	}
	sidecar, err := proxypush.ParseNodeID("sidecar~10.92.0.11~client.demo~demo.svc.cluster.local")
	if err != nil {
		t.Fatal(err)
	}
	if c := g.GatewayConflicts(sidecar); c != nil {
		t.Errorf("a sidecar has gateway conflicts %v", c)
	}
}
