package mesh

import (
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/straitmesh/strait/internal/istioconfig"
)

// pa is one PeerAuthentication document.
func pa(ns, name, created, spec string) string {
	ts := ""
	if created != "" {
		ts = fmt.Sprintf(", creationTimestamp: %q", created)
	}
	return fmt.Sprintf("apiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata: {name: %s, namespace: %s%s}\nspec: %s\n", name, ns, ts, spec)
}

func paSnapshot(t *testing.T, docs ...string) (*Snapshot, []error) {
	t.Helper()
	res := istioconfig.ParseFile("pa.yaml", []byte(strings.Join(docs, "---\n")))
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	store := istioconfig.NewStore()
	for _, c := range res.Configs {
		if err := store.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	return Build(store, BuildOptions{})
}

// TestPeerAuthenticationPrecedence follows Istio's
// ComposePeerAuthentication: workload over namespace over mesh, UNSET
// inherits, the oldest wins among policies of one scope, port-level
// settings keyed by the workload's port.
func TestPeerAuthenticationPrecedence(t *testing.T) {
	const (
		t1 = "2026-01-01T00:00:00Z"
		t2 = "2026-01-02T00:00:00Z"
	)
	echo := map[string]string{"app": "echo", "version": "v1"}
	tests := []struct {
		name   string
		docs   []string
		ns     string
		labels map[string]string
		want   PeerPolicy
		wantNS MTLSMode // NamespaceMTLSMode(ns)
	}{
		{name: "no policy is PERMISSIVE", ns: "demo", want: PeerPolicy{Mode: MTLSPermissive}, wantNS: MTLSUnknown},
		{name: "mesh STRICT", docs: []string{pa("istio-system", "default", "", "{mtls: {mode: STRICT}}")},
			ns: "demo", want: PeerPolicy{Mode: MTLSStrict}, wantNS: MTLSStrict},
		{name: "mesh UNSET is PERMISSIVE", docs: []string{pa("istio-system", "default", "", "{}")},
			ns: "demo", want: PeerPolicy{Mode: MTLSPermissive}, wantNS: MTLSPermissive},
		{name: "namespace over mesh", docs: []string{pa("istio-system", "default", "", "{mtls: {mode: STRICT}}"), pa("demo", "ns", "", "{mtls: {mode: DISABLE}}")},
			ns: "demo", want: PeerPolicy{Mode: MTLSDisable}, wantNS: MTLSDisable},
		{name: "namespace UNSET inherits the mesh", docs: []string{pa("istio-system", "default", "", "{mtls: {mode: STRICT}}"), pa("demo", "ns", "", "{}")},
			ns: "demo", want: PeerPolicy{Mode: MTLSStrict}, wantNS: MTLSStrict},
		{name: "namespace UNSET without a mesh policy is PERMISSIVE", docs: []string{pa("demo", "ns", "", "{}")},
			ns: "demo", want: PeerPolicy{Mode: MTLSPermissive}, wantNS: MTLSPermissive},
		{name: "namespace UNSET under a mesh DISABLE", docs: []string{pa("istio-system", "default", "", "{mtls: {mode: DISABLE}}"), pa("demo", "ns", "", "{mtls: {}}")},
			ns: "demo", want: PeerPolicy{Mode: MTLSDisable}, wantNS: MTLSDisable},
		{name: "another namespace's policy does not apply", docs: []string{pa("other", "ns", "", "{mtls: {mode: STRICT}}")},
			ns: "demo", want: PeerPolicy{Mode: MTLSPermissive}, wantNS: MTLSUnknown},
		{name: "workload over namespace", docs: []string{pa("demo", "ns", "", "{mtls: {mode: STRICT}}"), pa("demo", "echo", "", "{selector: {matchLabels: {app: echo}}, mtls: {mode: PERMISSIVE}}")},
			ns: "demo", labels: echo, want: PeerPolicy{Mode: MTLSPermissive}, wantNS: MTLSStrict},
		{name: "workload selector not matching", docs: []string{pa("demo", "ns", "", "{mtls: {mode: STRICT}}"), pa("demo", "echo", "", "{selector: {matchLabels: {app: other}}, mtls: {mode: DISABLE}}")},
			ns: "demo", labels: echo, want: PeerPolicy{Mode: MTLSStrict}, wantNS: MTLSStrict},
		{name: "workload UNSET inherits, its port level applies", docs: []string{pa("demo", "ns", "", "{mtls: {mode: STRICT}}"),
			pa("demo", "echo", "", "{selector: {matchLabels: {app: echo}}, portLevelMtls: {8080: {mode: DISABLE}, 9090: {}}}")},
			ns: "demo", labels: echo, want: PeerPolicy{Mode: MTLSStrict, PerPort: map[uint32]MTLSMode{8080: MTLSDisable, 9090: MTLSStrict}}, wantNS: MTLSStrict},
		{name: "oldest workload policy wins", docs: []string{
			pa("demo", "a-new", t2, "{selector: {matchLabels: {app: echo}}, mtls: {mode: DISABLE}}"),
			pa("demo", "z-old", t1, "{selector: {matchLabels: {version: v1}}, mtls: {mode: STRICT}}")},
			ns: "demo", labels: echo, want: PeerPolicy{Mode: MTLSStrict}, wantNS: MTLSUnknown},
		{name: "same age: first by name", docs: []string{
			pa("demo", "b", "", "{selector: {matchLabels: {app: echo}}, mtls: {mode: DISABLE}}"),
			pa("demo", "a", "", "{selector: {matchLabels: {version: v1}}, mtls: {mode: STRICT}}")},
			ns: "demo", labels: echo, want: PeerPolicy{Mode: MTLSStrict}, wantNS: MTLSUnknown},
		{name: "oldest namespace policy wins", docs: []string{pa("demo", "a", t2, "{mtls: {mode: DISABLE}}"), pa("demo", "b", t1, "{mtls: {mode: STRICT}}")},
			ns: "demo", want: PeerPolicy{Mode: MTLSStrict}, wantNS: MTLSStrict},
		{name: "oldest mesh policy wins", docs: []string{pa("istio-system", "a", t2, "{mtls: {mode: DISABLE}}"), pa("istio-system", "b", t1, "{mtls: {mode: STRICT}}")},
			ns: "demo", want: PeerPolicy{Mode: MTLSStrict}, wantNS: MTLSStrict},
		{name: "selector in the root namespace applies to nobody", docs: []string{pa("istio-system", "sel", "", "{selector: {matchLabels: {app: echo}}, mtls: {mode: STRICT}}")},
			ns: "demo", labels: echo, want: PeerPolicy{Mode: MTLSPermissive}, wantNS: MTLSUnknown},
		{name: "a workload of the root namespace gets the mesh policy, not a selector's", docs: []string{pa("istio-system", "default", "", "{mtls: {mode: DISABLE}}"),
			pa("istio-system", "sel", "", "{selector: {matchLabels: {app: echo}}, mtls: {mode: STRICT}}")},
			ns: "istio-system", labels: echo, want: PeerPolicy{Mode: MTLSDisable}, wantNS: MTLSDisable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap, _ := paSnapshot(t, tt.docs...)
			got := snap.PeerAuthentication(tt.ns, tt.labels)
			if got.Mode != tt.want.Mode || !maps.Equal(got.PerPort, tt.want.PerPort) {
				t.Errorf("PeerAuthentication = %v %v, want %v %v", got.Mode, got.PerPort, tt.want.Mode, tt.want.PerPort)
			}
			if m := snap.NamespaceMTLSMode(tt.ns); m != tt.wantNS {
				t.Errorf("NamespaceMTLSMode = %v, want %v", m, tt.wantNS)
			}
			// An endpoints-only snapshot keeps the policies.
			if next, ok := snap.UpdateEndpoints(snap.Configs, nil, 2); !ok || next.PeerAuthentication(tt.ns, tt.labels).Mode != got.Mode {
				t.Errorf("UpdateEndpoints lost the policies")
			}
		})
	}
}

