package gen

import (
	"testing"

	"github.com/straitmesh/strait/internal/config"
	"github.com/straitmesh/strait/internal/mesh"
	"github.com/straitmesh/strait/internal/model"
)

func localitySnapshot(t *testing.T, docs ...string) *mesh.Snapshot {
	t.Helper()
	store := config.NewStore()
	for _, doc := range docs {
		res := config.ParseFile("x.yaml", []byte(doc))
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		for _, c := range res.Configs {
			if err := store.Add(c); err != nil {
				t.Fatal(err)
			}
		}
	}
	snap, errs := mesh.Build(store, mesh.BuildOptions{})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return snap
}

const localityWorkloads = `apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: c, namespace: ns}
spec: {address: 10.0.0.9, locality: us/a, labels: {rack: r1}}
`

// The node's locality wins over its WorkloadEntry's; without either it is
// unknown.
func TestProxyLocality(t *testing.T) {
	snap := localitySnapshot(t, localityWorkloads)
	for _, c := range []struct {
		proxy *model.Proxy
		want  string
	}{
		{&model.Proxy{IP: "10.0.0.9"}, "us/a"},
		{&model.Proxy{IP: "10.0.0.9", Locality: "eu/b"}, "eu/b"},
		{&model.Proxy{IP: "10.0.0.8"}, ""},
		{nil, ""},
	} {
		if got := proxyLocality(snap, c.proxy); got != c.want {
			t.Errorf("proxyLocality(%+v) = %q, want %q", c.proxy, got, c.want)
		}
	}
}

// The load assignment's cache key names what it depends on: the proxy's
// locality, and its failoverPriority labels only when they apply (with
// outlier detection); no view at all when the setting is disabled.
func TestLocalityViewKey(t *testing.T) {
	svc := `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: s, namespace: ns}
spec:
  hosts: [s.ns.svc.cluster.local]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.1, locality: us/a}]
`
	rule := func(policy string) string {
		return `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: s, namespace: ns}
spec:
  host: s.ns.svc.cluster.local
  trafficPolicy:
` + policy
	}
	proxy := &model.Proxy{IP: "10.0.0.9", Namespace: "ns"}
	for _, c := range []struct {
		name, policy, want string
		view               bool
	}{
		{"mesh default", "    tls: {mode: DISABLE}\n", "us/a", true},
		{"failoverPriority without outlier detection", "    loadBalancer: {localityLbSetting: {failoverPriority: [rack]}}\n", "us/a", true},
		{"failoverPriority", "    outlierDetection: {consecutive5xxErrors: 1}\n    loadBalancer: {localityLbSetting: {failoverPriority: [rack, zone=z]}}\n", "us/a|rack=r1|zone=", true},
		{"disabled", "    loadBalancer: {localityLbSetting: {enabled: false}}\n", "", false},
	} {
		snap := localitySnapshot(t, localityWorkloads, svc, rule(c.policy))
		lv, key := newLocalityView(snap, "ns", proxy, "s.ns.svc.cluster.local", "", 80)
		if (lv != nil) != c.view || key != c.want {
			t.Errorf("%s: view %v, key %q; want view %v, key %q", c.name, lv != nil, key, c.view, c.want)
		}
	}
}
