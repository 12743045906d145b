package gen_test

import (
	"path/filepath"
	"testing"

	"github.com/straitmesh/strait/internal/proxypush"
)

// TestGatewayConflicts: Gateway ingress/late claims port 80 with TCP after
// ingress/gw holds it with HTTP; its server is left out and named, its
// other server (8443) is kept (testdata/gateway; the listeners golden has
// 0.0.0.0_80 with gw's HTTP chain and 0.0.0.0_8443).
func TestGatewayConflicts(t *testing.T) {
	g := staticGenerator(t, filepath.Join("testdata", "gateway"))
	router, err := proxypush.ParseNodeID("router~10.92.0.10~ingressgateway.ingress~ingress.svc.cluster.local")
	if err != nil {
		t.Fatal(err)
	}
	got := g.GatewayConflicts(router)
	if len(got) != 1 {
		t.Fatalf("conflicts = %v, want one", got)
	}
	const want = "port 80: TCP of Gateway ingress/late conflicts with HTTP of Gateway ingress/gw, which holds the port; the server of ingress/late is left out"
	if got[0].String() != want {
		t.Errorf("conflict = %q\nwant %q", got[0], want)
	}
	sidecar, err := proxypush.ParseNodeID("sidecar~10.92.0.11~client.demo~demo.svc.cluster.local")
	if err != nil {
		t.Fatal(err)
	}
	if c := g.GatewayConflicts(sidecar); c != nil {
		t.Errorf("a sidecar has gateway conflicts %v", c)
	}
}