func TestPeerPolicyForPort(t *testing.T) {
	p := PeerPolicy{Mode: MTLSStrict, PerPort: map[uint32]MTLSMode{8080: MTLSDisable}}
	if p.ForPort(8080) != MTLSDisable || p.ForPort(9090) != MTLSStrict {
		t.Errorf("ForPort: %v %v", p.ForPort(8080), p.ForPort(9090))
	}
	for m, s := range map[MTLSMode]string{MTLSUnknown: "UNKNOWN", MTLSDisable: "DISABLE", MTLSPermissive: "PERMISSIVE", MTLSStrict: "STRICT"} {
		if m.String() != s {
			t.Errorf("%d.String() = %s", m, m.String())
		}
	}
}

// Policies that can never apply are reported.
func TestPeerAuthenticationProblems(t *testing.T) {
	_, problems := paSnapshot(t,
		pa("demo", "a", "", "{mtls: {mode: STRICT}}"),
		pa("demo", "b", "", "{mtls: {mode: DISABLE}}"),
		pa("istio-system", "sel", "", "{selector: {matchLabels: {app: echo}}}"))
	var got []string
	for _, p := range problems {
		got = append(got, p.Error())
	}
	joined := strings.Join(got, "\n")
	for _, want := range []string{
		"document 2: metadata.name: namespace demo already has the older namespace-wide PeerAuthentication a; this one is ignored",
		"document 3: spec.selector: a PeerAuthentication with a selector in the root namespace istio-system applies to no workload",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("problems %q, want one with %q", got, want)
		}
	}
}
