package mesh

import (
	"strings"
	"testing"

	"github.com/straitmesh/strait/internal/istioconfig"
	"github.com/straitmesh/strait/internal/proxypush"
)

const telemetries = `apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: z-mesh, namespace: istio-system, creationTimestamp: "2026-01-01T00:00:00Z"}
spec: {tracing: [{randomSamplingPercentage: 1}]}
---
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: a-later, namespace: istio-system, creationTimestamp: "2026-02-01T00:00:00Z"}
spec: {tracing: [{randomSamplingPercentage: 2}]}
---
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: ns, namespace: shop}
spec: {tracing: [{randomSamplingPercentage: 3}]}
---
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: web, namespace: shop}
spec:
  selector: {matchLabels: {app: web}}
  tracing: [{randomSamplingPercentage: 4}]
---
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: root-web, namespace: istio-system}
spec:
  selector: {matchLabels: {app: web}}
  tracing: [{randomSamplingPercentage: 5}]
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: web, namespace: shop}
spec: {address: 10.0.0.1, labels: {app: web}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: db, namespace: shop}
spec: {address: 10.0.0.2, labels: {app: db}}
`

// TestTelemetriesFor: Istio's applicableTelemetries — the root
// namespace's oldest selector-less Telemetry, the namespace's, then those
// of the namespace that select the workload; a selector in the root
// namespace selects only its own workloads. The scope's key names them.
func TestTelemetriesFor(t *testing.T) {
	res := istioconfig.ParseFile("t.yaml", []byte(telemetries))
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	store := istioconfig.NewStore()
	for _, c := range res.Configs {
		if err := store.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	snap, errs := Build(store, BuildOptions{})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	names := func(cs []*istioconfig.Config) string {
		var out []string
		for _, c := range cs {
			out = append(out, c.Namespace+"/"+c.Name)
		}
		return strings.Join(out, ",")
	}
	for _, tc := range []struct {
		ns     string
		labels map[string]string
		want   string
	}{
		{"shop", map[string]string{"app": "web"}, "istio-system/z-mesh,shop/ns,shop/web"},
		{"shop", map[string]string{"app": "db"}, "istio-system/z-mesh,shop/ns"},
		{"other", map[string]string{"app": "web"}, "istio-system/z-mesh"},
		{"istio-system", map[string]string{"app": "web"}, "istio-system/z-mesh,istio-system/root-web"},
	} {
		if got := names(snap.TelemetriesFor(tc.ns, tc.labels)); got != tc.want {
			t.Errorf("%s %v: %s, want %s", tc.ns, tc.labels, got, tc.want)
		}
	}
	web := snap.ProxyScope(&proxypush.Proxy{Namespace: "shop", IP: "10.0.0.1"})
	db := snap.ProxyScope(&proxypush.Proxy{Namespace: "shop", IP: "10.0.0.2"})
	if web.Key == db.Key || !strings.HasSuffix(web.Key, "|tel:istio-system/z-mesh,shop/ns,shop/web") || names(web.Telemetry) != "istio-system/z-mesh,shop/ns,shop/web" {
		t.Errorf("scopes %q and %q", web.Key, db.Key)
	}
}
