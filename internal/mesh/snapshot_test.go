package mesh

import (
	"testing"

	"github.com/straitmesh/strait/internal/istioconfig"
)

const mesh = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: echo, namespace: demo}
spec:
  hosts: [echo.demo.svc.cluster.local, echo.example.com]
  addresses: [240.240.0.10]
  ports:
  - {number: 80, name: http, targetPort: 8080}
  - {number: 90, name: http-alt}
  resolution: STATIC
  workloadSelector: {labels: {app: echo}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: a, namespace: demo}
spec: {address: 10.0.0.2, labels: {app: echo, version: v1}, ports: {http: 9000}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: b, namespace: demo}
spec: {address: 10.0.0.1, labels: {app: echo, version: v2}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: other-ns, namespace: elsewhere}
spec: {address: 10.0.0.3, labels: {app: echo}}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: echo, namespace: demo}
spec:
  hosts: [echo]
  http:
  - route:
    - destination: {host: echo}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: wild, namespace: demo}
spec:
  hosts: ["*.example.com"]
  http:
  - route:
    - destination: {host: echo}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: echo, namespace: demo}
spec:
  host: echo
  subsets:
  - {name: v1, labels: {version: v1}}
`

func TestBuild(t *testing.T) {
	store, _ := parseStore(t, mesh)
	snap, problems := Build(store, BuildOptions{})
	if len(problems) != 0 {
		t.Fatal(problems)
	}
	if len(snap.Services) != 2 {
		t.Fatalf("want one service per host, got %d", len(snap.Services))
	}
	svc := snap.Service("echo.demo.svc.cluster.local")
	if svc == nil || len(svc.Endpoints) != 2 {
		t.Fatalf("service = %+v", svc)
	}
	// Sorted by address; the named port wins over targetPort, targetPort
	// over the service port, and a port without targetPort keeps its number.
	if e := svc.Endpoints[0]; e.Address != "10.0.0.1" || e.Ports[80] != 8080 || e.Ports[90] != 90 {
		t.Errorf("endpoint 0 = %+v", e)
	}
	if e := svc.Endpoints[1]; e.Address != "10.0.0.2" || e.Ports[80] != 9000 {
		t.Errorf("endpoint 1 = %+v", e)
	}
	if got := snap.ResolveHost("echo", "demo"); got != "echo.demo.svc.cluster.local" {
		t.Errorf("ResolveHost = %q", got)
	}
	if n := len(snap.VirtualServices("echo.demo.svc.cluster.local")); n != 1 {
		t.Errorf("VirtualServices(echo) = %d", n)
	}
	if n := len(snap.VirtualServices("echo.example.com")); n != 1 {
		t.Errorf("VirtualServices(echo.example.com) = %d (wildcard)", n)
	}
	if l, ok := snap.SubsetLabels("echo.demo.svc.cluster.local", "v1"); !ok || l["version"] != "v1" {
		t.Errorf("subset v1 = %v %v", l, ok)
	}
	if snap.WorkloadByIP("10.0.0.3") == nil {
		t.Error("workload in another namespace not indexed by IP")
	}
	inst := snap.InboundInstances("10.0.0.2")
	if len(inst) != 4 || inst[0].EndpointPort != 90 || inst[len(inst)-1].EndpointPort != 9000 {
		t.Errorf("inbound instances = %+v", inst)
	}
	if len(snap.InboundInstances("10.0.0.3")) != 0 {
		t.Error("workload in another namespace selected")
	}
}

func TestBuildConflicts(t *testing.T) {
	dup := `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: a, namespace: x}
spec: {hosts: [h.example.com], ports: [{number: 80, name: http}]}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: b, namespace: x}
spec: {hosts: [h.example.com], ports: [{number: 81, name: http}]}
`
	res := istioconfig.ParseFile("dup.yaml", []byte(dup))
	store := istioconfig.NewStore()
	for _, c := range res.Configs {
		_ = store.Add(c)
	}
	snap, problems := Build(store, BuildOptions{})
	if len(problems) != 1 || snap.Service("h.example.com").Config.Name != "a" {
		t.Fatalf("problems = %v", problems)
	}
}
