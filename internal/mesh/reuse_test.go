package mesh

import (
	"reflect"
	"slices"
	"testing"

	"github.com/straitmesh/strait/internal/istioconfig"
	"github.com/straitmesh/strait/internal/proxypush"
)

const inlineMesh = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: a, namespace: demo}
spec:
  hosts: [a.demo.svc.cluster.local]
  ports: [{number: 80, name: http}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.1}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: b, namespace: demo}
spec:
  hosts: [b.demo.svc.cluster.local]
  ports: [{number: 80, name: http}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.2}]
`

func parseStore(t *testing.T, yaml string) (*istioconfig.Store, []*istioconfig.Config) {
	t.Helper()
	res := istioconfig.ParseFile("mesh.yaml", []byte(yaml))
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	store := istioconfig.NewStore()
	for _, c := range res.Configs {
		if err := store.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	return store, res.Configs
}

// A ServiceEntry config that is the same object in the next store keeps
// its *Service; a replaced config gets a new one.
func TestBuildKeepsServicesOfUnchangedConfigs(t *testing.T) {
	store, cfgs := parseStore(t, inlineMesh)
	first, _ := Build(store, BuildOptions{Version: 1})

	// Next store: config a is the same pointer; b is re-parsed with a new
	// endpoint.
	next := istioconfig.NewStore()
	if err := next.Add(cfgs[0]); err != nil {
		t.Fatal(err)
	}
	_, changed := parseStore(t, inlineMesh[:len(inlineMesh)-len("10.0.0.2}]\n")]+"10.0.0.3}]\n")
	if err := next.Add(changed[1]); err != nil {
		t.Fatal(err)
	}
	second, _ := Build(next, BuildOptions{Version: 2, Previous: first})
	a, b := "a.demo.svc.cluster.local", "b.demo.svc.cluster.local"
	if second.Service(a) != first.Service(a) {
		t.Error("service a was rebuilt although its config is the same object")
	}
	if second.Service(b) == first.Service(b) {
		t.Fatal("service b kept its old *Service although its endpoints changed")
	}
	if got := second.Service(b).Endpoints[0].Address; got != "10.0.0.3" {
		t.Errorf("service b endpoint = %s, want 10.0.0.3", got)
	}
	if d := DiffServices(first, second); len(d.Hosts) != 1 || !d.EndpointsOnly {
		t.Errorf("DiffServices = %+v, want only b, endpoints only", d)
	}
}

// A ServiceEntry with a workload selector depends on the workloads, so it
// is rebuilt even when its config object is the same.
func TestBuildRebuildsSelectorServicesWhenWorkloadsChange(t *testing.T) {
	store, cfgs := parseStore(t, mesh)
	first, _ := Build(store, BuildOptions{Version: 1})
	host := "echo.demo.svc.cluster.local"
	if n := len(first.Service(host).Endpoints); n != 2 {
		t.Fatalf("endpoints = %d, want 2", n)
	}
	next := istioconfig.NewStore()
	for _, c := range cfgs {
		if c.Kind == istioconfig.KindWorkloadEntry && c.Name == "b" {
			continue // workload b goes away
		}
		if err := next.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	second, _ := Build(next, BuildOptions{Version: 2, Previous: first})
	if n := len(second.Service(host).Endpoints); n != 1 {
		t.Fatalf("after removing workload b: endpoints = %d, want 1", n)
	}
}

// adsCredentials checks every credential fine, served over ADS (as the
// Kubernetes registry's).
type adsCredentials struct{}

func (adsCredentials) Check(string, string, bool) error { return nil }
func (adsCredentials) ServedOverADS()                   {}

// UpdateEndpoints gives what Build gives for an endpoints-only change, and
// refuses every other change.
func TestUpdateEndpoints(t *testing.T) {
	const extra = `---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: a, namespace: demo}
spec:
  hosts: [a.demo.svc.cluster.local]
  http: [{route: [{destination: {host: a.demo.svc.cluster.local}}]}]
