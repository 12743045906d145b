package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/straitmesh/strait/internal/kubeapiserver"
)

// kubeMesh is the generated mesh as Kubernetes objects in a test API server
// (internal/testenv/kube): per namespace a Sidecar (egress ./*); per
// service a Service (ClusterIP, port 80 "http") and an EndpointSlice of E
// ready endpoints; per proxy a Pod whose status.podIP is the proxy's IP, so
// that either control plane can resolve the node id to a pod.
type kubeMesh struct {
	env    *kubeapiserver.Env
	client kubernetes.Interface
	dyn    dynamic.Interface
}

var (
	sidecarGVR = schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1", Resource: "sidecars"}
	vsGVR      = schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1", Resource: "virtualservices"}
)

func startKubeMesh(ctx context.Context, m *mesh) (*kubeMesh, error) {
	if _, err := kubeapiserver.Binaries(ctx, os.Stderr); err != nil {
		return nil, err
	}
	env, err := kubeapiserver.StartContext(ctx, kubeapiserver.Options{Progress: os.Stderr})
	if err != nil {
		return nil, err
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 2000, 4000
	k := &kubeMesh{env: env}
	if k.client, err = kubernetes.NewForConfig(cfg); err == nil {
		k.dyn, err = dynamic.NewForConfig(cfg)
	}
	if err == nil {
		err = k.load(ctx, m)
	}
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	return k, nil
}

func (k *kubeMesh) Stop() { _ = k.env.Stop() }

// parallel runs f(0..n-1) on 16 workers and returns the first error.
func parallel(n int, f func(i int) error) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		ferr error
	)
	next := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range next {
				if err := f(i); err != nil {
					mu.Lock()
					ferr = errors.Join(ferr, err)
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return ferr
}

func (k *kubeMesh) load(ctx context.Context, m *mesh) error {
	start := time.Now()
	nss := []string{"istio-system"}
	for n := range m.namespaces {
		nss = append(nss, fmt.Sprintf("ns-%d", n))
	}
	for _, ns := range nss {
		if _, err := k.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	if m.scoped {
		for n := range m.namespaces {
			sc := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "networking.istio.io/v1", "kind": "Sidecar",
				"metadata": map[string]any{"name": "default", "namespace": fmt.Sprintf("ns-%d", n)},
				"spec":     map[string]any{"egress": []any{map[string]any{"hosts": []any{"./*"}}}},
			}}
			if _, err := k.dyn.Resource(sidecarGVR).Namespace(sc.GetNamespace()).Create(ctx, sc, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("sidecar: %w", err)
			}
		}
	}
	err := parallel(m.services, func(i int) error {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: m.svcName(i), Namespace: m.ns(i)},
			Spec: corev1.ServiceSpec{
				Type:     corev1.ServiceTypeClusterIP,
				Selector: map[string]string{"app": m.svcName(i)},
				Ports:    []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}},
			},
		}
		if _, err := k.client.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("service %s: %w", svc.Name, err)
		}
		_, err := k.client.DiscoveryV1().EndpointSlices(svc.Namespace).Create(ctx, m.endpointSlice(i, 0), metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return err
	}
	err = parallel(m.proxies, func(i int) error {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("proxy-%d", i), Namespace: m.proxyNS(i), Labels: map[string]string{"app": fmt.Sprintf("proxy-%d", i)}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "bench"}}, NodeName: "bench-node"},
		}
		p, err := k.client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("pod %s: %w", pod.Name, err)
		}
		p.Status = corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: m.proxyIP(i), PodIPs: []corev1.PodIP{{IP: m.proxyIP(i)}}, HostIP: "127.0.0.1",
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
		}
		_, err = k.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "bench/xds: loaded %d namespaces, %d Services + EndpointSlices, %d Pods into the API server in %v\n",
		len(nss), m.services, m.proxies, time.Since(start).Round(time.Millisecond))
	return nil
}

