package registry

import (
	"testing"

	"github.com/straitmesh/strait/internal/config"
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

func parseStore(t *testing.T, yaml string) (*config.Store, []*config.Config) {
	t.Helper()
	res := config.ParseFile("mesh.yaml", []byte(yaml))
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	store := config.NewStore()
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
	next := config.NewStore()
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
	next := config.NewStore()
	for _, c := range cfgs {
		if c.Kind == config.KindWorkloadEntry && c.Name == "b" {
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
