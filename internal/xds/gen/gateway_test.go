package gen_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/straitmesh/strait/internal/mesh"
	"github.com/straitmesh/strait/internal/proxypush"
	"github.com/straitmesh/strait/internal/xds/gen"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// TestGatewayConflicts: Gateway ingress/late claims port 80 with TCP
// after ingress/gw holds it with HTTP. mesh.Build reports it naming both
// Gateways and the dropped server's field; the router keeps gw's HTTP
// chain on 0.0.0.0_80 and late's other server (8443).
func TestGatewayConflicts(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "gateway", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.Replace(string(b), "  servers:\n  - port: {number: 8443",
		"  servers:\n  - port: {number: 80, name: tcp, protocol: TCP}\n    hosts: [\"*\"]\n  - port: {number: 8443", 1)
	if doc == string(b) {
		t.Fatal("testdata/gateway/mesh.yaml changed: Gateway late's servers not found")
	}
	snap, problems := mesh.Build(storeOf(t, doc), mesh.BuildOptions{})
	const want = "spec.servers[0].port: port 80: TCP of Gateway ingress/late conflicts with HTTP of Gateway ingress/gw, which holds the port; the server of ingress/late is left out"
	if len(problems) != 1 || !strings.HasSuffix(problems[0].Error(), want) {
		t.Fatalf("problems %v\nwant one ending %q", problems, want)
	}
	g := gen.New(gen.SourceFunc(func() *mesh.Snapshot { return snap }))
	router, err := proxypush.ParseNodeID("router~10.92.0.10~ingressgateway.ingress~ingress.svc.cluster.local")
	if err != nil {
		t.Fatal(err)
	}
	if c := g.GatewayConflicts(router); len(c) != 1 || c[0].Dropped.Name() != "ingress/late" || c[0].Kept.Name() != "ingress/gw" {
		t.Errorf("conflicts %v", c)
	}
	res, err := g.Generate(router, xdsapi.ListenerType, nil, &proxypush.PushRequest{Full: true})
	if err != nil {
		t.Fatal(err)
	}
	got := string(render(t, res))
	for _, s := range []string{`"name": "0.0.0.0_80"`, `"routeConfigName": "http.80"`, `"name": "0.0.0.0_8443"`} {
		if !strings.Contains(got, s) {
			t.Errorf("listeners lack %s", s)
		}
	}
	sidecar, err := proxypush.ParseNodeID("sidecar~10.92.0.11~client.demo~demo.svc.cluster.local")
	if err != nil {
		t.Fatal(err)
	}
	if c := g.GatewayConflicts(sidecar); c != nil {
		t.Errorf("a sidecar has gateway conflicts %v", c)
	}
}

// credentialsFunc adapts a func to mesh.Credentials.
type credentialsFunc func(ns, name string, mutual bool) error

func (f credentialsFunc) Check(ns, name string, mutual bool) error { return f(ns, name, mutual) }

