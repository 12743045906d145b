package gen_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"

	"github.com/straitmesh/strait/internal/mesh"
	"github.com/straitmesh/strait/internal/meshconfig"
	"github.com/straitmesh/strait/internal/proxypush"
	"github.com/straitmesh/strait/internal/xds/gen"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// inboundShape summarises virtualInbound's chains, one line each:
// "PORT TRANSPORT [ALPN...] mtls|plain -> CLUSTER" (port 0: any).
func inboundShape(t *testing.T, g *gen.Generator, nodeID string) []string {
	t.Helper()
	proxy, err := proxypush.ParseNodeID(nodeID)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range g.BuildListeners(proxy) {
		if l.Name != gen.VirtualInboundListener {
			continue
		}
		if slices.ContainsFunc(l.ListenerFilters, func(f *listener.ListenerFilter) bool { return f.Name == "envoy.filters.listener.tls_inspector" }) {
			out = append(out, "tls_inspector")
		}
		for _, c := range l.FilterChains {
			m := c.GetFilterChainMatch()
			sec := "plain"
			if c.TransportSocket != nil {
				var d tlsv3.DownstreamTlsContext
				if err := c.TransportSocket.GetTypedConfig().UnmarshalTo(&d); err != nil {
					t.Fatal(err)
				}
				sec = "mtls"
				if !d.GetRequireClientCertificate().GetValue() {
					sec = "tls-no-client-cert"
				}
			}
			out = append(out, strings.TrimSpace(fmt.Sprintf("%d %s %v %s %s", m.GetDestinationPort().GetValue(), cmpOr(m.GetTransportProtocol(), "any"),
				m.GetApplicationProtocols(), sec, c.Name)))
		}
	}
	return out
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

var istioALPN = "[istio-peer-exchange istio istio-http/1.0 istio-http/1.1 istio-h2]"

// TestPeerAuthenticationInboundChains: each port gets the chains of its
// mode, as Istio's getFilterChainMatchOptions picks them.
func TestPeerAuthenticationInboundChains(t *testing.T) {
	g := staticGenerator(t, filepath.Join("testdata", "peerauthn"))
	tests := []struct {
		node string
		want []string
	}{
		{"sidecar~10.94.0.11~strict.pa~pa.svc.cluster.local", []string{ // namespace STRICT
			"tls_inspector",
			"8080 tls [] mtls inbound|8080||",
			"9000 tls [] mtls inbound|9000||",
			"0 tls [] mtls InboundPassthroughFilterChain",
		}},
		{"sidecar~10.94.0.12~perm.pa~pa.svc.cluster.local", []string{ // workload PERMISSIVE, 9000 DISABLE, 7070 STRICT
			"tls_inspector",
			"8080 tls " + istioALPN + " mtls inbound|8080||",
			"8080 raw_buffer [] plain inbound|8080||",
			"9000 raw_buffer [] plain inbound|9000||",
			"0 tls " + istioALPN + " mtls InboundPassthroughFilterChain",
			"0 any [] plain InboundPassthroughFilterChain",
			"7070 tls [] mtls InboundPassthroughFilterChain",
		}},
		{"sidecar~10.94.0.13~plain.plain~plain.svc.cluster.local", []string{ // namespace DISABLE
			"tls_inspector",
			"8080 raw_buffer [] plain inbound|8080||",
			"0 raw_buffer [] plain InboundPassthroughFilterChain",
		}},
	}
	for _, tt := range tests {
		got := inboundShape(t, g, tt.node)
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s virtualInbound:\n  got  %q\n  want %q", tt.node, got, tt.want)
		}
	}
}

// TestPeerAuthenticationWithoutCertificate: PERMISSIVE on a workload
// without a sidecar certificate keeps its plaintext chains; STRICT still
// refuses plaintext.
func TestPeerAuthenticationWithoutCertificate(t *testing.T) {
	const we = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: app, namespace: demo}
spec:
  hosts: [app.demo.svc.cluster.local]
  addresses: [240.240.7.1]
  ports: [{number: 80, name: http, targetPort: 8080}]
  resolution: STATIC
  workloadSelector: {labels: {app: app}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: app, namespace: demo}
