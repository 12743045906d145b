package mesh

import (
	"slices"
	"strings"
	"testing"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/straitmesh/strait/internal/istioconfig"
	"github.com/straitmesh/strait/internal/meshconfig"
	"github.com/straitmesh/strait/internal/proxypush"
)

func buildYAML(t *testing.T, yaml string, opts BuildOptions) (*Snapshot, []error) {
	t.Helper()
	// The model's merge rules are under test here, also for the fields
	// whose honouring is not the model's business (traffic policies).
	res := istioconfig.ParseFileWith("test.yaml", []byte(yaml), istioconfig.ParseOptions{KeepRefused: true})
	if res.Err != nil {
		t.Fatalf("parse: %v", res.Err)
	}
	store := istioconfig.NewStore()
	for _, c := range res.Configs {
		if err := store.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	return Build(store, opts)
}

const drMesh = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: web, namespace: app}
spec:
  hosts: [web.app.svc.cluster.local]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.1, labels: {version: v1}}, {address: 10.0.0.2, labels: {version: v2}}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: a-first, namespace: app}
spec:
  host: web
  trafficPolicy: {loadBalancer: {simple: RANDOM}}
  subsets: [{name: v1, labels: {version: v1}}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: b-second, namespace: app}
spec:
  host: web.app.svc.cluster.local
  trafficPolicy: {loadBalancer: {simple: LEAST_REQUEST}}
  subsets: [{name: v2, labels: {version: v2}}, {name: v1, labels: {version: v2}}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: private, namespace: client}
spec:
  host: web.app.svc.cluster.local
  exportTo: ["."]
  subsets: [{name: mine, labels: {version: v2}}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: elsewhere, namespace: other}
spec:
  host: web.app.svc.cluster.local
  subsets: [{name: other, labels: {version: v1}}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: selected, namespace: app}
spec:
  host: web.app.svc.cluster.local
  workloadSelector: {matchLabels: {app: x}}
  subsets: [{name: selected, labels: {version: v1}}]
`

func subsetNames(s *Snapshot, ns string) []string {
	var out []string
	for _, ss := range s.SubsetsFor(ns, "web.app.svc.cluster.local") {
		out = append(out, ss.Name+"="+ss.Labels["version"])
	}
	return out
}

// TestDestinationRulesMerged: two rules of one namespace for one host
// merge as Istio's mergeDestinationRule does (subsets appended unless the
// name is taken, the first traffic policy kept); a rule with a
// workloadSelector is not merged in, and is reported.
func TestDestinationRulesMerged(t *testing.T) {
	s, problems := buildYAML(t, drMesh, BuildOptions{})
	if got, want := subsetNames(s, "app"), []string{"v1=v1", "v2=v2"}; !slices.Equal(got, want) {
		t.Errorf("subsets for app = %v, want %v", got, want)
	}
	dr := s.DestinationRuleFor("app", "web.app.svc.cluster.local")
	if got := dr.DestinationRule().GetTrafficPolicy().GetLoadBalancer().GetSimple().String(); got != "RANDOM" {
		t.Errorf("merged traffic policy = %s, want the first rule's RANDOM", got)
	}
	if dr.Name != "a-first" {
		t.Errorf("merged rule named %s, want the first rule's name", dr.Name)
	}
	if again := s.DestinationRuleFor("app", "web.app.svc.cluster.local"); again != dr {
		t.Error("the same merge gave another pointer (caches key on it)")
	}
	if len(problems) != 1 || !strings.Contains(problems[0].Error(), "spec.workloadSelector") {
		t.Errorf("problems = %v, want one for the workloadSelector rule", problems)
	}
	// The global view (no proxy namespace) merges too.
	if got := len(s.Subsets("web.app.svc.cluster.local")); got != 2 {
		t.Errorf("Subsets = %d, want 2", got)
	}
}

// TestDestinationRuleLookupOrder: the proxy's own namespace first (its
// private rule), else the service's namespace; a rule in an unrelated
// namespace never applies.
func TestDestinationRuleLookupOrder(t *testing.T) {
	s, _ := buildYAML(t, drMesh, BuildOptions{})
	if got := subsetNames(s, "client"); !slices.Equal(got, []string{"mine=v2"}) {
		t.Errorf("client sees %v, want its own private rule", got)
	}
	if got := subsetNames(s, "third"); !slices.Equal(got, []string{"v1=v1", "v2=v2"}) {
		t.Errorf("third sees %v, want the service namespace's rules", got)
	}
	if got := subsetNames(s, "other"); !slices.Equal(got, []string{"other=v1"}) {
		t.Errorf("other sees %v, want its own rule", got)
	}
}

// TestDestinationRuleExportToDefault: the mesh's
// defaultDestinationRuleExportTo "." hides rules without exportTo from
// other namespaces.
func TestDestinationRuleExportToDefault(t *testing.T) {
	m := meshconfig.Default()
	m.DefaultDestinationRuleExportTo = []string{"."}
	s, _ := buildYAML(t, drMesh, BuildOptions{Mesh: m})
	if got := subsetNames(s, "third"); got != nil {
		t.Errorf("third sees %v; rules exported to . only must be hidden", got)
	}
	if got := subsetNames(s, "app"); len(got) != 2 {
		t.Errorf("app sees %v, want its own rules", got)
	}
}

const exportMesh = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: web, namespace: app}
spec:
  hosts: [web.app.svc.cluster.local]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.1}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: private, namespace: app}
spec:
  hosts: [web.app.svc.cluster.local]
  exportTo: ["."]
  http: [{route: [{destination: {host: web.app.svc.cluster.local}}]}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: plain, namespace: app}
spec:
  hosts: [web.app.svc.cluster.local]
  http: [{route: [{destination: {host: web.app.svc.cluster.local}}]}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: to-client, namespace: app}
spec:
  hosts: [web.app.svc.cluster.local]
  exportTo: [client]
  http: [{route: [{destination: {host: web.app.svc.cluster.local}}]}]
`

