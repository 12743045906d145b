package gen_test

import (
	"bytes"
	"testing"

	"github.com/straitmesh/strait/internal/mesh"
	"github.com/straitmesh/strait/internal/meshconfig"
	"github.com/straitmesh/strait/internal/proxypush"
	"github.com/straitmesh/strait/internal/xds/gen"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// A new mesh config (here a mesh-wide locality distribution) reaches a
// load assignment whose service and DestinationRule did not change: the
// cached one is not served.
func TestCacheFollowsMeshConfig(t *testing.T) {
	store := storeOf(t, `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: s, namespace: ns}
spec:
  hosts: [s.example.com]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.1.0.1, locality: us/a}, {address: 10.1.0.2, locality: us/b}]
`)
	distribute, err := meshconfig.Parse([]byte("localityLbSetting: {distribute: [{from: 'us/*', to: {us/a: 10, us/b: 90}}]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	v1 := build(t, store, mesh.BuildOptions{Version: 1})
	v2 := build(t, store, mesh.BuildOptions{Version: 2, Previous: v1, Mesh: distribute})
	current := v1
	g := gen.New(gen.SourceFunc(func() *mesh.Snapshot { return current }))
	proxy, err := proxypush.ParseNodeID("sidecar~10.1.0.9~client.ns~ns.svc.cluster.local")
	if err != nil {
		t.Fatal(err)
	}
	proxy.Locality = "us/a"
	eds := func() []byte {
		res, err := g.Generate(proxy, xdsapi.EndpointType, []string{"outbound|80||s.example.com"}, nil)
		if err != nil || len(res) != 1 {
			t.Fatalf("%d load assignments, %v", len(res), err)
		}
		return render(t, res)
	}
	if got := eds(); bytes.Contains(got, []byte(`"loadBalancingWeight": 90`)) {
		t.Fatalf("v1 (default mesh config) already distributes: %s", got)
	}
	current = v2
	if got := eds(); !bytes.Contains(got, []byte(`"loadBalancingWeight": 90`)) {
		t.Errorf("v2's mesh-wide distribute is not in the load assignment: %s", got)
	}
}
