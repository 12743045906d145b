package mesh

import (
	"testing"

	"github.com/straitmesh/strait/internal/istioconfig"
)

const rootSidecars = `apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: istio-system}
spec:
  egress: [{hosts: ["istio-system/*"]}]
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: strait-cp}
spec:
  egress: [{hosts: ["strait-cp/*"]}]
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: own, namespace: shop}
spec:
  egress: [{hosts: ["./*"]}]
`

// TestRootNamespaceFollowsOption: the mesh-wide default Sidecar is the
// selector-less one in the configured root namespace, not in a fixed
// istio-system.
func TestRootNamespaceFollowsOption(t *testing.T) {
	res := istioconfig.ParseFile("sidecars.yaml", []byte(rootSidecars))
	store := istioconfig.NewStore()
	for _, c := range res.Configs {
		if err := store.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		root, ns, want string
	}{
		{"", "demo", "istio-system/default"}, // the default root
		{"istio-system", "demo", "istio-system/default"},
		{"strait-cp", "demo", "strait-cp/default"},
		{"strait-cp", "shop", "shop/own"}, // a namespace's own wins
		{"nowhere", "demo", ""},
	}
	for _, tt := range tests {
		snap, _ := Build(store, BuildOptions{RootNamespace: tt.root})
		got := ""
		if sc := snap.SidecarFor(tt.ns, nil); sc != nil {
			got = sc.Namespace + "/" + sc.Name
		}
		if got != tt.want {
			t.Errorf("root %q, namespace %q: Sidecar %q, want %q", tt.root, tt.ns, got, tt.want)
		}
		wantRoot := tt.root
		if wantRoot == "" {
			wantRoot = DefaultRootNamespace
		}
		if snap.RootNamespace != wantRoot {
			t.Errorf("root %q: snapshot RootNamespace %q", tt.root, snap.RootNamespace)
		}
		// A snapshot derived for an endpoints change keeps the root.
		if next, ok := snap.UpdateEndpoints(store, nil, 2); ok && next.RootNamespace != wantRoot {
			t.Errorf("root %q: UpdateEndpoints lost it: %q", tt.root, next.RootNamespace)
		}
	}
}
