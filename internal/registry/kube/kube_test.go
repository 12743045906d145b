package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	networkingapi "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	istioclient "istio.io/client-go/pkg/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/straitmesh/strait/internal/kubeapiserver"
	"github.com/straitmesh/strait/internal/proxypush"
	"github.com/straitmesh/strait/internal/testreq"
	"github.com/straitmesh/strait/internal/xds"
	"github.com/straitmesh/strait/internal/xds/gen"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// convergence is the target from an API write to the proxy. The tests
// log how long it took against it but do not fail on it: under -race on a
// loaded machine a second is not a promise, and the waits' own deadlines
// bound the behaviour.
const convergence = time.Second

// shared is one API server (with the Istio CRDs) for the tests that do not
// stop it or need it without CRDs; each such test uses its own namespace.
var shared struct {
	once sync.Once
	env  *kubeapiserver.Env
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.env != nil {
		_ = shared.env.Stop()
	}
	os.Exit(code)
}

func sharedEnv(t *testing.T) *kubeapiserver.Env {
	t.Helper()
	testreq.Privileged(t, "a real kube-apiserver and etcd")
	shared.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
		defer cancel()
		if _, shared.err = kubeapiserver.Binaries(ctx, os.Stderr); shared.err != nil {
			return
		}
		ctx2, cancel2 := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel2()
		shared.env, shared.err = kubeapiserver.StartContext(ctx2, kubeapiserver.Options{})
	})
	if shared.err != nil {
		if errors.Is(shared.err, kubeapiserver.ErrUnavailable) {
			if v := os.Getenv(kubeapiserver.EnvRequired); v != "1" && v != "true" {
				testreq.Missing(t, "no Kubernetes API server for tests: %v", shared.err)
			}
		}
		t.Fatalf("testenv/kube: %v", shared.err)
	}
	return shared.env
}

// plane is a straitd as cmd/straitd wires it in Kubernetes mode: the kube
// registry feeding the generators and the xDS server's ConfigUpdate.
type plane struct {
	reg  *Registry
	xds  *xds.Server
	addr string

	mu       sync.Mutex
	requests []*proxypush.PushRequest // every request the registry sent
}

func startPlane(t *testing.T, cfg *rest.Config, opts Options) *plane {
	t.Helper()
	opts.Config = cfg
	opts.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
	reg, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	generator := gen.New(reg)
	srv, err := xds.New(xds.Options{Generator: generator, PushFilter: generator, EndpointsNarrower: generator, ResolveProxy: reg.ResolveProxy, Logger: opts.Logger})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &plane{reg: reg, xds: srv, addr: lis.Addr().String()}
	gs := grpc.NewServer()
	srv.Register(gs)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = gs.Serve(lis) })
	wg.Go(func() { _ = srv.Run(ctx) })
	wg.Go(func() {
		if err := reg.Run(ctx, func(req *proxypush.PushRequest) {
			p.mu.Lock()
			p.requests = append(p.requests, req)
			p.mu.Unlock()
			srv.ConfigUpdate(req)
		}); err != nil {
			t.Errorf("registry: %v", err)
		}
	})
	t.Cleanup(func() {
		cancel()
		gs.Stop()
		wg.Wait()
	})
	syncCtx, cancelSync := context.WithTimeout(ctx, time.Minute)
	defer cancelSync()
	if err := reg.WaitForSync(syncCtx); err != nil {
		t.Fatal(err)
	}
	return p
}

func (p *plane) pushRequests() []*proxypush.PushRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.requests)
}

// fixture creates objects in one namespace.
type fixture struct {
	t      *testing.T
	ctx    context.Context
	kube   kubernetes.Interface
	istio  istioclient.Interface
	ns     string
	domain string
}

func newFixture(t *testing.T, env *kubeapiserver.Env, ns string) *fixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	ic, err := istioclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, ctx: ctx, kube: env.Client, istio: ic, ns: ns, domain: "cluster.local"}
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", ns, err)
	}
	return f
}

func (f *fixture) host(name string) string { return name + "." + f.ns + ".svc." + f.domain }

// pod creates a pod with an IP (there is no kubelet: the test sets the
// status) and returns its proxy's node id.
func (f *fixture) pod(name, ip string, labels map[string]string) string {
	f.t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns, Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}},
	}
	created, err := f.kube.CoreV1().Pods(f.ns).Create(f.ctx, pod, metav1.CreateOptions{})
	if err != nil {
		f.t.Fatalf("create pod: %v", err)
	}
	created.Status.PodIP = ip
	created.Status.PodIPs = []corev1.PodIP{{IP: ip}}
	created.Status.Phase = corev1.PodRunning
	if _, err := f.kube.CoreV1().Pods(f.ns).UpdateStatus(f.ctx, created, metav1.UpdateOptions{}); err != nil {
		f.t.Fatalf("set pod IP: %v", err)
	}
	return proxypush.NodeID(ip, name, f.ns, "")
}

