package mesh

import (
	"slices"
	"testing"

	"github.com/straitmesh/strait/internal/protocol"
	"github.com/straitmesh/strait/internal/proxypush"
)

const egressListenerMesh = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: web, namespace: app}
spec:
  hosts: [web.app.svc.cluster.local]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: db, namespace: app}
spec:
  hosts: [db.app.svc.cluster.local]
  ports: [{number: 5432, name: tcp, protocol: TCP}]
  resolution: STATIC
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: far, namespace: other}
spec:
  hosts: [far.other.svc.cluster.local]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: hidden, namespace: other}
spec:
  hosts: [hidden.other.svc.cluster.local]
  exportTo: ["."]
  ports: [{number: 7000, name: tcp, protocol: TCP}]
  resolution: STATIC
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: ports, namespace: app}
spec:
  egress:
  - port: {number: 8080, protocol: HTTP, name: local}
    bind: 127.0.0.2
    captureMode: NONE
    hosts: [./web.app.svc.cluster.local]
  - port: {number: 7000, protocol: TCP}
    hosts: [./db.app.svc.cluster.local, other/far.other.svc.cluster.local, other/hidden.other.svc.cluster.local]
  - hosts: [./*]
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: ports-only, namespace: strict}
spec:
  egress:
  - port: {number: 80, protocol: HTTP}
    hosts: [other/*]
`

func hostnames(svcs []*Service) []string {
	var out []string
	for _, s := range svcs {
		out = append(out, s.Hostname)
	}
	return out
}

// TestScopeEgressListeners: a Sidecar's egress listeners with a port keep
// their port, bind, capture mode and own services; the catch-all
// listener's services are its own; without a catch-all listener there are
// none; without a Sidecar every service in scope is the catch-all's. A
// service not exported to the proxy's namespace is in no listener.
func TestScopeEgressListeners(t *testing.T) {
	s, _ := buildYAML(t, egressListenerMesh, BuildOptions{})
	app := s.ProxyScope(&proxypush.Proxy{Namespace: "app"})
	if len(app.Listeners) != 2 {
		t.Fatalf("%d listeners, want 2", len(app.Listeners))
	}
	l0, l1 := app.Listeners[0], app.Listeners[1]
	if l0.Port != (Port{Name: "local", Number: 8080, Protocol: protocol.HTTP}) || l0.Bind != "127.0.0.2" || !l0.CaptureNone {
		t.Errorf("listener 0: %+v", l0)
	}
	if l1.Port != (Port{Number: 7000, Protocol: protocol.TCP}) || l1.Bind != "" || l1.CaptureNone {
		t.Errorf("listener 1: %+v", l1)
	}
	for _, tc := range []struct {
		name string
		got  []*Service
		want []string
	}{
		{"listener 0", l0.Services, []string{"web.app.svc.cluster.local"}},
		{"listener 1", l1.Services, []string{"db.app.svc.cluster.local", "far.other.svc.cluster.local"}},
		{"catch-all", app.CatchAll, []string{"db.app.svc.cluster.local", "web.app.svc.cluster.local"}},
		{"all", app.Services, []string{"db.app.svc.cluster.local", "far.other.svc.cluster.local", "web.app.svc.cluster.local"}},
	} {
		got := hostnames(tc.got)
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	strict := s.ProxyScope(&proxypush.Proxy{Namespace: "strict"})
	if len(strict.CatchAll) != 0 || len(strict.Listeners) != 1 || len(strict.Services) != 1 {
		t.Errorf("ports only: catch-all %v, %d listeners, services %v; want no catch-all, 1 listener, far", hostnames(strict.CatchAll), len(strict.Listeners), hostnames(strict.Services))
	}
	open := s.ProxyScope(&proxypush.Proxy{Namespace: "open"})
	if len(open.CatchAll) != 3 || len(open.Listeners) != 0 {
		t.Errorf("no Sidecar: catch-all %v, %d listeners; want all 3 services, none", hostnames(open.CatchAll), len(open.Listeners))
	}
}

// rootDotMesh is the Sidecar resource's own example: a default Sidecar in
// the root namespace whose "./*" means, for each proxy it applies to, that
// proxy's namespace (Istio's ConvertToSidecarScope gets the proxy's
// namespace as configNamespace for the root namespace's Sidecar).
const rootDotMesh = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: reviews, namespace: default}
spec:
  hosts: [reviews.default.svc.cluster.local]
  ports: [{number: 9080, name: http, protocol: HTTP}]
  resolution: STATIC
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: web, namespace: other}
spec:
  hosts: [web.other.svc.cluster.local]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: cp, namespace: istio-system}
spec:
  hosts: [cp.istio-system.svc.cluster.local]
  ports: [{number: 15010, name: grpc, protocol: GRPC}]
  resolution: STATIC
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: istio-system}
spec:
  egress:
  - hosts: ["./*", "istio-system/*"]
`

// TestScopeRootSidecarDotIsProxyNamespace: under the root namespace's
// default Sidecar, a proxy of default reaches default's services and
// istio-system's, one of other reaches other's and istio-system's.
func TestScopeRootSidecarDotIsProxyNamespace(t *testing.T) {
	s, _ := buildYAML(t, rootDotMesh, BuildOptions{})
	for _, tc := range []struct {
		ns   string
		want []string
	}{
		{"default", []string{"cp.istio-system.svc.cluster.local", "reviews.default.svc.cluster.local"}},
		{"other", []string{"cp.istio-system.svc.cluster.local", "web.other.svc.cluster.local"}},
		{"istio-system", []string{"cp.istio-system.svc.cluster.local"}},
	} {
		sc := s.ProxyScope(&proxypush.Proxy{Namespace: tc.ns})
		got := hostnames(sc.Services)
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("proxy of %s: services %v, want %v", tc.ns, got, tc.want)
		}
		if got := sc.DependsOn(s, "reviews.default.svc.cluster.local"); got != (tc.ns == "default") {
			t.Errorf("proxy of %s: DependsOn(reviews) %v", tc.ns, got)
		}
	}
}
