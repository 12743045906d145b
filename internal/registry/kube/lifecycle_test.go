package kube

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	networkingapi "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/straitmesh/strait/internal/kubeapiserver"
	"github.com/straitmesh/strait/internal/mesh"
	"github.com/straitmesh/strait/internal/proxypush"
	"github.com/straitmesh/strait/internal/registry/file"
	"github.com/straitmesh/strait/internal/xds/gen"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// TestCRDsInstalledLater: without the Istio CRDs the registry syncs and
// serves Services; installing the CRDs starts their informers without a
// restart, and a VirtualService then reaches RDS.
func TestCRDsInstalledLater(t *testing.T) {
	sharedEnv(t) // skips when the binaries cannot be had
	env := kubeapiserver.Start(t, kubeapiserver.Options{NoIstioCRDs: true})
	f := newFixture(t, env, "late")
	node := f.pod("client", "10.200.4.1", nil)
	f.service("web", corev1.ServicePort{Name: "http", Port: 80})
	f.service("web-v2", corev1.ServicePort{Name: "http", Port: 80})
	p := startPlane(t, env.Config, Options{})
	if kinds := p.reg.WatchedKinds(); len(kinds) != 0 {
		t.Errorf("watching %v without CRDs", kinds)
	}
	c := dialADS(t, p.addr, node)
	c.subscribe(t, xdsapi.ClusterType)
	c.subscribe(t, xdsapi.RouteType, "80")
	webCluster := gen.OutboundClusterName(80, "", f.host("web"))
	c.wait(t, "the Service's cluster", 10*time.Second, func() bool { return slices.Contains(c.clusters(), webCluster) })
	c.wait(t, "RDS", 10*time.Second, func() bool { return c.routeConfig("80") != nil })
	initial := c.routeConfig("80")

	if err := env.InstallIstioCRDs(f.ctx); err != nil {
		t.Fatal(err)
	}
	watchingAll := func() bool {
		for _, k := range ExpectedIstioKinds {
			if !slices.Contains(p.reg.WatchedKinds(), k) {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(30 * time.Second)
	for !watchingAll() {
		if time.Now().After(deadline) {
			t.Fatalf("informers not started after the CRDs were installed: watching %v, want %v", p.reg.WatchedKinds(), ExpectedIstioKinds)
		}
		time.Sleep(50 * time.Millisecond)
	}
	vs := &networkingv1.VirtualService{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: f.ns}}
	vs.Spec.Hosts = []string{"web"}
	vs.Spec.Http = []*networkingapi.HTTPRoute{{Route: []*networkingapi.HTTPRouteDestination{{Destination: &networkingapi.Destination{Host: "web-v2"}}}}}
	if _, err := f.istio.NetworkingV1().VirtualServices(f.ns).Create(f.ctx, vs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.wait(t, "RDS to change", 10*time.Second, func() bool { return !proto.Equal(c.routeConfig("80"), initial) })
}

// TestAPIServerOutage: with the API server stopped for 10 s the connected
// client keeps its config and its stream; after the restart a change that
// straitd missed while disconnected reaches the client, and nothing else
// is pushed.
func TestAPIServerOutage(t *testing.T) {
	sharedEnv(t)
	env := kubeapiserver.Start(t, kubeapiserver.Options{})
	f := newFixture(t, env, "outage")
	node := f.pod("client", "10.200.5.1", nil)
	f.service("web", corev1.ServicePort{Name: "http", Port: 80})
	f.endpoints("web", "http", 8080, []string{"10.1.5.1"}, nil)
	p := startPlane(t, env.Config, Options{})
	c := dialADS(t, p.addr, node)
	c.subscribe(t, xdsapi.ClusterType)
	c.subscribe(t, xdsapi.ListenerType)
	c.subscribe(t, xdsapi.RouteType, "80")
	name := gen.OutboundClusterName(80, "", f.host("web"))
	c.wait(t, "endpoints", 10*time.Second, func() bool {
		eps, _ := c.endpoints(name)
		return slices.Equal(eps, []string{"10.1.5.1:8080"})
	})
	c.wait(t, "RDS", 10*time.Second, func() bool { return c.routeConfig("80") != nil })
	before := c.counts()
	snap := p.reg.Snapshot()

	env.StopAPIServer()
	time.Sleep(10 * time.Second) // the outage itself
	if err := c.streamErr(); err != nil {
		t.Fatalf("stream ended during the API server outage: %v", err)
	}
	if got := c.counts(); !maps.Equal(got, before) {
		t.Errorf("pushes during the outage: before %v, after %v", before, got)
	}
	if d := mesh.DiffServices(snap, p.reg.Snapshot()); len(d.Hosts) > 0 {
		t.Errorf("services changed during the outage: %v", d.Hosts)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := env.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	// straitd's watches are still backing off: this change happens while it
	// is disconnected and must arrive once it has resynced.
	f.endpoints("web", "http", 8080, []string{"10.1.5.1", "10.1.5.2"}, nil)
	c.wait(t, "the change made while disconnected", time.Minute, func() bool {
		eps, _ := c.endpoints(name)
		return slices.Equal(eps, []string{"10.1.5.1:8080", "10.1.5.2:8080"})
	})
	time.Sleep(500 * time.Millisecond)
	after := c.counts()
	for _, typ := range []string{xdsapi.ClusterType, xdsapi.ListenerType, xdsapi.RouteType} {
		if after[typ] != before[typ] {
			t.Errorf("%s pushed %d times after the resync; only the endpoint change should be", typ, after[typ]-before[typ])
		}
	}
}

// TestWithFileRegistry: file-registry ServiceEntries and Kubernetes
// Services are served together, and a file change reaches onChange.
func TestWithFileRegistry(t *testing.T) {
	env := sharedEnv(t)
	f := newFixture(t, env, "mixed")
	f.service("web", corev1.ServicePort{Name: "http", Port: 80})
	dir := t.TempDir()
	writeSE := func(host string) {
		t.Helper()
		yaml := "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata:\n  name: ext\n  namespace: mixed\nspec:\n  hosts: [" + host + "]\n  ports: [{number: 443, name: tls, protocol: TLS}]\n  resolution: STATIC\n  endpoints: [{address: 192.0.2.1}]\n"
		if err := os.WriteFile(filepath.Join(dir, "se.yaml"), []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeSE("api.example.com")
	fileReg, err := file.New(file.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	p := startPlane(t, env.Config, Options{Static: fileReg})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = fileReg.Run(ctx, p.reg.StaticChanged)
	}()
	t.Cleanup(func() { cancel(); <-done })

	has := func(host string) bool { return p.reg.Snapshot().Service(host) != nil }
	if !has(f.host("web")) || !has("api.example.com") {
		t.Fatalf("snapshot services %v, want both web and api.example.com", hostsOf(p))
	}
	writeSE("api2.example.com")
	deadline := time.Now().Add(10 * time.Second)
	for !has("api2.example.com") {
		if time.Now().After(deadline) {
			t.Fatalf("file change not served; services %v", hostsOf(p))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !has(f.host("web")) {
		t.Errorf("Kubernetes Service lost after a file change")
	}
	var sawFile bool
	for _, req := range p.pushRequests() {
		if _, ok := req.ConfigsUpdated[proxypush.ConfigKey{Kind: "ServiceEntry", Name: "ext", Namespace: "mixed"}]; ok && req.Full {
			sawFile = true
		}
	}
	if !sawFile {
		t.Errorf("no full push for the file change: %+v", p.pushRequests())
	}
}

func hostsOf(p *plane) []string {
	var out []string
	for _, s := range p.reg.Snapshot().Services {
		out = append(out, s.Hostname)
	}
	return out
}
