package gen_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/straitmesh/strait/internal/golden"
	"github.com/straitmesh/strait/internal/mesh"
	"github.com/straitmesh/strait/internal/meshconfig"
	"github.com/straitmesh/strait/internal/proxypush"
	"github.com/straitmesh/strait/internal/xds/gen"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// TestTracingGolden: for each mesh config of testdata/tracing/meshconfig,
// the client's and the server's listeners and clusters, compared with
// testdata/tracing/golden/MESH.POD.TYPE.json (go test -update rewrites
// them): every sidecar HCM carries istiod's tracing and UUID request id
// extension, and the collector's cluster is in CDS.
func TestTracingGolden(t *testing.T) {
	svc, err := os.ReadFile(filepath.Join("testdata", "tracing", "services.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	meshes, err := filepath.Glob(filepath.Join("testdata", "tracing", "meshconfig", "*.yaml"))
	if err != nil || len(meshes) == 0 {
		t.Fatalf("no mesh configs: %v", err)
	}
	for _, mf := range meshes {
		mc, err := meshconfig.Load(mf)
		if err != nil {
			t.Fatal(err)
		}
		snap := build(t, storeOf(t, string(svc)), mesh.BuildOptions{Mesh: mc})
		g := gen.New(gen.SourceFunc(func() *mesh.Snapshot { return snap }))
		meshName := strings.TrimSuffix(filepath.Base(mf), ".yaml")
		for _, id := range []string{"sidecar~10.91.0.10~client.app~app.svc.cluster.local", "sidecar~10.91.0.11~web.app~app.svc.cluster.local"} {
			proxy, err := proxypush.ParseNodeID(id)
			if err != nil {
				t.Fatal(err)
			}
			for _, tu := range []struct{ short, url string }{{"clusters", xdsapi.ClusterType}, {"listeners", xdsapi.ListenerType}} {
				name := filepath.Join("testdata", "tracing", "golden", meshName+"."+proxy.PodName+"."+tu.short+".json")
				t.Run(strings.TrimPrefix(name, "testdata/"), func(t *testing.T) {
					res, err := g.Generate(proxy, tu.url, nil, &proxypush.PushRequest{Full: true})
					if err != nil {
						t.Fatal(err)
					}
					got := render(t, res)
					if *update {
						if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
							t.Fatal(err)
						}
						if err := os.WriteFile(name, got, 0o644); err != nil {
							t.Fatal(err)
						}
						return
					}
					want, err := os.ReadFile(name)
					if err != nil {
						t.Fatalf("%v (run go test -update)", err)
					}
					if d := golden.Diff(want, got); d != "" {
						t.Errorf("%s differs (run go test -update and review the diff):\n%s", name, d)
					}
				})
			}
		}
	}
}

// TestTracingEveryHCM: with tracing, every HCM of a sidecar (shared
// outbound listeners and its own inbound ones) has it and the request id
// extension; without, none has; a provider whose service the registry
// does not know writes none, as istiod.
func TestTracingEveryHCM(t *testing.T) {
	svc, err := os.ReadFile(filepath.Join("testdata", "tracing", "services.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	proxy, _ := proxypush.ParseNodeID("sidecar~10.91.0.11~web.app~app.svc.cluster.local")
	for _, tc := range []struct {
		name, mesh string
		want       bool
	}{
		{"legacy", "enableTracing: true\n", true},
		{"none", "trustDomain: cluster.local\n", false},
		{"unknown service", "extensionProviders:\n- name: z\n  zipkin: {service: nowhere.example.com, port: 9411}\ndefaultProviders: {tracing: [z]}\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mc, err := meshconfig.Parse([]byte(tc.mesh))
			if err != nil {
				t.Fatal(err)
			}
			snap := build(t, storeOf(t, string(svc)), mesh.BuildOptions{Mesh: mc})
			g := gen.New(gen.SourceFunc(func() *mesh.Snapshot { return snap }))
			res, err := g.Generate(proxy, xdsapi.ListenerType, nil, &proxypush.PushRequest{Full: true})
			if err != nil {
				t.Fatal(err)
			}
			inbound, outbound := 0, 0
			for _, r := range res {
				var l listener.Listener
				if err := r.GetResource().UnmarshalTo(&l); err != nil {
					t.Fatal(err)
				}
				for _, fc := range l.GetFilterChains() {
					for _, f := range fc.GetFilters() {
						if f.GetName() != "envoy.filters.network.http_connection_manager" {
							continue
						}
						var h hcm.HttpConnectionManager
						if err := f.GetTypedConfig().UnmarshalTo(&h); err != nil {
							t.Fatal(err)
						}
						if (h.GetTracing() != nil) != tc.want || (h.GetRequestIdExtension() != nil) != tc.want {
							t.Errorf("%s: tracing %v request id %v, want %v", l.GetName(), h.GetTracing(), h.GetRequestIdExtension(), tc.want)
						}
						if l.GetTrafficDirection().String() == "INBOUND" {
							inbound++
						} else {
							outbound++
						}
					}
				}
			}
			if inbound == 0 || outbound == 0 {
				t.Errorf("checked %d inbound and %d outbound HCMs; the scenario has both", inbound, outbound)
			}
		})
	}
}
