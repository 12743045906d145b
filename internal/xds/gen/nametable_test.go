package gen_test

import (
	"reflect"
	"slices"
	"testing"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/straitmesh/strait/internal/istioconfig"
	"github.com/straitmesh/strait/internal/mesh"
	"github.com/straitmesh/strait/internal/nds"
	"github.com/straitmesh/strait/internal/proxypush"
	"github.com/straitmesh/strait/internal/xds/gen"
	"github.com/straitmesh/strait/internal/xdsapi"
)

const nameTableConfig = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: kubernetes-service.reviews, namespace: default}
spec:
  hosts: [reviews.default.svc.cluster.local]
  addresses: [10.96.0.20, "fd00::20"]
  ports: [{number: 9080, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.1.0.5}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: api, namespace: default}
spec:
  hosts: [api.example.com]
  addresses: [240.240.0.1]
  ports: [{number: 443, name: tls, protocol: TLS}]
  resolution: DNS
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: no-vip, namespace: default}
spec:
  hosts: [novip.example.com]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: DNS
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: hidden, namespace: other}
spec:
  hosts: [hidden.example.com]
  addresses: [240.240.0.9]
  exportTo: ["."]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: DNS
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: kubernetes-service.db, namespace: default}
spec:
  hosts: [db.default.svc.cluster.local]
  ports: [{number: 5432, name: tcp, protocol: TCP}]
  resolution: NONE
  workloadSelector: {labels: {app: db}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: db-1, namespace: default}
spec: {address: 10.1.0.8, labels: {app: db}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: db-0, namespace: default}
spec: {address: 10.1.0.7, labels: {app: db}}

---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: headless-se, namespace: default}
spec:
  hosts: [cache.internal]
  ports: [{number: 6379, name: tcp, protocol: TCP}]
  resolution: NONE
  workloadSelector: {labels: {app: cache}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: cache, namespace: default}
spec: {address: 10.2.0.1, labels: {app: cache}}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: headless-empty, namespace: default}
spec:
  hosts: [empty.internal]
  ports: [{number: 6379, name: tcp, protocol: TCP}]
  resolution: NONE
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: cidr, namespace: default}
spec:
  hosts: [cidr.internal]
  addresses: [10.3.0.0/16]
  ports: [{number: 9000, name: tcp, protocol: TCP}]
  resolution: NONE
  workloadSelector: {labels: {app: cache}}
`

// TestNameTable: the NDS table of a proxy with DNS capture lists the
// visible services' VIPs, Kubernetes services with their short name,
// headless services (resolution NONE, no address) with their endpoints'
// distinct IPs, a ServiceEntry without addresses with its allocated
// address; a service whose only address is a CIDR is left out; a proxy
// without DNS capture gets no table.
func TestNameTable(t *testing.T) {
	snap := build(t, storeOf(t, nameTableConfig), mesh.BuildOptions{})
	g := gen.NewWithOptions(gen.SourceFunc(func() *mesh.Snapshot { return snap }), gen.Options{KeySets: testKeySets{}})
	proxy, err := proxypush.ParseNodeID("sidecar~10.99.0.10~sleep.default~default.svc.cluster.local")
	if err != nil {
		t.Fatal(err)
	}
	res, err := g.Generate(proxy, nds.TypeURL, nil, &proxypush.PushRequest{Full: true})
	if err != nil || len(res) != 0 {
		t.Fatalf("without DNS_CAPTURE: %v, %v; want no resource", res, err)
	}

	proxy.Metadata = map[string]string{"DNS_CAPTURE": "true"}
	res, err = g.Generate(proxy, nds.TypeURL, nil, &proxypush.PushRequest{Full: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].GetResource().GetTypeUrl() != nds.TypeURL || res[0].GetVersion() == "" {
		t.Fatalf("got %v, want one NameTable with a version", res)
	}
	got, err := nds.Unmarshal(res[0].GetResource().GetValue())
	if err != nil {
		t.Fatal(err)
	}
	want := nds.NameTable{
		"reviews.default.svc.cluster.local": {IPs: []string{"10.96.0.20", "fd00::20"}, Registry: nds.RegistryKubernetes, Shortname: "reviews", Namespace: "default"},
		"api.example.com":                   {IPs: []string{"240.240.0.1"}},
		"db.default.svc.cluster.local":      {IPs: []string{"10.1.0.7", "10.1.0.8"}, Registry: nds.RegistryKubernetes, Shortname: "db", Namespace: "default"},
		"cache.internal":                    {IPs: []string{"10.2.0.1"}},
		// No addresses, resolution DNS: its allocated IPv4 address.
		"novip.example.com": {IPs: snap.Service("novip.example.com").AutoAddresses[:1]},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("name table = %+v, want %+v", got, want)
	}
	again, err := g.Generate(proxy, nds.TypeURL, nil, &proxypush.PushRequest{Full: true})
	if err != nil || len(again) != 1 || again[0].GetVersion() != res[0].GetVersion() {
		t.Errorf("second generation: %v, %v; want the same version", again, err)
	}
}

// TestAutoAddressListeners: a TCP ServiceEntry without addresses gets a
// listener on its allocated address for a DNS-capture proxy (so that a
// connection to the address the name table gave reaches that service and
// no other on the port), and the wildcard listener for other proxies.
func TestAutoAddressListeners(t *testing.T) {
	snap := build(t, storeOf(t, `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: pg, namespace: default}
spec:
  hosts: [pg.example.com]
  ports: [{number: 5432, name: tcp, protocol: TCP}]
  resolution: DNS