func vsNames(cs []*istioconfig.Config) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

func TestVirtualServiceExportTo(t *testing.T) {
	s, _ := buildYAML(t, exportMesh, BuildOptions{})
	for ns, want := range map[string][]string{
		"app":    {"plain", "private"},
		"client": {"plain", "to-client"},
		"other":  {"plain"},
	} {
		if got := vsNames(s.VirtualServicesFor(ns, "web.app.svc.cluster.local")); !slices.Equal(got, want) {
			t.Errorf("%s sees %v, want %v", ns, got, want)
		}
	}
	m := meshconfig.Default()
	m.DefaultVirtualServiceExportTo = []string{"."}
	s, _ = buildYAML(t, exportMesh, BuildOptions{Mesh: m})
	if got := vsNames(s.VirtualServicesFor("other", "web.app.svc.cluster.local")); got != nil {
		t.Errorf("with defaultVirtualServiceExportTo [.], other sees %v", got)
	}
}

func TestServiceExportToDefault(t *testing.T) {
	m := meshconfig.Default()
	m.DefaultServiceExportTo = []string{"."}
	s, _ := buildYAML(t, exportMesh, BuildOptions{Mesh: m})
	if svc := s.Service("web.app.svc.cluster.local"); svc.VisibleTo("other") || !svc.VisibleTo("app") {
		t.Errorf("exportTo %v: visible to other %v, to app %v", svc.ExportTo, svc.VisibleTo("other"), svc.VisibleTo("app"))
	}
}

const policySidecars = `apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: locked}
spec:
  outboundTrafficPolicy: {mode: REGISTRY_ONLY}
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: open}
spec:
  outboundTrafficPolicy: {mode: ALLOW_ANY}
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: plain}
spec:
  egress: [{hosts: ["*/*"]}]
`

