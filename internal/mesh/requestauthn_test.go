package mesh

import (
	"slices"
	"testing"

	"github.com/straitmesh/strait/internal/istioconfig"
)

const requestAuthns = `apiVersion: security.istio.io/v1
kind: RequestAuthentication
metadata: {name: mesh, namespace: istio-system}
spec:
  jwtRules: [{issuer: mesh}]
---
apiVersion: security.istio.io/v1
kind: RequestAuthentication
metadata: {name: mesh-web, namespace: istio-system}
spec:
  selector: {matchLabels: {app: web}}
  jwtRules: [{issuer: mesh-web}]
---
apiVersion: security.istio.io/v1
kind: RequestAuthentication
metadata: {name: ns, namespace: shop}
spec:
  jwtRules: [{issuer: shop}]
---
apiVersion: security.istio.io/v1
kind: RequestAuthentication
metadata: {name: web, namespace: shop}
spec:
  selector: {matchLabels: {app: web, tier: front}}
  jwtRules: [{issuer: shop-web}]
---
apiVersion: security.istio.io/v1
kind: RequestAuthentication
metadata: {name: other, namespace: other}
spec:
  jwtRules: [{issuer: other}]
`

// TestRequestAuthenticationsFor: a workload gets the policies of its
// namespace and of the root namespace whose selector matches it.
func TestRequestAuthenticationsFor(t *testing.T) {
	res := istioconfig.ParseFile("ra.yaml", []byte(requestAuthns))
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	store := istioconfig.NewStore()
	for _, c := range res.Configs {
		if err := store.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	snap, _ := Build(store, BuildOptions{})
	for _, tc := range []struct {
		ns     string
		labels map[string]string
		want   []string
	}{
		{"shop", map[string]string{"app": "web", "tier": "front"}, []string{"mesh", "mesh-web", "shop", "shop-web"}},
		{"shop", map[string]string{"app": "web"}, []string{"mesh", "mesh-web", "shop"}},
		{"shop", nil, []string{"mesh", "shop"}},
		{"demo", map[string]string{"app": "web"}, []string{"mesh", "mesh-web"}},
		{"other", nil, []string{"mesh", "other"}},
	} {
		var got []string
		for _, c := range snap.RequestAuthenticationsFor(tc.ns, tc.labels) {
			got = append(got, c.RequestAuthentication().JwtRules[0].Issuer)
		}
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s %v: %v; want %v", tc.ns, tc.labels, got, tc.want)
		}
	}
	snap, _ = Build(store, BuildOptions{RootNamespace: "shop"})
	var got []string
	for _, c := range snap.RequestAuthenticationsFor("demo", nil) {
		got = append(got, c.Name)
	}
	if !slices.Equal(got, []string{"ns"}) {
		t.Errorf("root namespace shop, workload in demo: %v; want [ns]", got)
	}
}