func (f *fixture) service(name string, ports ...corev1.ServicePort) {
	f.t.Helper()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns}, Spec: corev1.ServiceSpec{Ports: ports}}
	if _, err := f.kube.CoreV1().Services(f.ns).Create(f.ctx, svc, metav1.CreateOptions{}); err != nil {
		f.t.Fatalf("create service: %v", err)
	}
}

// endpoints writes the EndpointSlice NAME-1 of service name: port
// portName→port, the ready addresses and the not-ready ones.
func (f *fixture) endpoints(name, portName string, port int32, ready, notReady []string) {
	f.t.Helper()
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name + "-1", Namespace: f.ns, Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr(portName), Port: ptr(port)}},
	}
	for _, a := range ready {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}})
	}
	for _, a := range notReady {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(false)}})
	}
	api := f.kube.DiscoveryV1().EndpointSlices(f.ns)
	cur, err := api.Get(f.ctx, s.Name, metav1.GetOptions{})
	if err == nil {
		s.ResourceVersion = cur.ResourceVersion
		_, err = api.Update(f.ctx, s, metav1.UpdateOptions{})
	} else {
		_, err = api.Create(f.ctx, s, metav1.CreateOptions{})
	}
	if err != nil {
		f.t.Fatalf("write endpoint slice: %v", err)
	}
}

func withPort(addrs []string, port int) []string {
	out := make([]string, len(addrs))
	for i, a := range addrs {
		out[i] = fmt.Sprintf("%s:%d", a, port)
	}
	slices.Sort(out)
	return out
}

// TestServiceAndEndpoints: a Service and an EndpointSlice created through
// the API reach an ADS client as the cluster outbound|80||HOST with exactly
// the ready endpoints (within 10 s; the time is logged against
// convergence); scaling the endpoints causes EDS pushes only.
func TestServiceAndEndpoints(t *testing.T) {
	env := sharedEnv(t)
	f := newFixture(t, env, "eds")
	node := f.pod("client", "10.200.0.1", map[string]string{"app": "client"})
	p := startPlane(t, env.Config, Options{})
	c := dialADS(t, p.addr, node)
	c.subscribe(t, xdsapi.ClusterType)
	c.subscribe(t, xdsapi.ListenerType)
	c.subscribe(t, xdsapi.RouteType, "80")
	c.wait(t, "first CDS and LDS", 10*time.Second, func() bool {
		return c.latestOf(xdsapi.ClusterType) != nil && c.latestOf(xdsapi.ListenerType) != nil
	})

	clusterName := gen.OutboundClusterName(80, "", f.host("web"))
	start := time.Now()
	f.service("web", corev1.ServicePort{Name: "http", Port: 80})
	f.endpoints("web", "http", 8080, []string{"10.1.0.1", "10.1.0.2"}, []string{"10.1.0.9"})
	c.wait(t, "the cluster and its ready endpoints", 10*time.Second, func() bool {
		eps, ok := c.endpoints(clusterName)
		return ok && slices.Contains(c.clusters(), clusterName) && slices.Equal(eps, withPort([]string{"10.1.0.1", "10.1.0.2"}, 8080))
	})
	t.Logf("service and endpoints converged in %v (target %v)", time.Since(start), convergence)
	c.wait(t, "RDS for port 80", 10*time.Second, func() bool { return c.routeConfig("80") != nil })

	before := c.counts()
	for i, ready := range [][]string{
		{"10.1.0.1", "10.1.0.2", "10.1.0.3", "10.1.0.4"}, // up
		{"10.1.0.4"}, // down
	} {
		start := time.Now()
		f.endpoints("web", "http", 8080, ready, []string{"10.1.0.9"})
		c.wait(t, fmt.Sprintf("scale step %d", i), 10*time.Second, func() bool {
			eps, _ := c.endpoints(clusterName)
			return slices.Equal(eps, withPort(ready, 8080))
		})
		t.Logf("scale step %d converged in %v (target %v)", i, time.Since(start), convergence)
	}
	// Absence can only be checked over an interval: longer than the
	// debounce, short enough to keep the test quick.
	time.Sleep(500 * time.Millisecond)
	after := c.counts()
	for _, typ := range []string{xdsapi.ClusterType, xdsapi.ListenerType, xdsapi.RouteType} {
		if after[typ] != before[typ] {
			t.Errorf("%s pushed %d times while scaling endpoints; want EDS pushes only", typ, after[typ]-before[typ])
		}
	}
	if after[xdsapi.EndpointType] < before[xdsapi.EndpointType]+2 {
		t.Errorf("EDS pushed %d times for 2 scale steps", after[xdsapi.EndpointType]-before[xdsapi.EndpointType])
	}
	for _, req := range p.pushRequests() {
		if _, ok := req.ServicesUpdated[f.host("web")]; ok && req.Full && !slices.Contains(req.Reason, proxypush.ServiceUpdate) {
			t.Errorf("endpoint change sent a full push: %+v", req)
		}
	}
}