// TestGatewayMissingCredential: server https-api's credential api-cert
// (MUTUAL, looked up in the router's namespace ingress) cannot be served:
// mesh.Build reports the server's credentialName, and the router's
// 0.0.0.0_443 keeps the other servers' chains but none for
// api.example.com. With the credential there, the chain is back.
func TestGatewayMissingCredential(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "gateway", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	router, err := proxypush.ParseNodeID("router~10.92.0.10~ingressgateway.ingress~ingress.svc.cluster.local")
	if err != nil {
		t.Fatal(err)
	}
	var asked []string
	missing := credentialsFunc(func(ns, name string, mutual bool) error {
		asked = append(asked, fmt.Sprintf("%s/%s mutual=%t", ns, name, mutual))
		return errors.New("no certificate: open tls.crt: no such file or directory")
	})
	present := credentialsFunc(func(string, string, bool) error { return nil })
	for _, tc := range []struct {
		name      string
		creds     mesh.Credentials
		wantChain bool
	}{
		{"missing", missing, false},
		{"present", present, true},
		{"unchecked", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			asked = nil
			snap, problems := mesh.Build(storeOf(t, string(b)), mesh.BuildOptions{Credentials: tc.creds})
			g := gen.New(gen.SourceFunc(func() *mesh.Snapshot { return snap }))
			res, err := g.Generate(router, xdsapi.ListenerType, nil, &proxypush.PushRequest{Full: true})
			if err != nil {
				t.Fatal(err)
			}
			got := string(render(t, res))
			if has := strings.Contains(got, `"api.example.com"`); has != tc.wantChain {
				t.Errorf("a chain for api.example.com: %t, want %t", has, tc.wantChain)
			}
			for _, s := range []string{`"www.example.com"`, `"mtls.example.com"`, `"secure.example.com"`} {
				if !strings.Contains(got, s) {
					t.Errorf("the other servers' chain %s is gone", s)
				}
			}
			if tc.wantChain {
				if len(problems) != 0 {
					t.Errorf("problems %v", problems)
				}
				return
			}
			const want = "spec.servers[4].tls.credentialName: credential ingress/api-cert of Gateway ingress/gw cannot be served: no certificate"
			if len(problems) != 1 || !strings.Contains(problems[0].Error(), want) {
				t.Errorf("problems %v\nwant one with %q", problems, want)
			}
			if len(asked) != 1 || asked[0] != "ingress/api-cert mutual=true" {
				t.Errorf("checked %v, want ingress/api-cert mutual=true once", asked)
			}
		})
	}
}

// TestEgressGatewayIstioMutual: examples/egress's egress gateway serves
// its ISTIO_MUTUAL server with its workload certificate ("default"),
// requires a client certificate that the mesh's root ("ROOTCA") signed,
// and matches the sidecars' SNI, api.external.test; its route sends
// api.external.test to the external host's port 443, which the
// DestinationRule's SIMPLE tls originates TLS to.
func TestEgressGatewayIstioMutual(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "examples", "egress", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	snap, problems := mesh.Build(storeOf(t, string(b)), mesh.BuildOptions{})
	if len(problems) != 0 {
		t.Fatalf("problems %v", problems)
	}
	g := gen.New(gen.SourceFunc(func() *mesh.Snapshot { return snap }))
	router, err := proxypush.ParseNodeID("router~10.97.0.30~egressgateway.istio-system~istio-system.svc.cluster.local")
	if err != nil {
		t.Fatal(err)
	}
	generate := func(typeURL string) string {
		res, err := g.Generate(router, typeURL, nil, &proxypush.PushRequest{Full: true})
		if err != nil {
			t.Fatal(err)
		}
		return string(render(t, res))
	}
	listeners := generate(xdsapi.ListenerType)
	for _, s := range []string{`"name": "0.0.0.0_80"`, `"api.external.test"`, `"name": "default"`, `"name": "ROOTCA"`, `"requireClientCertificate": true`,
		`"routeConfigName": "https.80.https-port-for-tls-origination.istio-egressgateway.istio-system"`} {
		if !strings.Contains(listeners, s) {
			t.Errorf("listeners lack %s", s)
		}
	}
	if routes := generate(xdsapi.RouteType); !strings.Contains(routes, `"cluster": "outbound|443||api.external.test"`) {
		t.Errorf("routes do not send api.external.test to its port 443:\n%s", routes)
	}
	if clusters := generate(xdsapi.ClusterType); !strings.Contains(clusters, `"sni": "api.external.test"`) {
		t.Error("clusters: no TLS origination to api.external.test")
	}
}

// adsCredentials are credentials the control plane serves (Kubernetes
// mode), all present.
type adsCredentials struct{}

func (adsCredentials) Check(string, string, bool) error { return nil }
func (adsCredentials) ServedOverADS()                   {}

