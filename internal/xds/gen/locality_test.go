package gen

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"

	"github.com/straitmesh/strait/internal/istioconfig"
	"github.com/straitmesh/strait/internal/mesh"
	"github.com/straitmesh/strait/internal/proxypush"
)

func localitySnapshot(t *testing.T, docs ...string) *mesh.Snapshot {
	t.Helper()
	store := istioconfig.NewStore()
	for _, doc := range docs {
		res := istioconfig.ParseFile("x.yaml", []byte(doc))
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
		proxy *proxypush.Proxy
		want  string
	}{
		{&proxypush.Proxy{IP: "10.0.0.9"}, "us/a"},
		{&proxypush.Proxy{IP: "10.0.0.9", Locality: "eu/b"}, "eu/b"},
		{&proxypush.Proxy{IP: "10.0.0.8"}, ""},
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
	proxy := &proxypush.Proxy{IP: "10.0.0.9", Namespace: "ns"}
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

// claShape renders a load assignment's locality groups as
// "region/zone p=PRIORITY w=WEIGHT ADDR,ADDR" lines.
func claShape(cla *endpoint.ClusterLoadAssignment) []string {
	var out []string
	for _, g := range cla.GetEndpoints() {
		var addrs []string
		for _, e := range g.GetLbEndpoints() {
			addrs = append(addrs, e.GetEndpoint().GetAddress().GetSocketAddress().GetAddress())
		}
		out = append(out, fmt.Sprintf("%s/%s p=%d w=%d %s", g.GetLocality().GetRegion(), g.GetLocality().GetZone(),
			g.GetPriority(), g.GetLoadBalancingWeight().GetValue(), strings.Join(addrs, ",")))
	}
	return out
}

// What a proxy's load assignment looks like under localityLbSetting:
// failoverPriority ranks by the proxy's own label values, and a proxy
// without labels is not ranked at all (as Istio's applyFailoverPriorities);
// distribute applies the first entry whose from matches the proxy, after
// entries that do not.
func TestLocalityLbSettingApplied(t *testing.T) {
	const workloads = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: s, namespace: ns}
spec:
  hosts: [s.ns.svc.cluster.local]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  workloadSelector: {labels: {app: s}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: s1, namespace: ns}
spec: {address: 10.0.0.1, locality: us/a, labels: {app: s, rack: r1}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: s2, namespace: ns}
spec: {address: 10.0.0.2, locality: us/a, labels: {app: s}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: s3, namespace: ns}
spec: {address: 10.0.0.3, locality: us/b, labels: {app: s, rack: r1}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: client, namespace: ns}
spec: {address: 10.0.0.9, locality: us/a, labels: {app: client, rack: r1, zone: z1, topology.istio.io/network: n1}}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: t, namespace: ns}
spec:
  hosts: [t.ns.svc.cluster.local]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  workloadSelector: {labels: {app: t}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: t1, namespace: ns}
spec: {address: 10.0.1.1, locality: us/a, labels: {app: t, rack: r1, zone: z1, topology.istio.io/network: n1}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: t2, namespace: ns}
spec: {address: 10.0.1.2, locality: us/a, labels: {app: t, rack: r1, zone: z2, topology.istio.io/network: n1}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: t3, namespace: ns}
spec: {address: 10.0.1.3, locality: us/a, labels: {app: t, rack: r2, zone: z1, topology.istio.io/network: n1}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: t4, namespace: ns}
spec: {address: 10.0.1.4, locality: us/a, labels: {app: t, rack: r1, zone: z1, topology.istio.io/network: n2}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: t5, namespace: ns}
spec: {address: 10.0.1.5, locality: us/a, labels: {app: t, rack: r2, zone: z1, topology.istio.io/network: n2}}
`
	rule := func(host, lb string) string {
		return `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: dr, namespace: ns}
spec:
  host: ` + host + `
  trafficPolicy:
    outlierDetection: {consecutive5xxErrors: 1}
    loadBalancer: {localityLbSetting: ` + lb + `}
`
	}
	labelled := &proxypush.Proxy{IP: "10.0.0.9", Namespace: "ns"}
	unlabelled := &proxypush.Proxy{IP: "10.0.0.8", Namespace: "ns", Locality: "us/a"}
	for _, tc := range []struct {
		name  string
		host  string
		lb    string
		proxy *proxypush.Proxy
		want  []string
	}{
		{"failoverPriority, labelled proxy", "s", "{failoverPriority: [rack]}", labelled,
			[]string{"us/a p=0 w=1 10.0.0.1", "us/a p=1 w=1 10.0.0.2", "us/b p=0 w=1 10.0.0.3"}},
		{"failoverPriority, proxy without the label", "s", "{failoverPriority: [rack]}", unlabelled,
			[]string{"us/a p=0 w=2 10.0.0.1,10.0.0.2", "us/b p=0 w=1 10.0.0.3"}},
		{"distribute after an entry for elsewhere", "s", "{distribute: [{from: 'eu/*', to: {'us/a': 100}}, {from: 'us/a/*', to: {'us/a': 20, 'us/b': 80}}]}", labelled,
			[]string{"us/a p=0 w=20 10.0.0.1,10.0.0.2", "us/b p=0 w=80 10.0.0.3"}},
		// Two labels: a mismatch on the first ranks lower than one on
		// the second.
		{"failoverPriority by two labels", "t", "{failoverPriority: [rack, zone]}", labelled,
			[]string{"us/a p=0 w=2 10.0.1.1,10.0.1.4", "us/a p=1 w=1 10.0.1.2", "us/a p=2 w=2 10.0.1.3,10.0.1.5"}},
		// The network first: another network ranks below every
		// endpoint of the proxy's, and the later labels still rank
		// within it.
		{"failoverPriority by network, then rack", "t", "{failoverPriority: [topology.istio.io/network, rack]}", labelled,
			[]string{"us/a p=0 w=2 10.0.1.1,10.0.1.2", "us/a p=1 w=1 10.0.1.3", "us/a p=2 w=1 10.0.1.4", "us/a p=3 w=1 10.0.1.5"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			host := tc.host + ".ns.svc.cluster.local"
			snap := localitySnapshot(t, workloads, rule(host, tc.lb))
			clas := New(SourceFunc(func() *mesh.Snapshot { return snap })).BuildEndpoints(tc.proxy, []string{"outbound|80||" + host})
			if len(clas) != 1 {
				t.Fatalf("%d load assignments, want 1", len(clas))
			}
			if got := claShape(clas[0]); !slices.Equal(got, tc.want) {
				t.Errorf("groups\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
		})
	}
}