func (m *mesh) endpointSlice(i, generation int) *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: m.svcName(i) + "-1", Namespace: m.ns(i),
			Labels: map[string]string{discoveryv1.LabelServiceName: m.svcName(i), discoveryv1.LabelManagedBy: "bench-xds"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptrTo("http"), Port: ptrTo[int32](80), Protocol: ptrTo(corev1.ProtocolTCP)}},
	}
	for e := range m.endpoints {
		g := 0
		if e == m.endpoints-1 {
			g = generation
		}
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{endpointIP(i, e, g)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptrTo(true), Serving: ptrTo(true)}})
	}
	return es
}

func (k *kubeMesh) ChangeEndpoints(ctx context.Context, m *mesh, svc, gen int) error {
	es := m.endpointSlice(svc, gen)
	_, err := k.client.DiscoveryV1().EndpointSlices(es.Namespace).Update(ctx, es, metav1.UpdateOptions{})
	return err
}

func (k *kubeMesh) AddVirtualService(ctx context.Context, m *mesh, svc, rep int) error {
	host := m.svcHost(svc)
	vs := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
		"metadata": map[string]any{"name": m.svcName(svc), "namespace": m.ns(svc)},
		"spec": map[string]any{
			"hosts": []any{host},
			"http": []any{map[string]any{
				"name": vsMarker(rep), "timeout": "7s",
				"route": []any{map[string]any{"destination": map[string]any{"host": host}}},
			}},
		},
	}}
	client := k.dyn.Resource(vsGVR).Namespace(m.ns(svc))
	if rep == 1 {
		_, err := client.Create(ctx, vs, metav1.CreateOptions{})
		return err
	}
	cur, err := client.Get(ctx, m.svcName(svc), metav1.GetOptions{})
	if err != nil {
		return err
	}
	vs.SetResourceVersion(cur.GetResourceVersion())
	_, err = client.Update(ctx, vs, metav1.UpdateOptions{})
	return err
}