spec: {address: 10.93.0.11, labels: {app: app}}
`
	const strict = "---\napiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata: {name: default, namespace: demo}\nspec: {mtls: {mode: STRICT}}\n"
	node := "sidecar~10.93.0.11~app.demo~demo.svc.cluster.local"
	for _, tt := range []struct {
		yaml string
		want []string
	}{
		{we, []string{"8080 any [] plain inbound|8080||", "0 any [] plain InboundPassthroughFilterChain"}},
		{we + strict, []string{"tls_inspector", "8080 tls [] mtls inbound|8080||", "0 tls [] mtls InboundPassthroughFilterChain"}},
	} {
		snap := build(t, storeOf(t, tt.yaml), mesh.BuildOptions{})
		g := gen.New(gen.SourceFunc(func() *mesh.Snapshot { return snap }))
		if got := inboundShape(t, g, node); !slices.Equal(got, tt.want) {
			t.Errorf("got %q, want %q", got, tt.want)
		}
	}
}

// TestTrustDomainPinning: terminated mTLS accepts client certificates of
// the mesh's trust domain only, and a client checks the server's SPIFFE
// ID in that trust domain exactly.
func TestTrustDomainPinning(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "mtls", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	mc, err := meshconfig.Parse([]byte("trustDomain: example.org\n"))
	if err != nil {
		t.Fatal(err)
	}
	snap := build(t, storeOf(t, string(b)), mesh.BuildOptions{Mesh: mc})
	g := gen.New(gen.SourceFunc(func() *mesh.Snapshot { return snap }))
	server, _ := proxypush.ParseNodeID("sidecar~10.95.0.11~server.secure~secure.svc.cluster.local")
	client, _ := proxypush.ParseNodeID("sidecar~10.95.0.10~client.secure~secure.svc.cluster.local")

	var terminated int
	for _, l := range g.BuildListeners(server) {
		for _, c := range l.FilterChains {
			if c.TransportSocket == nil {
				continue
			}
			var d tlsv3.DownstreamTlsContext
			if err := c.TransportSocket.GetTypedConfig().UnmarshalTo(&d); err != nil {
				t.Fatal(err)
			}
			terminated++
			sans := d.GetCommonTlsContext().GetCombinedValidationContext().GetDefaultValidationContext().GetMatchTypedSubjectAltNames()
			if len(sans) != 1 || sans[0].GetSanType() != tlsv3.SubjectAltNameMatcher_URI || sans[0].GetMatcher().GetPrefix() != "spiffe://example.org/" {
				t.Errorf("chain %s accepts clients %v, want URI prefix spiffe://example.org/", c.Name, sans)
			}
		}
	}
	if terminated == 0 {
		t.Fatal("no chain terminates mTLS")
	}

	var checked int
	for _, c := range g.BuildClusters(client) {
		ts := mtlsSocket(c)
		if ts == nil {
			continue
		}
		var u tlsv3.UpstreamTlsContext
		if err := ts.GetTypedConfig().UnmarshalTo(&u); err != nil {
			t.Fatal(err)
		}
		for _, m := range u.GetCommonTlsContext().GetCombinedValidationContext().GetDefaultValidationContext().GetMatchTypedSubjectAltNames() {
			checked++
			if e := m.GetMatcher().GetExact(); !strings.HasPrefix(e, "spiffe://example.org/ns/secure/sa/") || m.GetSanType() != tlsv3.SubjectAltNameMatcher_URI {
				t.Errorf("cluster %s checks the server's SAN with %v, want an exact spiffe://example.org/ID", c.Name, m)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no client cluster checks a server SAN")
	}
}

// TestTrustDomainAliases: with the mesh config's trustDomainAliases,
// terminated mTLS accepts client certificates of the mesh's trust domain
// and of each alias (Istio's TrustDomainsForValidation), and a client
// accepts the server's SPIFFE ID in any of them (Istio's
// ExpandWithTrustDomains), and in no other.
func TestTrustDomainAliases(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "mtls", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	mc := meshconfig.Default()
	mc.TrustDomain, mc.TrustDomainAliases = "example.org", []string{"old.example"}
	snap := build(t, storeOf(t, string(b)), mesh.BuildOptions{Mesh: mc})
	g := gen.New(gen.SourceFunc(func() *mesh.Snapshot { return snap }))
	server, _ := proxypush.ParseNodeID("sidecar~10.95.0.11~server.secure~secure.svc.cluster.local")
	client, _ := proxypush.ParseNodeID("sidecar~10.95.0.10~client.secure~secure.svc.cluster.local")

	var terminated int
	for _, l := range g.BuildListeners(server) {
		for _, c := range l.FilterChains {
			if c.TransportSocket == nil {
				continue
			}
			var d tlsv3.DownstreamTlsContext
			if err := c.TransportSocket.GetTypedConfig().UnmarshalTo(&d); err != nil {
				t.Fatal(err)
			}
			terminated++
			var prefixes []string
			for _, m := range d.GetCommonTlsContext().GetCombinedValidationContext().GetDefaultValidationContext().GetMatchTypedSubjectAltNames() {
				prefixes = append(prefixes, m.GetSanType().String()+" "+m.GetMatcher().GetPrefix())
			}
			if want := []string{"URI spiffe://example.org/", "URI spiffe://old.example/"}; !slices.Equal(prefixes, want) {
				t.Errorf("chain %s accepts clients %v, want %v", c.Name, prefixes, want)
			}
		}
	}
	if terminated == 0 {
		t.Fatal("no chain terminates mTLS")
	}

	var checked int
	for _, c := range g.BuildClusters(client) {
		ts := mtlsSocket(c)
		if ts == nil {
			continue
		}
		var u tlsv3.UpstreamTlsContext
		if err := ts.GetTypedConfig().UnmarshalTo(&u); err != nil {
			t.Fatal(err)
		}
		byTD := map[string][]string{}
		for _, m := range u.GetCommonTlsContext().GetCombinedValidationContext().GetDefaultValidationContext().GetMatchTypedSubjectAltNames() {
			td, id, ok := strings.Cut(strings.TrimPrefix(m.GetMatcher().GetExact(), "spiffe://"), "/")
			if !ok || m.GetSanType() != tlsv3.SubjectAltNameMatcher_URI {
				t.Errorf("cluster %s checks the server's SAN with %v, want an exact SPIFFE ID", c.Name, m)
			}
			byTD[td] = append(byTD[td], id)
		}
		checked++
		if len(byTD) != 2 || len(byTD["example.org"]) == 0 || !slices.Equal(byTD["example.org"], byTD["old.example"]) {
			t.Errorf("cluster %s accepts server identities %v, want the same ones in example.org and old.example", c.Name, byTD)
		}
	}
	if checked == 0 {
		t.Fatal("no client cluster checks a server SAN")
	}
}

// TestEnableAutoMTLSFalse: with the mesh config's enableAutoMtls false a
// client's cluster to sidecars is plaintext, unless a DestinationRule says
// ISTIO_MUTUAL.
func TestEnableAutoMTLSFalse(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "mtls", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	client, _ := proxypush.ParseNodeID("sidecar~10.95.0.10~client.secure~secure.svc.cluster.local")
	const dr = "---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: server, namespace: secure}\n" +
		"spec: {host: server.secure.svc.cluster.local, trafficPolicy: {tls: {mode: ISTIO_MUTUAL}}}\n"
	for _, tc := range []struct {
		mesh, extra string
		want        bool
	}{
		{"", "", true},
		{"enableAutoMtls: false\n", "", false},
		{"enableAutoMtls: false\n", dr, true},
		{"enableAutoMtls: true\n", "", true},
	} {
		mc, err := meshconfig.Parse([]byte(tc.mesh))
		if err != nil {
			t.Fatal(err)
		}
		snap := build(t, storeOf(t, string(b)+tc.extra), mesh.BuildOptions{Mesh: mc})
		g := gen.New(gen.SourceFunc(func() *mesh.Snapshot { return snap }))
		found := false
		for _, c := range g.BuildClusters(client) {
			if c.Name == "outbound|8080||server.secure.svc.cluster.local" {
				found = true
				if got := mtlsSocket(c) != nil; got != tc.want {
					t.Errorf("mesh %q, extra %q: mTLS cluster %v, want %v", tc.mesh, tc.extra, got, tc.want)
				}
			}
		}
		if !found {
			t.Fatal("no server cluster")
		}
	}
}

// TestAutoMTLSFollowsNamespacePolicy: a destination namespace (or mesh)
// whose PeerAuthentication is DISABLE gets plaintext from client
// sidecars, and the cluster cache follows a policy change.
func TestAutoMTLSFollowsNamespacePolicy(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "mtls", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	pa := func(ns, mode string) string {
		return fmt.Sprintf("---\napiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata: {name: default, namespace: %s}\nspec: {mtls: {mode: %s}}\n", ns, mode)
	}
	wpa := func(mtls, ports string) string {
		s := "---\napiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata: {name: server, namespace: secure}\n" +
			"spec:\n  selector: {matchLabels: {app: server}}\n  mtls: " + mtls + "\n"
		if ports != "" {
			s += "  portLevelMtls: " + ports + "\n"
		}
		return s
	}
	var cur *mesh.Snapshot
	g := gen.New(gen.SourceFunc(func() *mesh.Snapshot { return cur }))
	client, _ := proxypush.ParseNodeID("sidecar~10.95.0.10~client.secure~secure.svc.cluster.local")
	tlsOf := func() bool {
		t.Helper()
		res, err := g.Generate(client, xdsapi.ClusterType, nil, &proxypush.PushRequest{Full: true})
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
	for i, tt := range []struct {
		extra string
		want  bool
	}{
		{"", true},
		{pa("secure", "DISABLE"), false},
		{pa("secure", "STRICT"), true},
		{pa("istio-system", "DISABLE"), false},
		{pa("istio-system", "DISABLE") + pa("secure", "PERMISSIVE"), true},
		{pa("other", "DISABLE"), true},
		// The endpoints' own policies (Istio's mtlsChecker): a workload
		// DISABLE, or a port-level DISABLE of the port the cluster
		// reaches, makes the cluster plaintext; another port's does not;
		// a DestinationRule's ISTIO_MUTUAL still wins.
		{wpa("{mode: DISABLE}", ""), false},
		{wpa("{mode: STRICT}", "{8080: {mode: DISABLE}}"), false},
		{wpa("{mode: STRICT}", "{9000: {mode: DISABLE}}"), true},
		{pa("secure", "STRICT") + wpa("{mode: PERMISSIVE}", ""), true},
		{wpa("{mode: DISABLE}", "") + "---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: server, namespace: secure}\n" +
			"spec: {host: server.secure.svc.cluster.local, trafficPolicy: {tls: {mode: ISTIO_MUTUAL}}}\n", true},
	} {
		cur = build(t, storeOf(t, string(b)+tt.extra), mesh.BuildOptions{Version: uint64(i + 1), Previous: cur})
		if got := tlsOf(); got != tt.want {
			t.Errorf("with %q: mTLS cluster %v, want %v", tt.extra, got, tt.want)
		}
	}
}