// TestOutboundTrafficPolicy: a Sidecar's policy wins; without one the
// mesh config's applies (ALLOW_ANY by default).
func TestOutboundTrafficPolicy(t *testing.T) {
	for _, tc := range []struct {
		meshRegistryOnly bool
		ns               string
		want             bool
	}{
		{false, "locked", true},
		{false, "open", false},
		{false, "plain", false},
		{false, "none", false},
		{true, "locked", true},
		{true, "open", false},
		{true, "plain", true},
		{true, "none", true},
	} {
		m := meshconfig.Default()
		m.RegistryOnly = tc.meshRegistryOnly
		s, _ := buildYAML(t, policySidecars, BuildOptions{Mesh: m})
		if got := s.ProxyScope(&proxypush.Proxy{Namespace: tc.ns}).RegistryOnly; got != tc.want {
			t.Errorf("mesh REGISTRY_ONLY %v, namespace %s: RegistryOnly = %v, want %v", tc.meshRegistryOnly, tc.ns, got, tc.want)
		}
	}
}

// TestMeshRootNamespaceWins: the mesh config's rootNamespace replaces the
// option (straitd's --namespace).
func TestMeshRootNamespaceWins(t *testing.T) {
	m := meshconfig.Default()
	m.RootNamespace = "mesh-root"
	s, _ := buildYAML(t, policySidecars, BuildOptions{RootNamespace: "istio-system", Mesh: m})
	if s.RootNamespace != "mesh-root" {
		t.Errorf("RootNamespace = %s, want the mesh config's", s.RootNamespace)
	}
	s, _ = buildYAML(t, policySidecars, BuildOptions{RootNamespace: "cp"})
	if s.RootNamespace != "cp" {
		t.Errorf("RootNamespace = %s, want the option without a mesh rootNamespace", s.RootNamespace)
	}
}

// TestDestinationRuleWithoutProxyNamespace: DestinationRule(host) takes
// the first namespace that has rules for that very host.
func TestDestinationRuleWithoutProxyNamespace(t *testing.T) {
	s, _ := buildYAML(t, `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: other-host, namespace: aaa}
spec:
  host: other.example.com
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: mine, namespace: zzz}
spec:
  host: web.example.com
  subsets: [{name: v1, labels: {version: v1}}]
`, BuildOptions{})
	if dr := s.DestinationRule("web.example.com"); dr == nil || dr.Name != "mine" {
		t.Fatalf("DestinationRule = %v, want zzz/mine", dr)
	}
	if s.DestinationRule("none.example.com") != nil || s.Subsets("none.example.com") != nil || s.SubsetsFor("x", "none.example.com") != nil {
		t.Error("a host without rules has a rule")
	}
	if _, ok := s.SubsetLabelsFor("zzz", "web.example.com", "v2"); ok {
		t.Error("unknown subset found")
	}
	if l, ok := s.SubsetLabelsFor("zzz", "web.example.com", "v1"); !ok || l["version"] != "v1" {
		t.Errorf("SubsetLabelsFor v1 = %v, %v", l, ok)
	}
}

// TestMergedExportTo: the merged rule's exportTo is the first rule's, else
// the next that has one.
func TestMergedExportTo(t *testing.T) {
	x := newDRIndex("istio-system", nil)
	dr := func(name string, exportTo ...string) *istioconfig.Config {
		return &istioconfig.Config{Meta: istioconfig.Meta{Kind: istioconfig.KindDestinationRule, Name: name, Namespace: "ns"},
			Spec: &networking.DestinationRule{Host: "h", ExportTo: exportTo}}
	}
	if got := x.merge([]*istioconfig.Config{dr("a"), dr("b", "."), dr("c", "*")}).DestinationRule().GetExportTo(); !slices.Equal(got, []string{"."}) {
		t.Errorf("exportTo = %v, want the first one set", got)
	}
	if got := x.merge([]*istioconfig.Config{dr("a", "x"), dr("b", ".")}).DestinationRule().GetExportTo(); !slices.Equal(got, []string{"x"}) {
		t.Errorf("exportTo = %v, want the first rule's", got)
	}
}

