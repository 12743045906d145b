package gen_test

import (
	"path/filepath"
	"slices"
	"testing"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tcpproxy "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"

	"github.com/straitmesh/strait/internal/mesh"
	"github.com/straitmesh/strait/internal/proxypush"
	"github.com/straitmesh/strait/internal/xds/gen"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// TestTCPSourceLabelsPerProxy: a tcp route matched on sourceLabels applies
// to the proxy whose workload has them and not to another proxy of the
// same scope, both through the shared-resource cache (Generate) and the
// direct build (BuildListeners).
func TestTCPSourceLabelsPerProxy(t *testing.T) {
	g, _ := newGenerator(t, filepath.Join("testdata", "filters"))
	for id, want := range map[string]string{
		"sidecar~10.97.0.10~client.app~app.svc.cluster.local": "outbound|5433|v2|db.app.svc.cluster.local",
		"sidecar~10.97.0.11~other.app~app.svc.cluster.local":  "outbound|5433||db.app.svc.cluster.local",
	} {
		proxy, err := proxypush.ParseNodeID(id)
		if err != nil {
			t.Fatal(err)
		}
		res, err := g.Generate(proxy, xdsapi.ListenerType, nil, &proxypush.PushRequest{Full: true})
		if err != nil {
			t.Fatal(err)
		}
		var generated []*listener.Listener
		for _, r := range res {
			var l listener.Listener
			if err := r.Resource.UnmarshalTo(&l); err != nil {
				t.Fatal(err)
			}
			generated = append(generated, &l)
		}
		for how, ls := range map[string][]*listener.Listener{"Generate": generated, "BuildListeners": g.BuildListeners(proxy)} {
			if got := clusterOf(t, ls, "240.240.2.3_5433"); got != want {
				t.Errorf("%s %s: 240.240.2.3_5433 goes to %q, want %q", how, proxy.PodName, got, want)
			}
		}
	}
}

// clusterOf is the cluster of a listener's only filter chain.
func clusterOf(t *testing.T, ls []*listener.Listener, name string) string {
	t.Helper()
	for _, l := range ls {
		if l.Name != name {
			continue
		}
		if len(l.FilterChains) != 1 {
			t.Fatalf("%s has %d filter chains", name, len(l.FilterChains))
		}
		fs := l.FilterChains[0].Filters
		var tp tcpproxy.TcpProxy
		if err := fs[len(fs)-1].GetTypedConfig().UnmarshalTo(&tp); err != nil { // the terminal filter
			t.Fatal(err)
		}
		return tp.GetCluster()
	}
	t.Fatalf("no listener %s", name)
	return ""
}

// chainClusters lists the tcp_proxy cluster of every filter chain of the
// listener named name.
func chainClusters(t *testing.T, ls []*listener.Listener, name string) []string {
	t.Helper()
	for _, l := range ls {
		if l.Name != name {
			continue
		}
		var out []string
		for _, fc := range l.FilterChains {
			for _, f := range fc.Filters {
				var tp tcpproxy.TcpProxy
				if f.GetTypedConfig().UnmarshalTo(&tp) == nil {
					out = append(out, tp.GetCluster())
				}
			}
		}
		slices.Sort(out)
		return out
	}
	t.Fatalf("no listener %s", name)
	return nil
}

// tcp and tls rules of a VirtualService bound only to gateways do not
// reach sidecars, and do not hide a later VirtualService's; the same rules
// bound to mesh do.
func TestL4RoutesOnlyForMesh(t *testing.T) {
	const services = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: db, namespace: app}
spec:
  hosts: [db.example.com]
  addresses: [240.240.9.1]
  ports: [{number: 5432, name: tcp, protocol: TCP}, {number: 443, name: tls, protocol: TLS}]
  resolution: STATIC
  endpoints: [{address: 10.1.0.1}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: other, namespace: app}
spec:
  hosts: [other.example.com]
  ports: [{number: 5432, name: tcp, protocol: TCP}, {number: 443, name: tls, protocol: TLS}]
  resolution: STATIC
  endpoints: [{address: 10.1.0.2}]
`
	routes := func(name, gateways string) string {
		return `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ` + name + `, namespace: app}
spec:
  hosts: [db.example.com]
  gateways: ` + gateways + `
  tcp:
  - match: [{port: 5432}]
    route: [{destination: {host: other.example.com, port: {number: 5432}}}]
  tls:
  - match: [{port: 443, sniHosts: [db.example.com]}]
    route: [{destination: {host: other.example.com, port: {number: 443}}}]
`
	}
	proxy, err := proxypush.ParseNodeID("sidecar~10.1.0.9~client.app~app.svc.cluster.local")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		vs       []string
		tcp, tls []string
	}{
		{"gateway only", []string{routes("a", "[gw]")}, []string{"outbound|5432||db.example.com"}, []string{"outbound|443||db.example.com"}},
		{"mesh", []string{routes("a", "[mesh]")}, []string{"outbound|5432||other.example.com"}, []string{"outbound|443||other.example.com"}},
		{"gateway only, then mesh", []string{routes("a", "[gw]"), routes("b", "[mesh]")}, []string{"outbound|5432||other.example.com"}, []string{"outbound|443||other.example.com"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap := build(t, storeOf(t, append([]string{services}, tc.vs...)...), mesh.BuildOptions{})
			ls := gen.New(gen.SourceFunc(func() *mesh.Snapshot { return snap })).BuildListeners(proxy)
			if got := chainClusters(t, ls, "240.240.9.1_5432"); !slices.Equal(got, tc.tcp) {
				t.Errorf("tcp chains go to %v, want %v", got, tc.tcp)
			}
			if got := chainClusters(t, ls, "240.240.9.1_443"); !slices.Equal(got, tc.tls) {
				t.Errorf("tls chains go to %v, want %v", got, tc.tls)
			}
		})
	}
}