`), mesh.BuildOptions{})
	auto := snap.Service("pg.example.com").AutoAddresses
	if len(auto) != 2 {
		t.Fatalf("pg.example.com: auto addresses %q", auto)
	}
	g := gen.NewWithOptions(gen.SourceFunc(func() *mesh.Snapshot { return snap }), gen.Options{KeySets: testKeySets{}})
	for _, tc := range []struct {
		name, nodeID string
		capture      bool
		want, absent string
	}{
		{"capture", "sidecar~10.99.0.10~sleep.default~default.svc.cluster.local", true, auto[0] + "_5432", "0.0.0.0_5432"},
		{"no capture", "sidecar~10.99.0.10~sleep.default~default.svc.cluster.local", false, "0.0.0.0_5432", auto[0] + "_5432"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			proxy, err := proxypush.ParseNodeID(tc.nodeID)
			if err != nil {
				t.Fatal(err)
			}
			if tc.capture {
				proxy.Metadata = map[string]string{"DNS_CAPTURE": "true"}
			}
			res, err := g.Generate(proxy, xdsapi.ListenerType, nil, &proxypush.PushRequest{Full: true})
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, r := range res {
				names = append(names, r.GetName())
			}
			if !slices.Contains(names, tc.want) || slices.Contains(names, tc.absent) {
				t.Errorf("listeners %q, want %s and not %s", names, tc.want, tc.absent)
			}
		})
	}
	// The service's clusters do not depend on its addresses: proxies with
	// and without DNS capture share one build.
	g = gen.NewWithOptions(gen.SourceFunc(func() *mesh.Snapshot { return snap }), gen.Options{KeySets: testKeySets{}})
	var cdsBuilds []int
	for _, capture := range []string{"true", "false", "true"} {
		proxy, err := proxypush.ParseNodeID("sidecar~10.99.0.10~sleep.default~default.svc.cluster.local")
		if err != nil {
			t.Fatal(err)
		}
		proxy.Metadata = map[string]string{"DNS_CAPTURE": capture}
		if _, err := g.Generate(proxy, xdsapi.ClusterType, nil, &proxypush.PushRequest{Full: true}); err != nil {
			t.Fatal(err)
		}
		cdsBuilds = append(cdsBuilds, g.Builds()["cluster"])
	}
	if cdsBuilds[0] == 0 || cdsBuilds[1] != cdsBuilds[0] || cdsBuilds[2] != cdsBuilds[0] {
		t.Errorf("cluster builds after each CDS generation: %v, want one build shared", cdsBuilds)
	}
}

// TestNameTablePodNames: a headless Kubernetes Service whose endpoints
// have hostnames (StatefulSet pods: the registry passes them in
// mesh.EndpointHostnamesAnnotation) also lists HOSTNAME.SERVICE-HOST per
// pod, with the short name HOSTNAME.SERVICE, as Istio's BuildNameTable.
func TestNameTablePodNames(t *testing.T) {
	store := istioconfig.NewStore()
	web := &istioconfig.Config{
		Meta: istioconfig.Meta{Kind: istioconfig.KindServiceEntry, APIVersion: "networking.istio.io/v1", Name: "kubernetes-service.web", Namespace: "db",
			Annotations: map[string]string{mesh.EndpointHostnamesAnnotation: "10.1.0.7=web-0,10.1.0.8=web-1"}},
		Spec: &networking.ServiceEntry{
			Hosts:      []string{"web.db.svc.cluster.local"},
			Ports:      []*networking.ServicePort{{Number: 5432, Name: "tcp", Protocol: "TCP"}},
			Resolution: networking.ServiceEntry_NONE,
			Location:   networking.ServiceEntry_MESH_INTERNAL,
			Endpoints:  []*networking.WorkloadEntry{{Address: "10.1.0.7"}, {Address: "10.1.0.8"}, {Address: "10.1.0.9"}},
		},
	}
	if err := store.Add(web); err != nil {
		t.Fatal(err)
	}
	snap := build(t, store, mesh.BuildOptions{})
	g := gen.NewWithOptions(gen.SourceFunc(func() *mesh.Snapshot { return snap }), gen.Options{KeySets: testKeySets{}})
	proxy, err := proxypush.ParseNodeID("sidecar~10.99.0.10~sleep.default~default.svc.cluster.local")
	if err != nil {
		t.Fatal(err)
	}
	proxy.Metadata = map[string]string{"DNS_CAPTURE": "true"}
	res, err := g.Generate(proxy, nds.TypeURL, nil, &proxypush.PushRequest{Full: true})
	if err != nil || len(res) != 1 {
		t.Fatalf("NDS: %v, %v", res, err)
	}
	got, err := nds.Unmarshal(res[0].GetResource().GetValue())
	if err != nil {
		t.Fatal(err)
	}
	k := nds.RegistryKubernetes
	want := nds.NameTable{
		"web.db.svc.cluster.local":       {IPs: []string{"10.1.0.7", "10.1.0.8", "10.1.0.9"}, Registry: k, Shortname: "web", Namespace: "db"},
		"web-0.web.db.svc.cluster.local": {IPs: []string{"10.1.0.7"}, Registry: k, Shortname: "web-0.web", Namespace: "db"},
		"web-1.web.db.svc.cluster.local": {IPs: []string{"10.1.0.8"}, Registry: k, Shortname: "web-1.web", Namespace: "db"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("name table = %+v, want %+v", got, want)
	}
}