// TestGatewayCredentialOverADS: when the registry serves the
// credentials (Kubernetes Secrets), server https-api's credentialName
// api-cert is Istio's ADS-sourced SDS (ConstructSdsSecretConfigForCredential):
// kubernetes://api-cert and, MUTUAL, kubernetes://api-cert-cacert, each
// with sds_config {ads: {}}; the servers with certificate files keep the
// agent's SDS cluster (file-cert:, file-root:). In file mode the
// credential stays on the agent's SDS cluster.
func TestGatewayCredentialOverADS(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "gateway", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	router, err := proxypush.ParseNodeID("router~10.92.0.10~ingressgateway.ingress~ingress.svc.cluster.local")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		creds   mesh.Credentials
		wantADS bool
	}{
		{"kube", adsCredentials{}, true},
		{"file", credentialsFunc(func(string, string, bool) error { return nil }), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap, problems := mesh.Build(storeOf(t, string(b)), mesh.BuildOptions{Credentials: tc.creds})
			if len(problems) != 0 {
				t.Fatalf("problems %v", problems)
			}
			g := gen.New(gen.SourceFunc(func() *mesh.Snapshot { return snap }))
			res, err := g.Generate(router, xdsapi.ListenerType, nil, &proxypush.PushRequest{Full: true})
			if err != nil {
				t.Fatal(err)
			}
			l := findListener(t, res, "0.0.0.0_443")
			var found int
			for _, fc := range l.GetFilterChains() {
				if !slices.Contains(fc.GetFilterChainMatch().GetServerNames(), "api.example.com") {
					continue
				}
				found++
				var ctx tlsv3.DownstreamTlsContext
				if err := fc.GetTransportSocket().GetTypedConfig().UnmarshalTo(&ctx); err != nil {
					t.Fatal(err)
				}
				cert := ctx.GetCommonTlsContext().GetTlsCertificateSdsSecretConfigs()
				ca := ctx.GetCommonTlsContext().GetCombinedValidationContext().GetValidationContextSdsSecretConfig()
				if len(cert) != 1 || cert[0].GetName() != "kubernetes://api-cert" || ca.GetName() != "kubernetes://api-cert-cacert" {
					t.Fatalf("secrets %v and %v, want kubernetes://api-cert and kubernetes://api-cert-cacert", cert, ca)
				}
				for _, s := range []*tlsv3.SdsSecretConfig{cert[0], ca} {
					if got := s.GetSdsConfig().GetAds() != nil; got != tc.wantADS {
						t.Errorf("%s: sds_config %v, want ads %t", s.GetName(), s.GetSdsConfig(), tc.wantADS)
					}
					if tc.wantADS && (s.GetSdsConfig().GetInitialFetchTimeout() != nil || s.GetSdsConfig().GetResourceApiVersion() != core.ApiVersion_V3) {
						t.Errorf("%s: sds_config %v, want Istio's SDSAdsConfig", s.GetName(), s.GetSdsConfig())
					}
				}
				if !ctx.GetRequireClientCertificate().GetValue() {
					t.Error("MUTUAL server does not require a client certificate")
				}
			}
			if found != 1 {
				t.Fatalf("%d chains for api.example.com, want 1", found)
			}
			for _, fc := range l.GetFilterChains() {
				if slices.Contains(fc.GetFilterChainMatch().GetServerNames(), "mtls.example.com") {
					var ctx tlsv3.DownstreamTlsContext
					if err := fc.GetTransportSocket().GetTypedConfig().UnmarshalTo(&ctx); err != nil {
						t.Fatal(err)
					}
					if s := ctx.GetCommonTlsContext().GetTlsCertificateSdsSecretConfigs()[0]; s.GetSdsConfig().GetAds() != nil {
						t.Errorf("certificate files %s come over ADS", s.GetName())
					}
				}
			}
		})
	}
}

// findListener returns the listener name of res or fails the test.
func findListener(t *testing.T, res []*discovery.Resource, name string) *listener.Listener {
	t.Helper()
	for _, r := range res {
		if r.GetName() != name {
			continue
		}
		var l listener.Listener
		if err := r.GetResource().UnmarshalTo(&l); err != nil {
			t.Fatal(err)
		}
		return &l
	}
	t.Fatalf("no listener %s", name)
	return nil
}

