package mesh

import (
	"testing"
	"time"

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