// TestVirtualService: a VirtualService created through the API changes
// the client's RDS (the time is logged against convergence); deleting it
// restores the default route.
func TestVirtualService(t *testing.T) {
	env := sharedEnv(t)
	f := newFixture(t, env, "vs")
	node := f.pod("client", "10.200.1.1", nil)
	f.service("web", corev1.ServicePort{Name: "http", Port: 80})
	f.service("web-v2", corev1.ServicePort{Name: "http", Port: 80})
	p := startPlane(t, env.Config, Options{})
	c := dialADS(t, p.addr, node)
	c.subscribe(t, xdsapi.ClusterType)
	c.subscribe(t, xdsapi.ListenerType)
	c.subscribe(t, xdsapi.RouteType, "80")
	c.wait(t, "RDS", 10*time.Second, func() bool { return c.routeConfig("80") != nil })
	initial := c.routeConfig("80")

	vs := &networkingv1.VirtualService{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: f.ns}}
	vs.Spec.Hosts = []string{"web"}
	vs.Spec.Http = []*networkingapi.HTTPRoute{{Route: []*networkingapi.HTTPRouteDestination{{Destination: &networkingapi.Destination{Host: "web-v2"}}}}}
	start := time.Now()
	if _, err := f.istio.NetworkingV1().VirtualServices(f.ns).Create(f.ctx, vs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.wait(t, "RDS to change", 10*time.Second, func() bool { return !proto.Equal(c.routeConfig("80"), initial) })
	t.Logf("VirtualService reached RDS in %v (target %v)", time.Since(start), convergence)
	if err := f.istio.NetworkingV1().VirtualServices(f.ns).Delete(f.ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.wait(t, "the default route after delete", 10*time.Second, func() bool { return proto.Equal(c.routeConfig("80"), initial) })
}

// TestTwoReplicas: two straitd replicas against one API server give their
// clients the same resources after a change.
func TestTwoReplicas(t *testing.T) {
	env := sharedEnv(t)
	f := newFixture(t, env, "ha")
	node := f.pod("client", "10.200.2.1", nil)
	var clients []*adsClient
	for range 2 {
		p := startPlane(t, env.Config, Options{})
		c := dialADS(t, p.addr, node)
		c.subscribe(t, xdsapi.ClusterType)
		c.subscribe(t, xdsapi.ListenerType)
		clients = append(clients, c)
	}
	f.service("api", corev1.ServicePort{Name: "grpc", Port: 9000})
	f.endpoints("api", "grpc", 9000, []string{"10.1.2.1", "10.1.2.2"}, nil)
	name := gen.OutboundClusterName(9000, "", f.host("api"))
	for _, c := range clients {
		c.wait(t, "api endpoints", 10*time.Second, func() bool {
			eps, _ := c.endpoints(name)
			return len(eps) == 2
		})
	}
	for _, typ := range []string{xdsapi.ClusterType, xdsapi.EndpointType, xdsapi.ListenerType} {
		a, b := clients[0].resources(typ), clients[1].resources(typ)
		if !slices.EqualFunc(a, b, func(x, y []byte) bool { return string(x) == string(y) }) {
			t.Errorf("replicas disagree on %s: %d vs %d resources", typ, len(a), len(b))
		}
	}
}

// TestProxies: proxies are identified by pod IP, namespace and name; a pod
// label change asks for a push naming that pod's proxy.
func TestProxies(t *testing.T) {
	env := sharedEnv(t)
	f := newFixture(t, env, "proxies")
	node := f.pod("app", "10.200.3.1", map[string]string{"version": "v1"})
	p := startPlane(t, env.Config, Options{})

	for name, id := range map[string]string{
		"unknown IP":         proxypush.NodeID("10.200.3.99", "app", f.ns, ""),
		"IP of another pod":  proxypush.NodeID("10.200.3.1", "other", f.ns, ""),
		"wrong namespace":    proxypush.NodeID("10.200.3.1", "app", "default", ""),
		"pod does not exist": proxypush.NodeID("10.200.3.2", "ghost", f.ns, ""),
	} {
		proxy, err := proxypush.ParseNodeID(id)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.reg.ResolveProxy(proxy); err == nil {
			t.Errorf("%s: proxy %s accepted", name, id)
		}
	}
	proxy, _ := proxypush.ParseNodeID(node)
	if err := p.reg.ResolveProxy(proxy); err != nil {
		t.Fatalf("pod's own proxy rejected: %v", err)
	}
	c := dialADS(t, p.addr, node)
	c.subscribe(t, xdsapi.ClusterType)
	c.wait(t, "CDS", 10*time.Second, func() bool { return c.latestOf(xdsapi.ClusterType) != nil })

	pod, err := f.kube.CoreV1().Pods(f.ns).Get(f.ctx, "app", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Labels["version"] = "v2"
	if _, err := f.kube.CoreV1().Pods(f.ns).Update(f.ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var found bool
		for _, req := range p.pushRequests() {
			if _, ok := req.AddressesUpdated["10.200.3.1"]; ok && req.Full && slices.Contains(req.Reason, proxypush.ProxyUpdate) {
				found = true
			}
		}
		if found {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no full push naming the pod's address after the label change; got %s", describeRequests(p.pushRequests()))
		}
		time.Sleep(20 * time.Millisecond)
	}
	w := p.reg.Snapshot().WorkloadByIP("10.200.3.1")
	if w == nil || w.Labels["version"] != "v2" {
		t.Errorf("workload of the pod: %+v, want label version=v2", w)
	}
}

// TestRunAsLeader: of two replicas one leads; when it stops, the other
// takes over.
func TestRunAsLeader(t *testing.T) {
	env := sharedEnv(t)
	newFixture(t, env, "leader")
	type replica struct {
		cancel context.CancelFunc
		done   chan struct{}
	}
	leading := make(chan string, 4)
	start := func(id string) replica {
		ctx, cancel := context.WithCancel(context.Background())
		r := replica{cancel: cancel, done: make(chan struct{})}
		go func() {
			defer close(r.done)
			_ = RunAsLeader(ctx, LeaderOptions{
				Config: env.Config, Namespace: "leader", Name: "straitd", Identity: id,
				LeaseDuration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 200 * time.Millisecond,
			}, func(ctx context.Context) {
				leading <- id
				<-ctx.Done()
			})
		}()
		t.Cleanup(func() { cancel(); <-r.done })
		return r
	}
	replicas := map[string]replica{"a": start("a"), "b": start("b")}
	var first string
	select {
	case first = <-leading:
	case <-time.After(30 * time.Second):
		t.Fatal("no leader within 30s")
	}
	select {
	case second := <-leading:
		t.Fatalf("%s leads while %s does", second, first)
	case <-time.After(3 * time.Second):
	}
	replicas[first].cancel()
	<-replicas[first].done
	select {
	case next := <-leading:
		if next == first {
			t.Fatalf("%s leads again after stopping", next)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no takeover within 30s after the leader stopped")
	}
}

// TestGatewayAPI: the Gateway API kinds are watched only when enabled and
// installed; a change to one asks for a push.
func TestGatewayAPI(t *testing.T) {
	env := sharedEnv(t)
	f := newFixture(t, env, "gateway")
	if err := env.InstallGatewayAPICRDs(f.ctx); err != nil {
		t.Fatal(err)
	}
	off := startPlane(t, env.Config, Options{})
	on := startPlane(t, env.Config, Options{GatewayAPI: true})
	if k := off.reg.WatchedKinds(); slices.ContainsFunc(k, func(s string) bool { return strings.HasPrefix(s, GatewayAPIGroup+"/") }) {
		t.Errorf("Gateway API kinds watched without GatewayAPI: %v", k)
	}
	if k := on.reg.WatchedKinds(); !slices.Contains(k, GatewayAPIGroup+"/HTTPRoute") || !slices.Contains(k, GatewayAPIGroup+"/Gateway") {
		t.Fatalf("Gateway API kinds not watched: %v", k)
	}
	route := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": GatewayAPIGroup + "/v1", "kind": "HTTPRoute",
		"metadata": map[string]any{"name": "web", "namespace": f.ns},
		"spec":     map[string]any{"hostnames": []any{"web.example.com"}},
	}}
	gvr := schema.GroupVersionResource{Group: GatewayAPIGroup, Version: "v1", Resource: "httproutes"}
	if _, err := env.Dynamic.Resource(gvr).Namespace(f.ns).Create(f.ctx, route, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	key := proxypush.ConfigKey{Kind: "HTTPRoute", Name: "web", Namespace: f.ns}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var found bool
		for _, req := range on.pushRequests() {
			if _, ok := req.ConfigsUpdated[key]; ok && req.Full {
				found = true
			}
		}
		if found {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no full push naming %v; got %+v", key, on.pushRequests())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func describeRequests(reqs []*proxypush.PushRequest) string {
	var out []string
	for _, r := range reqs {
		out = append(out, fmt.Sprintf("{full=%v reasons=%v configs=%v services=%v addresses=%v}", r.Full, r.Reason, r.ConfigsUpdated, r.ServicesUpdated, r.AddressesUpdated))
	}
	return strings.Join(out, "\n")
}