// TestRouterHeadlessServiceEDS: a service of resolution NONE (what a
// Kubernetes headless Service becomes) is an ORIGINAL_DST cluster for a
// sidecar, whose application dialled the endpoint's own address; a
// gateway's downstream connection was dialled to the gateway itself, so
// there the same cluster would send the request back into the gateway,
// again and again. A router gets an EDS cluster for it instead, with the
// service's endpoints, as Istio's convertResolution gives a Router.
func TestRouterHeadlessServiceEDS(t *testing.T) {
	const doc = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: db, namespace: demo}
spec:
  hosts: [db.demo.svc.cluster.local]
  ports: [{number: 80, name: http}]
  location: MESH_INTERNAL
  resolution: NONE
  workloadSelector: {labels: {app: db}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: db-a, namespace: demo}
spec: {address: 10.92.1.5, labels: {app: db, version: v1}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: db-b, namespace: demo}
spec: {address: 10.92.1.6, labels: {app: db, version: v2}}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: db, namespace: demo}
spec:
  host: db.demo.svc.cluster.local
  subsets: [{name: v1, labels: {version: v1}}]
`
	snap, problems := mesh.Build(storeOf(t, doc), mesh.BuildOptions{})
	if len(problems) != 0 {
		t.Fatalf("problems %v", problems)
	}
	g := gen.New(gen.SourceFunc(func() *mesh.Snapshot { return snap }))
	const name = "outbound|80||db.demo.svc.cluster.local"
	clusterOf := func(node, name string) *cluster.Cluster {
		t.Helper()
		p, err := proxypush.ParseNodeID(node)
		if err != nil {
			t.Fatal(err)
		}
		res, err := g.Generate(p, xdsapi.ClusterType, nil, &proxypush.PushRequest{Full: true})
		if err != nil {
			t.Fatal(err)
		}
		var found *cluster.Cluster
		for _, r := range res {
			if r.Name == name {
				if found != nil {
					t.Fatalf("%s: cluster %s twice", node, name)
				}
				found = &cluster.Cluster{}
				if err := r.Resource.UnmarshalTo(found); err != nil {
					t.Fatal(err)
				}
			}
		}
		if found == nil {
			t.Fatalf("%s: no cluster %s", node, name)
		}
		return found
	}
	const (
		sidecar = "sidecar~10.92.0.11~client.demo~demo.svc.cluster.local"
		router  = "router~10.92.0.10~ingressgateway.demo~demo.svc.cluster.local"
	)
	if c := clusterOf(sidecar, name); c.GetType() != cluster.Cluster_ORIGINAL_DST {
		t.Errorf("sidecar's %s is %v, want ORIGINAL_DST", name, c.GetType())
	}
	for _, n := range []string{name, "outbound|80|v1|db.demo.svc.cluster.local"} {
		if c := clusterOf(router, n); c.GetType() != cluster.Cluster_EDS || c.GetEdsClusterConfig() == nil || c.GetLbPolicy() == cluster.Cluster_CLUSTER_PROVIDED {
			t.Errorf("router's %s is %v (eds config %v, lb %v), want an EDS cluster", n, c.GetType(), c.GetEdsClusterConfig(), c.GetLbPolicy())
		}
	}
	p, _ := proxypush.ParseNodeID(router)
	res, err := g.Generate(p, xdsapi.EndpointType, []string{name}, &proxypush.PushRequest{Full: true})
	if err != nil {
		t.Fatal(err)
	}
	got := string(render(t, res))
	if len(res) != 1 || !strings.Contains(got, "10.92.1.5") || !strings.Contains(got, "10.92.1.6") {
		t.Errorf("router's load assignment of %s lacks the service's endpoints:\n%s", name, got)
	}
	// The sidecar's cluster is not changed by the router's (a shared cache).
	if c := clusterOf(sidecar, name); c.GetType() != cluster.Cluster_ORIGINAL_DST {
		t.Errorf("after the router's build, the sidecar's %s is %v", name, c.GetType())
	}
}
