package gen_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"

	"github.com/straitmesh/strait/internal/mesh"
	"github.com/straitmesh/strait/internal/proxypush"
	"github.com/straitmesh/strait/internal/xds/gen"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// mtlsSocket is the TLS socket of an outbound cluster that originates
// Istio mTLS: its transport_socket (a DestinationRule's ISTIO_MUTUAL), or
// its tlsMode-istio transport socket match (auto mTLS); nil otherwise.
func mtlsSocket(c *cluster.Cluster) *core.TransportSocket {
	if ts := c.GetTransportSocket(); ts != nil && ts.GetName() == "envoy.transport_sockets.tls" {
		return ts
	}
	for _, m := range c.GetTransportSocketMatches() {
		if m.GetName() == "tlsMode-istio" {
			return m.GetTransportSocket()
		}
	}
	return nil
}

// TestAutoMTLSFollowsEndpointLabels: auto mTLS is decided per endpoint,
// as Istio's: the cluster carries the tlsMode-istio and tlsMode-disabled
// transport socket matches while any endpoint has a sidecar, with the
// SANs of those that do, and EDS marks exactly the endpoints with a
// sidecar {tlsMode: istio}; also when just a WorkloadEntry's labels or a
// workload's port-level PeerAuthentication change (the caches must not
// serve the old decision).
func TestAutoMTLSFollowsEndpointLabels(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "mtls", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	secure := string(b)
	// server-2 loses its sidecar label.
	mixed := strings.Replace(secure, "address: 10.95.0.12\n  labels: {app: server, security.istio.io/tlsMode: istio}", "address: 10.95.0.12\n  labels: {app: server}", 1)
	// Both lose it.
	plain := strings.Replace(mixed, "address: 10.95.0.11\n  serviceAccount: server-sa\n  labels: {app: server, security.istio.io/tlsMode: istio}", "address: 10.95.0.11\n  serviceAccount: server-sa\n  labels: {app: server}", 1)
	// server-2 keeps its sidecar but takes plaintext on 8080.
	labelled := strings.Replace(secure, "address: 10.95.0.12\n  labels: {app: server, security.istio.io/tlsMode: istio}", "address: 10.95.0.12\n  labels: {app: server, v: two, security.istio.io/tlsMode: istio}", 1)
	disabled := labelled +
		"---\napiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata: {name: two, namespace: secure}\n" +
		"spec:\n  selector: {matchLabels: {v: two}}\n  mtls: {mode: STRICT}\n  portLevelMtls: {8080: {mode: DISABLE}}\n"
	if mixed == secure || plain == mixed || !strings.Contains(disabled, "v: two, security") {
		t.Fatal("test YAML did not change")
	}
	const name = "outbound|8080||server.secure.svc.cluster.local"
	var cur atomic.Pointer[mesh.Snapshot]
	g := gen.New(gen.SourceFunc(cur.Load))
	proxy, err := proxypush.ParseNodeID("sidecar~10.95.0.10~client.secure~secure.svc.cluster.local")
	if err != nil {
		t.Fatal(err)
	}
	// state is the cluster's matches and SANs, and the endpoints EDS
	// marks for mTLS.
	state := func() (matches, sans, marked []string) {
		t.Helper()
		res, err := g.Generate(proxy, xdsapi.ClusterType, nil, &proxypush.PushRequest{Full: true})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, r := range res {
			if r.Name != name {
				continue
			}
			found = true
			var c cluster.Cluster
			if err := r.Resource.UnmarshalTo(&c); err != nil {
				t.Fatal(err)
			}
			if c.GetTransportSocket() != nil {
				t.Errorf("auto mTLS cluster has a transport_socket %s, want matches only", c.GetTransportSocket().GetName())
			}
			for _, m := range c.GetTransportSocketMatches() {
				matches = append(matches, fmt.Sprintf("%s %v %s", m.GetName(), m.GetMatch().AsMap(), m.GetTransportSocket().GetName()))
			}
			if ts := mtlsSocket(&c); ts != nil {
				var u tlsv3.UpstreamTlsContext
				if err := ts.GetTypedConfig().UnmarshalTo(&u); err != nil {
					t.Fatal(err)
				}
				for _, m := range u.GetCommonTlsContext().GetCombinedValidationContext().GetDefaultValidationContext().GetMatchTypedSubjectAltNames() {
					sans = append(sans, m.GetMatcher().GetExact())
				}
			}
		}
		if !found {
			t.Fatal("no server cluster")
		}
		res, err = g.Generate(proxy, xdsapi.EndpointType, []string{name}, &proxypush.PushRequest{Full: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			var cla endpoint.ClusterLoadAssignment
			if err := r.Resource.UnmarshalTo(&cla); err != nil {
				t.Fatal(err)
			}
			for _, l := range cla.GetEndpoints() {
				for _, e := range l.GetLbEndpoints() {
					md := e.GetMetadata().GetFilterMetadata()["envoy.transport_socket_match"]
					if md == nil {
						continue
					}
					if got := md.AsMap(); len(got) != 1 || got["tlsMode"] != "istio" {
						t.Errorf("endpoint %v: transport socket match metadata %v, want {tlsMode: istio}", e.GetEndpoint().GetAddress(), got)
					}
					marked = append(marked, e.GetEndpoint().GetAddress().GetSocketAddress().GetAddress())
				}
			}
		}
		return matches, sans, marked
	}
	autoMatches := []string{"tlsMode-istio map[tlsMode:istio] envoy.transport_sockets.tls", "tlsMode-disabled map[] envoy.transport_sockets.raw_buffer"}
	for i, tt := range []struct {
		name          string
		yaml          string
		matches, sans []string
		marked        []string
	}{
		{"all sidecars", secure, autoMatches,
			[]string{"spiffe://cluster.local/ns/secure/sa/default", "spiffe://cluster.local/ns/secure/sa/server-sa"},
			[]string{"10.95.0.11", "10.95.0.12"}},
		{"one without a sidecar", mixed, autoMatches,
			[]string{"spiffe://cluster.local/ns/secure/sa/server-sa"}, []string{"10.95.0.11"}},
		{"none with a sidecar", plain, nil, nil, nil},
		{"back to all sidecars", secure, autoMatches,
			[]string{"spiffe://cluster.local/ns/secure/sa/default", "spiffe://cluster.local/ns/secure/sa/server-sa"},
			[]string{"10.95.0.11", "10.95.0.12"}},
		// Then only a PeerAuthentication changes: the service stays.
		{"server-2 labelled", labelled, autoMatches,
			[]string{"spiffe://cluster.local/ns/secure/sa/default", "spiffe://cluster.local/ns/secure/sa/server-sa"},
			[]string{"10.95.0.11", "10.95.0.12"}},
		{"one port-level DISABLE", disabled, autoMatches,
			[]string{"spiffe://cluster.local/ns/secure/sa/server-sa"}, []string{"10.95.0.11"}},
	} {
		cur.Store(build(t, storeOf(t, tt.yaml), mesh.BuildOptions{Version: uint64(i + 1), Previous: cur.Load()}))
		matches, sans, marked := state()
		if !slices.Equal(matches, tt.matches) {
			t.Errorf("%s: matches %q, want %q", tt.name, matches, tt.matches)
		}
		if !slices.Equal(sans, tt.sans) {
			t.Errorf("%s: SANs %q, want %q", tt.name, sans, tt.sans)
		}
		if !slices.Equal(marked, tt.marked) {
			t.Errorf("%s: EDS marks %q for mTLS, want %q", tt.name, marked, tt.marked)
		}
	}
}

// TestAutoMTLSNotToMeshExternal: a ServiceEntry outside the mesh (its
// location MESH_EXTERNAL, also when unset, as Istio's default) gets no
// auto mTLS even when every endpoint is labelled with a sidecar; a
// DestinationRule's ISTIO_MUTUAL still applies, as in Istio's
// buildUpstreamTLSSettings.
func TestAutoMTLSNotToMeshExternal(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "mtls", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	internal := string(b)
	proxy, err := proxypush.ParseNodeID("sidecar~10.95.0.10~client.secure~secure.svc.cluster.local")
	if err != nil {
		t.Fatal(err)
	}
	tlsOf := func(yaml string) bool {
		t.Helper()
		snap := build(t, storeOf(t, yaml), mesh.BuildOptions{Version: 1})
		g := gen.New(gen.SourceFunc(func() *mesh.Snapshot { return snap }))
		res, err := g.Generate(proxy, xdsapi.ClusterType, nil, &proxypush.PushRequest{Full: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Name == "outbound|8080||server.secure.svc.cluster.local" {
				var c cluster.Cluster
				if err := r.Resource.UnmarshalTo(&c); err != nil {
					t.Fatal(err)
				}
				return mtlsSocket(&c) != nil
			}
		}
		t.Fatal("no server cluster")
		return false
	}
	if !tlsOf(internal) {
		t.Fatal("MESH_INTERNAL with sidecars: want an mTLS cluster")
	}
	for _, location := range []string{"  location: MESH_EXTERNAL\n", ""} {
		external := strings.Replace(internal, "  location: MESH_INTERNAL\n", location, 1)
		if external == internal {
			t.Fatal("test YAML did not change")
		}
		if tlsOf(external) {
			t.Errorf("location %q: want a plaintext cluster", strings.TrimSpace(location))
		}
		dr := external + "---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: server, namespace: secure}\nspec:\n  host: server.secure.svc.cluster.local\n  trafficPolicy: {tls: {mode: ISTIO_MUTUAL}}\n"
		if !tlsOf(dr) {
			t.Errorf("location %q with ISTIO_MUTUAL: want an mTLS cluster", strings.TrimSpace(location))
		}
	}
}

// TestAutoMTLSDNSClusterEndpoints: a DNS cluster carries its endpoints,
// so its load_assignment marks those with a sidecar {tlsMode: istio}
// itself, beside the auto mTLS matches; the cluster cache follows a
// port-level DISABLE that changes only that marking.
func TestAutoMTLSDNSClusterEndpoints(t *testing.T) {
	const base = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: db, namespace: secure}
spec:
  hosts: [db.secure.svc.cluster.local]
  ports: [{number: 5432, name: tcp, protocol: TCP}]
  location: MESH_INTERNAL
  resolution: DNS
  workloadSelector: {labels: {app: db}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: db-1, namespace: secure}
spec: {address: 10.95.1.1, labels: {app: db, member: one, security.istio.io/tlsMode: istio}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: db-2, namespace: secure}
spec: {address: 10.95.1.2, labels: {app: db, member: two, security.istio.io/tlsMode: istio}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: db-3, namespace: secure}
spec: {address: 10.95.1.3, labels: {app: db}}
`
	const disable = `---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: two, namespace: secure}
spec:
  selector: {matchLabels: {member: two}}
  mtls: {mode: STRICT}
  portLevelMtls: {5432: {mode: DISABLE}}
`
	proxy, err := proxypush.ParseNodeID("sidecar~10.95.0.10~client.secure~secure.svc.cluster.local")
	if err != nil {
		t.Fatal(err)
	}
	var cur atomic.Pointer[mesh.Snapshot]
	g := gen.New(gen.SourceFunc(cur.Load))
	for i, tt := range []struct {
		yaml   string
		marked []string
	}{
		{base, []string{"10.95.1.1", "10.95.1.2"}},
		{base + disable, []string{"10.95.1.1"}},
	} {
		cur.Store(build(t, storeOf(t, tt.yaml), mesh.BuildOptions{Version: uint64(i + 1), Previous: cur.Load()}))
		res, err := g.Generate(proxy, xdsapi.ClusterType, nil, &proxypush.PushRequest{Full: true})
		if err != nil {
			t.Fatal(err)
		}
		var c *cluster.Cluster
		for _, r := range res {
			if r.Name == "outbound|5432||db.secure.svc.cluster.local" {
				c = &cluster.Cluster{}
				if err := r.Resource.UnmarshalTo(c); err != nil {
					t.Fatal(err)
				}
			}
		}
		if c == nil {
			t.Fatal("no db cluster")
		}
		if mtlsSocket(c) == nil || len(c.GetTransportSocketMatches()) != 2 {
			t.Errorf("step %d: DNS cluster without the auto mTLS matches", i)
		}
		var marked []string
		for _, l := range c.GetLoadAssignment().GetEndpoints() {
			for _, e := range l.GetLbEndpoints() {
				if e.GetMetadata().GetFilterMetadata()["envoy.transport_socket_match"].AsMap()["tlsMode"] == "istio" {
					marked = append(marked, e.GetEndpoint().GetAddress().GetSocketAddress().GetAddress())
				}
			}
		}
		if !slices.Equal(marked, tt.marked) {
			t.Errorf("step %d: endpoints marked for mTLS %q, want %q", i, marked, tt.marked)
		}
	}
}
