package gen_test

import (
	"os"
	"path/filepath"
	"testing"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/straitmesh/strait/internal/mesh"
	"github.com/straitmesh/strait/internal/meshconfig"
	"github.com/straitmesh/strait/internal/proxypush"
	"github.com/straitmesh/strait/internal/xds/gen"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// TestMeshPathNormalization: every HCM of a sidecar, inbound and
// outbound, carries the mesh's pathNormalization as istiod writes it:
// normalize_path false for NONE and true otherwise, merge_slashes for
// MERGE_SLASHES and DECODE_AND_MERGE_SLASHES, escaped slashes decoded
// and forwarded for DECODE_AND_MERGE_SLASHES only.
func TestMeshPathNormalization(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "mtls", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := proxypush.ParseNodeID("sidecar~10.95.0.11~server.secure~secure.svc.cluster.local")
	if err != nil {
		t.Fatal(err)
	}
	keep, fwd := hcm.HttpConnectionManager_KEEP_UNCHANGED, hcm.HttpConnectionManager_UNESCAPE_AND_FORWARD
	for _, tc := range []struct {
		mesh             string
		normalize, merge bool
		escaped          hcm.HttpConnectionManager_PathWithEscapedSlashesAction
	}{
		{"trustDomain: cluster.local\n", true, false, keep}, // unset: BASE
		{"pathNormalization:\n  normalization: NONE\n", false, false, keep},
		{"pathNormalization:\n  normalization: BASE\n", true, false, keep},
		{"pathNormalization:\n  normalization: MERGE_SLASHES\n", true, true, keep},
		{"pathNormalization:\n  normalization: DECODE_AND_MERGE_SLASHES\n", true, true, fwd},
	} {
		t.Run(tc.mesh, func(t *testing.T) {
			mc, err := meshconfig.Parse([]byte(tc.mesh))
			if err != nil {
				t.Fatal(err)
			}
			snap := build(t, storeOf(t, string(b)), mesh.BuildOptions{Mesh: mc})
			g := gen.New(gen.SourceFunc(func() *mesh.Snapshot { return snap }))
			res, err := g.Generate(proxy, xdsapi.ListenerType, nil, &proxypush.PushRequest{Full: true})
			if err != nil {
				t.Fatal(err)
			}
			seen := map[core.TrafficDirection]int{}
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
						var m hcm.HttpConnectionManager
						if err := f.GetTypedConfig().UnmarshalTo(&m); err != nil {
							t.Fatal(err)
						}
						seen[l.GetTrafficDirection()]++
						if m.GetNormalizePath() == nil || m.GetNormalizePath().GetValue() != tc.normalize ||
							m.GetMergeSlashes() != tc.merge || m.GetPathWithEscapedSlashesAction() != tc.escaped {
							t.Errorf("listener %s chain %s: normalize_path %v merge_slashes %v path_with_escaped_slashes_action %s; want %v %v %s",
								l.GetName(), fc.GetName(), m.GetNormalizePath(), m.GetMergeSlashes(), m.GetPathWithEscapedSlashesAction(), tc.normalize, tc.merge, tc.escaped)
						}
					}
				}
			}
			if seen[core.TrafficDirection_INBOUND] == 0 || seen[core.TrafficDirection_OUTBOUND] == 0 {
				t.Fatalf("HCMs seen per direction: %v; want inbound and outbound ones", seen)
			}
		})
	}
}
