package mesh

import (
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/istioconfig"
	"github.com/straitmesh/strait/internal/proxypush"
)

// TestPushRequestForSidecarIdentities: an endpoints-only change is pushed
// as EDS only while the identities of the service's sidecar endpoints stay
// the same; a new service account among them (the SANs of the auto mTLS
// clusters) or a first sidecar makes the push full.
func TestPushRequestForSidecarIdentities(t *testing.T) {
	const base = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: web, namespace: ns}
spec:
  hosts: [web.ns.svc.cluster.local]
  ports: [{number: 80, name: http}]
  location: MESH_INTERNAL
  resolution: STATIC
  workloadSelector: {labels: {app: web}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: a, namespace: ns}
spec: {address: 10.0.0.1, serviceAccount: sa-a, labels: {app: web, security.istio.io/tlsMode: istio}}
`
	we := func(name, ip, sa string, sidecar bool) string {
		labels := "{app: web}"
		if sidecar {
			labels = "{app: web, security.istio.io/tlsMode: istio}"
		}
		return "---\napiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {name: " + name + ", namespace: ns}\nspec: {address: " + ip + ", serviceAccount: " + sa + ", labels: " + labels + "}\n"
	}
	old, errs := buildYAML(t, base, BuildOptions{Version: 1})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	for _, tc := range []struct {
		name  string
		extra string
		full  bool
	}{
		{"a plain endpoint joins", we("b", "10.0.0.2", "sa-b", false), false},
		{"a sidecar of the same account joins", we("b", "10.0.0.2", "sa-a", true), false},
		{"a sidecar of another account joins", we("b", "10.0.0.2", "sa-b", true), true},
	} {
		snap, errs := buildYAML(t, base+tc.extra, BuildOptions{Version: 2, Previous: old})
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		changed := map[proxypush.ConfigKey]struct{}{{Kind: "WorkloadEntry", Namespace: "ns", Name: "b"}: {}}
		req := PushRequestFor(old, snap, changed, time.Now())
		if _, ok := req.ServicesUpdated["web.ns.svc.cluster.local"]; !ok {
			t.Fatalf("%s: ServicesUpdated %v lacks the service", tc.name, req.ServicesUpdated)
		}
		if req.Full != tc.full {
			t.Errorf("%s: full %v, want %v", tc.name, req.Full, tc.full)
		}
	}
}

// TestPushRequestForGatewayOnlyVirtualService: a VirtualService bound to
// gateways only names no host (no sidecar takes it; a gateway takes every
// config change), nor do the delegates of such a root; one that binds the
// sidecars too (mesh, or no gateways) names its hosts, and so does one
// that stops binding them (the sidecars must drop its routes).
func TestPushRequestForGatewayOnlyVirtualService(t *testing.T) {
	const host = "shop.example.com"
	vs := func(gateways string) *istioconfig.Config {
		return vsConfig(t, "front", "shop", `{"hosts": ["`+host+`"], "gateways": [`+gateways+`], "http": [{"route": [{"destination": {"host": "web"}}]}]}`)
	}
	for _, tc := range []struct {
		name     string
		old, new *istioconfig.Config
		want     bool
	}{
		{"gateway only", nil, vs(`"front/gw"`), false},
		{"gateway only, changed", vs(`"front/gw"`), vs(`"gw"`), false},
		{"mesh and a gateway", nil, vs(`"mesh", "front/gw"`), true},
		{"no gateways: the sidecars", nil, vs(``), true},
		{"from mesh to gateway only", vs(`"mesh"`), vs(`"front/gw"`), true},
		{"from gateway only to mesh", vs(`"front/gw"`), vs(`"mesh"`), true},
	} {
		var old *Snapshot
		if tc.old != nil {
			old, _ = Build(storeOf(t, tc.old), BuildOptions{Version: 1})
		}
		snap, _ := Build(storeOf(t, tc.new), BuildOptions{Version: 2})
		req := PushRequestFor(old, snap, map[proxypush.ConfigKey]struct{}{tc.new.Key(): {}}, time.Now())
		if _, got := req.ServicesUpdated[host]; got != tc.want {
			t.Errorf("%s: ServicesUpdated %v, want %s named: %v", tc.name, req.ServicesUpdated, host, tc.want)
		}
		if !req.Full {
			t.Errorf("%s: a VirtualService change must be a full push", tc.name)
		}
	}

	// A delegate of a gateway-only root concerns no sidecar either.
	root := vsConfig(t, "front", "root", `{"hosts": ["`+host+`"], "gateways": ["front/gw"], "http": [{"delegate": {"name": "api", "namespace": "team-a"}}]}`)
	api := vsConfig(t, "team-a", "api", `{"http": [{"route": [{"destination": {"host": "api"}}]}]}`)
	s, _ := Build(storeOf(t, root, api), BuildOptions{})
	if req := PushRequestFor(s, s, map[proxypush.ConfigKey]struct{}{api.Key(): {}}, time.Now()); len(req.ServicesUpdated) != 0 {
		t.Errorf("delegate of a gateway-only root: ServicesUpdated %v, want none", req.ServicesUpdated)
	}
}