`
	base, _ := parseStore(t, inlineMesh+extra)
	first, _ := Build(base, BuildOptions{Version: 1, Credentials: adsCredentials{}})
	b := proxypush.ConfigKey{Kind: istioconfig.KindServiceEntry, Name: "b", Namespace: "demo"}
	entry := func(labels, spec string) *istioconfig.Config {
		t.Helper()
		_, cfgs := parseStore(t, "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: b, namespace: demo"+labels+"}\nspec:\n"+spec)
		return cfgs[0]
	}
	tests := []struct {
		name   string
		spec   string
		wantOK bool
		labels string
	}{
		{"endpoints moved", "  hosts: [b.demo.svc.cluster.local]\n  ports: [{number: 80, name: http}]\n  resolution: STATIC\n  endpoints: [{address: 10.0.0.3}, {address: 10.0.0.4, labels: {v: x}}]\n", true, ""},
		{"no endpoints left", "  hosts: [b.demo.svc.cluster.local]\n  ports: [{number: 80, name: http}]\n  resolution: STATIC\n", true, ""},
		{"port changed", "  hosts: [b.demo.svc.cluster.local]\n  ports: [{number: 81, name: http}]\n  resolution: STATIC\n  endpoints: [{address: 10.0.0.2}]\n", false, ""},
		{"host changed", "  hosts: [c.demo.svc.cluster.local]\n  ports: [{number: 80, name: http}]\n  resolution: STATIC\n  endpoints: [{address: 10.0.0.2}]\n", false, ""},
		{"host taken from a", "  hosts: [b.demo.svc.cluster.local, a.demo.svc.cluster.local]\n  ports: [{number: 80, name: http}]\n  resolution: STATIC\n", false, ""},
		{"workload selector", "  hosts: [b.demo.svc.cluster.local]\n  ports: [{number: 80, name: http}]\n  resolution: STATIC\n  workloadSelector: {labels: {app: b}}\n", false, ""},
		{"addresses added", "  hosts: [b.demo.svc.cluster.local]\n  addresses: [240.0.0.9]\n  ports: [{number: 80, name: http}]\n  resolution: STATIC\n  endpoints: [{address: 10.0.0.2}]\n", false, ""},
		// Opting out of address allocation changes the service's addresses.
		{"allocation opted out", "  hosts: [b.demo.svc.cluster.local]\n  ports: [{number: 80, name: http}]\n  resolution: STATIC\n  endpoints: [{address: 10.0.0.3}]\n", false,
			", labels: {networking.istio.io/enable-autoallocate-ip: \"false\"}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := base.With(map[proxypush.ConfigKey]*istioconfig.Config{b: entry(tt.labels, tt.spec)})
			changed := map[proxypush.ConfigKey]struct{}{b: {}}
			got, ok := first.UpdateEndpoints(store, changed, 2)
			if ok != tt.wantOK {
				t.Fatalf("ok = %v, want %v", ok, tt.wantOK)
			}
			if !ok {
				return
			}
			want, _ := Build(store, BuildOptions{Version: 2, Previous: first, Credentials: adsCredentials{}})
			if len(got.Services) != len(want.Services) {
				t.Fatalf("%d services, want %d", len(got.Services), len(want.Services))
			}
			for i := range want.Services {
				if !reflect.DeepEqual(got.Services[i], want.Services[i]) {
					t.Errorf("service %d = %+v, want %+v", i, got.Services[i], want.Services[i])
				}
			}
			for _, h := range []string{"a.demo.svc.cluster.local", "b.demo.svc.cluster.local"} {
				if !reflect.DeepEqual(got.Service(h), want.Service(h)) || len(got.VirtualServices(h)) != len(want.VirtualServices(h)) {
					t.Errorf("host %s differs from Build's", h)
				}
			}
			// What the gateways read: every VirtualService (a gateway's
			// routes), and the credentials checked.
			if !slices.Equal(got.AllVirtualServices(), want.AllVirtualServices()) || len(got.AllVirtualServices()) != 1 {
				t.Errorf("AllVirtualServices = %v, want Build's %v", got.AllVirtualServices(), want.AllVirtualServices())
			}
			if !reflect.DeepEqual(got.credentials, first.credentials) || !got.GatewayCredentialsOverADS() {
				t.Errorf("credentials %+v, want the snapshot's %+v (served over ADS)", got.credentials, first.credentials)
			}
			if got.Service("a.demo.svc.cluster.local") != first.Service("a.demo.svc.cluster.local") {
				t.Error("the unchanged service a was replaced")
			}
			if got.Version != 2 || got.Configs != store {
				t.Errorf("version %d, store %p (want 2, %p)", got.Version, got.Configs, store)
			}
			if d := DiffServices(first, got); !d.EndpointsOnly || len(d.Hosts) != 1 {
				t.Errorf("DiffServices = %+v", d)
			}
			// The old snapshot is untouched.
			if first.Service("b.demo.svc.cluster.local").Endpoints[0].Address != "10.0.0.2" || first.Configs.Get(b) == store.Get(b) {
				t.Error("UpdateEndpoints modified the old snapshot")
			}
		})
	}
}
