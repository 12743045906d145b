package gen_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"

	"github.com/straitmesh/strait/internal/mesh"
	"github.com/straitmesh/strait/internal/model"
	"github.com/straitmesh/strait/internal/xds/gen"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// TestAutoMTLSFollowsEndpointLabels: the outbound cluster originates mTLS
// only while every endpoint has a sidecar, also when just a WorkloadEntry's
// labels change (the cluster cache must not serve the old decision).
func TestAutoMTLSFollowsEndpointLabels(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "mtls", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	secure := string(b)
	// server-2 loses its sidecar label.
	plain := strings.Replace(secure, "address: 10.95.0.12\n  labels: {app: server, security.istio.io/tlsMode: istio}", "address: 10.95.0.12\n  labels: {app: server}", 1)
	if plain == secure {
		t.Fatal("test YAML did not change")
	}
	var cur atomic.Pointer[mesh.Snapshot]
	cur.Store(build(t, storeOf(t, secure), mesh.BuildOptions{Version: 1}))
	g := gen.New(gen.SourceFunc(cur.Load))
	proxy, err := model.ParseNodeID("sidecar~10.95.0.10~client.secure~secure.svc.cluster.local")
	if err != nil {
		t.Fatal(err)
	}
	tlsOf := func() bool {
		t.Helper()
		res, err := g.Generate(proxy, xdsapi.ClusterType, nil, &model.PushRequest{Full: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Name == "outbound|8080||server.secure.svc.cluster.local" {
				var c cluster.Cluster
				if err := r.Resource.UnmarshalTo(&c); err != nil {
					t.Fatal(err)
				}
				return c.GetTransportSocket() != nil
			}
		}
		t.Fatal("no server cluster")
		return false
	}
	if !tlsOf() {
		t.Fatal("every endpoint has a sidecar: want an mTLS cluster")
	}
	cur.Store(build(t, storeOf(t, plain), mesh.BuildOptions{Version: 2, Previous: cur.Load()}))
	if tlsOf() {
		t.Fatal("an endpoint without a sidecar: want a plaintext cluster")
	}
}

// TestAutoMTLSNotToMeshExternal: a ServiceEntry outside the mesh (its
// location MESH_EXTERNAL, also when unset, as Istio's default) gets no
// auto mTLS even when every endpoint is labelled with a sidecar; a
// DestinationRule's ISTIO_MUTUAL still applies, as in Istio's
// buildUpstreamTLSSettings.
func TestAutoMTLSNotToMeshExternal(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "mtls", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	internal := string(b)
	proxy, err := model.ParseNodeID("sidecar~10.95.0.10~client.secure~secure.svc.cluster.local")
	if err != nil {
		t.Fatal(err)
	}
	tlsOf := func(yaml string) bool {
		t.Helper()
		snap := build(t, storeOf(t, yaml), mesh.BuildOptions{Version: 1})
		g := gen.New(gen.SourceFunc(func() *mesh.Snapshot { return snap }))
		res, err := g.Generate(proxy, xdsapi.ClusterType, nil, &model.PushRequest{Full: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Name == "outbound|8080||server.secure.svc.cluster.local" {
				var c cluster.Cluster
				if err := r.Resource.UnmarshalTo(&c); err != nil {
					t.Fatal(err)
				}
				return c.GetTransportSocket() != nil
			}
		}
		t.Fatal("no server cluster")
		return false
	}
	if !tlsOf(internal) {
		t.Fatal("MESH_INTERNAL with sidecars: want an mTLS cluster")
	}
	for _, location := range []string{"  location: MESH_EXTERNAL\n", ""} {
		external := strings.Replace(internal, "  location: MESH_INTERNAL\n", location, 1)
		if external == internal {
			t.Fatal("test YAML did not change")
		}
		if tlsOf(external) {
			t.Errorf("location %q: want a plaintext cluster", strings.TrimSpace(location))
		}
		dr := external + "---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: server, namespace: secure}\nspec:\n  host: server.secure.svc.cluster.local\n  trafficPolicy: {tls: {mode: ISTIO_MUTUAL}}\n"
		if !tlsOf(dr) {
			t.Errorf("location %q with ISTIO_MUTUAL: want an mTLS cluster", strings.TrimSpace(location))
		}
	}
}