// waitReady polls url until it answers 200.
func waitReady(url string, d time.Duration, exited func() bool) error {
	deadline := time.Now().Add(d)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if exited() {
			return errors.New("exited before ready")
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready within %v", url, d)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// proc is a control-plane child process.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func startProc(bin string, args, env []string, logPath string) (*proc, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, err
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); f.Close(); close(p.done) }()
	return p, nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) stop() {
	if p == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// straitdKube is straitd in Kubernetes mode against the test API server.
type straitdKube struct {
	bin       string
	logLevel  string // straitd's --log-level
	keepLog   string // if set, straitd's log is copied here when it stops
	*kubeMesh        // ChangeEndpoints and AddVirtualService; set by Start
	p         *proc
	monAddr   string
}

func (s *straitdKube) PprofURL() string { return "http://" + s.monAddr + "/debug/pprof" }

func (s *straitdKube) Name() string { return "straitd (Kubernetes mode)" }

func (s *straitdKube) Start(ctx context.Context, m *mesh) (string, int, error) {
	var err error
	if s.kubeMesh, err = startKubeMesh(ctx, m); err != nil {
		return "", 0, err
	}
	addrs, err := freePorts(2)
	if err != nil {
		return "", 0, err
	}
	xdsAddr, monAddr := addrs[0], addrs[1]
	s.monAddr = monAddr
	logPath := filepath.Join(s.env.Dir, "straitd.log")
	s.p, err = startProc(s.bin, []string{"--kubeconfig", s.env.KubeconfigPath, "--xds-addr", xdsAddr, "--monitoring-addr", monAddr,
		"--inject-addr", "127.0.0.1:0", "--webhook-config-name", "", "--secure-xds-addr", "", "--log-level", s.logLevel}, []string{"GOMAXPROCS=2"}, logPath)
	if err != nil {
		return "", 0, fmt.Errorf("start %s: %w (build it with `make build`)", s.bin, err)
	}
	if err := waitReady("http://"+monAddr+"/healthz/ready", 120*time.Second, s.p.exited); err != nil {
		b, _ := os.ReadFile(logPath)
		return "", 0, fmt.Errorf("straitd: %w\n%s", err, tail(b, 3000))
	}
	return xdsAddr, s.p.cmd.Process.Pid, nil
}

func (s *straitdKube) Stop() {
	s.p.stop()
	if s.keepLog != "" && s.kubeMesh != nil {
		if b, err := os.ReadFile(filepath.Join(s.env.Dir, "straitd.log")); err == nil {
			_ = os.WriteFile(s.keepLog, b, 0o644)
		}
	}
	if s.kubeMesh != nil {
		s.kubeMesh.Stop()
	}
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// pilotDiscovery is Istio's pilot-discovery (hack/pilot-discovery-build.sh)
// against the test API server.
type pilotDiscovery struct {
	bin       string
	*kubeMesh // ChangeEndpoints and AddVirtualService; set by Start
	p         *proc
}

func (s *pilotDiscovery) Name() string { return "Istio pilot-discovery" }

func (s *pilotDiscovery) Start(ctx context.Context, m *mesh) (string, int, error) {
	if _, err := os.Stat(s.bin); err != nil {
		return "", 0, fmt.Errorf("pilot-discovery: %w (build it with hack/pilot-discovery-build.sh, or give -pilot-discovery)", err)
	}
	var err error
	if s.kubeMesh, err = startKubeMesh(ctx, m); err != nil {
		return "", 0, err
	}
	addrs, err := freePorts(4)
	if err != nil {
		return "", 0, err
	}
	grpcAddr, httpAddr, httpsAddr, monAddr := addrs[0], addrs[1], addrs[2], addrs[3]
	meshCfg := filepath.Join(s.env.Dir, "mesh.yaml")
	if err := os.WriteFile(meshCfg, []byte("defaultConfig:\n  discoveryAddress: "+grpcAddr+"\nrootNamespace: istio-system\ntrustDomain: cluster.local\n"), 0o644); err != nil {
		return "", 0, err
	}
	logPath := filepath.Join(s.env.Dir, "pilot-discovery.log")
	s.p, err = startProc(s.bin, []string{"discovery", "--kubeconfig", s.env.KubeconfigPath, "-a", "istio-system",
		"--meshConfig", meshCfg, "--grpcAddr", grpcAddr, "--httpAddr", httpAddr, "--httpsAddr", httpsAddr,
		"--monitoringAddr", monAddr, "--secureGRPCAddr", "", "--keepaliveMaxServerConnectionAge", "30m",
		"--log_output_level", "default:warn"},
		[]string{"GOMAXPROCS=2", "POD_NAMESPACE=istio-system", "POD_NAME=istiod-bench", "REVISION=default",
			"PILOT_ENABLE_CONFIG_DISTRIBUTION_TRACKING=false", "ENABLE_CA_SERVER=false", "PILOT_ENABLE_XDS_CACHE=true",
			"PILOT_ENABLE_GATEWAY_API=false", "PILOT_ENABLE_GATEWAY_API_STATUS=false", "PILOT_ENABLE_GATEWAY_API_DEPLOYMENT_CONTROLLER=false",
			"PILOT_ENABLE_ALPHA_GATEWAY_API=false", "ENABLE_ENHANCED_RESOURCE_SCOPING=false", "ISTIOD_CUSTOM_HOST=localhost",
			"INJECTION_WEBHOOK_CONFIG_NAME=", "VALIDATION_WEBHOOK_CONFIG_NAME=", "PILOT_ENABLE_STATUS=false",
			"CLUSTER_ID=Kubernetes"}, logPath)
	if err != nil {
		return "", 0, err
	}
	if err := waitReady("http://"+httpAddr+"/ready", 180*time.Second, s.p.exited); err != nil {
		b, _ := os.ReadFile(logPath)
		return "", 0, fmt.Errorf("pilot-discovery: %w\n%s", err, tail(b, 4000))
	}
	return grpcAddr, s.p.cmd.Process.Pid, nil
}

func (s *pilotDiscovery) Stop() {
	s.p.stop()
	if s.kubeMesh != nil {
		s.kubeMesh.Stop()
	}
}

func ptrTo[T any](v T) *T { return &v }