// TestRootNamespaceRuleForHostWithoutService: a rule of the root namespace
// applies even to a host no service defines.
func TestRootNamespaceRuleForHostWithoutService(t *testing.T) {
	s, _ := buildYAML(t, `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: global, namespace: istio-system}
spec:
  host: nowhere.example.com
  subsets: [{name: v1, labels: {version: v1}}]
`, BuildOptions{})
	if dr := s.DestinationRuleFor("app", "nowhere.example.com"); dr == nil || dr.Name != "global" {
		t.Errorf("DestinationRuleFor = %v, want the root namespace's rule", dr)
	}
}

const dnsEntries = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: strict, namespace: ext}
spec:
  hosts: [strict.example.com]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: DNS
  endpoints: [{address: a.example.com}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: logical, namespace: ext}
spec:
  hosts: [logical.example.com]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: DNS_ROUND_ROBIN
  endpoints: [{address: a.example.com}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: static, namespace: ext}
spec:
  hosts: [static.example.com]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.1}]
`

// TestDNSEndpointChangeIsNotEDSOnly: the endpoints of a DNS or
// DNS_ROUND_ROBIN service live in its cluster, so their change needs CDS.
func TestDNSEndpointChangeIsNotEDSOnly(t *testing.T) {
	before, _ := buildYAML(t, dnsEntries, BuildOptions{})
	for _, tc := range []struct {
		from, to string
		edsOnly  bool
	}{
		{"address: a.example.com}]\n---\napiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: logical", "address: b.example.com}]\n---\napiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: logical", false},
		{"resolution: DNS_ROUND_ROBIN\n  endpoints: [{address: a.example.com}]", "resolution: DNS_ROUND_ROBIN\n  endpoints: [{address: b.example.com}]", false},
		{"address: 10.0.0.1", "address: 10.0.0.2", true},
	} {
		changed := strings.Replace(dnsEntries, tc.from, tc.to, 1)
		if changed == dnsEntries {
			t.Fatalf("%q not in the config", tc.from)
		}
		after, _ := buildYAML(t, changed, BuildOptions{Previous: before})
		if ch := DiffServices(before, after); ch.EndpointsOnly != tc.edsOnly || len(ch.Hosts) != 1 {
			t.Errorf("%s: EndpointsOnly %v (hosts %v), want %v", tc.to, ch.EndpointsOnly, ch.Hosts, tc.edsOnly)
		}
	}
}

// TestNewMeshConfigRebuildsServices: a service of an unchanged entry is
// rebuilt when the mesh config changes (its default exportTo may differ).
func TestNewMeshConfigRebuildsServices(t *testing.T) {
	before, _ := buildYAML(t, dnsEntries, BuildOptions{})
	m := meshconfig.Default()
	m.DefaultServiceExportTo = []string{"."}
	store := before.Configs
	after, _ := Build(store, BuildOptions{Previous: before, Mesh: m})
	if svc := after.Service("static.example.com"); svc.VisibleTo("other") {
		t.Errorf("exportTo %v: the service kept the previous mesh config's default", svc.ExportTo)
	}
	again, _ := Build(store, BuildOptions{Previous: after})
	if again.Mesh != m || again.Service("static.example.com") != after.Service("static.example.com") {
		t.Error("without a new mesh config, the previous one and the services are kept")
	}
}

// TestSidecarWithoutEgressReachesEverything: as Istio's default egress
// listener "*/*"; a Sidecar with egress hosts still narrows.
func TestSidecarWithoutEgressReachesEverything(t *testing.T) {
	s, _ := buildYAML(t, dnsEntries+`---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: open}
spec:
  outboundTrafficPolicy: {mode: REGISTRY_ONLY}
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: own}
spec:
  egress: [{hosts: ["./*"]}]
`, BuildOptions{})
	if n := len(s.ProxyScope(&proxypush.Proxy{Namespace: "open"}).Services); n != 3 {
		t.Errorf("a Sidecar without egress reaches %d services, want all 3", n)
	}
	if n := len(s.ProxyScope(&proxypush.Proxy{Namespace: "own"}).Services); n != 0 {
		t.Errorf("a Sidecar with egress ./* reaches %d services of another namespace", n)
	}
}
