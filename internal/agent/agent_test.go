package agent

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/straitmesh/strait/internal/agent/settings"
	"github.com/straitmesh/strait/internal/freeport"
	"github.com/straitmesh/strait/internal/nds"
	proxybootstrap "github.com/straitmesh/strait/internal/proxy/bootstrap"
	"github.com/straitmesh/strait/internal/xdsapi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/anypb"
)

const timeout = 15 * time.Second

// The test binary doubles as the proxy: with fakeProxyEnv set, TestMain
// runs fakeProxy, which behaves like strait-proxy towards the agent.
const fakeProxyEnv = "STRAIT_AGENT_FAKE_PROXY_LOG"

func TestMain(m *testing.M) {
	if log := os.Getenv(fakeProxyEnv); log != "" {
		if err := fakeProxy(log, os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, "fake proxy:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// fakeProxy reads the bootstrap given with -c, serves admin /ready (503
// until CDS and LDS are ACKed over ADS through the bootstrap's pipe) and
// /stats/prometheus, and exits 0 on SIGTERM.
func fakeProxy(log string, args []string) error {
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	appendLine(log, "start "+strings.Join(args, " "))
	if len(args) < 2 || args[0] != "-c" {
		return fmt.Errorf("args %q: want -c BOOTSTRAP [ARG]", args)
	}
	data, err := os.ReadFile(args[1])
	if err != nil {
		return err
	}
	b, err := proxybootstrap.Parse(data) // as strait-proxy reads it
	if err != nil {
		return err
	}
	admin := b.GetAdmin().GetAddress().GetSocketAddress()
	pipe := b.GetStaticResources().GetClusters()[0].GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetPipe().GetPath()

	var live atomic.Bool
	mux := http.NewServeMux()
	mux.HandleFunc("/ready", func(w http.ResponseWriter, r *http.Request) {
		if live.Load() {
			fmt.Fprintln(w, "LIVE")
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, "PRE_INITIALIZING")
	})
	mux.HandleFunc("/stats/prometheus", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, `envoy_cluster_upstream_rq_total{cluster_name="xds-grpc"} 0`)
	})
	lis, err := net.Listen("tcp", net.JoinHostPort(admin.GetAddress(), fmt.Sprint(admin.GetPortValue())))
	if err != nil {
		return err
	}
	go http.Serve(lis, mux)

	cc, err := grpc.NewClient("unix://"+pipe, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer cc.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx, grpc.WaitForReady(true))
	if err != nil {
		return err
	}
	for i, typeURL := range []string{xdsapi.ClusterType, xdsapi.ListenerType} {
		req := &discoveryv3.DiscoveryRequest{TypeUrl: typeURL}
		if i == 0 {
			req.Node = b.GetNode()
		}
		if err := stream.Send(req); err != nil {
			return err
		}
		resp, err := stream.Recv()
		if err != nil {
			return err
		}
		if err := stream.Send(&discoveryv3.DiscoveryRequest{TypeUrl: typeURL, VersionInfo: resp.VersionInfo, ResponseNonce: resp.Nonce}); err != nil {
			return err
		}
	}
	live.Store(true)
	<-term
	appendLine(log, "sigterm")
	return nil
}

func appendLine(path, line string) {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	fmt.Fprintln(f, line)
}

// controlPlane answers every new subscription with an empty response and
// records the node it saw.
type controlPlane struct {
	discoveryv3.UnimplementedAggregatedDiscoveryServiceServer
	node atomic.Pointer[corev3.Node]
	// nameTable, if set, is the NDS response's resource; ndsNode is the
	// node of the stream that asked for it, and ndsWithProxy says that
	// stream also carried the proxy's requests.
	nameTable    nds.NameTable
	ndsNode      atomic.Pointer[corev3.Node]
	ndsWithProxy atomic.Bool
	// streams counts the ADS streams opened.
	streams atomic.Int32
}

func (c *controlPlane) StreamAggregatedResources(s discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesServer) error {
	c.streams.Add(1)
	var node *corev3.Node
	proxyTypes := false
	for n := 1; ; n++ {
		req, err := s.Recv()
		if err != nil {
			return nil
		}
		if req.GetNode() != nil {
			node = req.GetNode()
			c.node.Store(node)
		}
		if req.GetTypeUrl() == nds.TypeURL {
			c.ndsNode.Store(node)
			c.ndsWithProxy.Store(proxyTypes)
		} else {
			proxyTypes = true
		}
		if req.GetResponseNonce() != "" {
			continue
		}
		resp := &discoveryv3.DiscoveryResponse{TypeUrl: req.GetTypeUrl(), VersionInfo: "v1", Nonce: fmt.Sprint(n)}
		if req.GetTypeUrl() == nds.TypeURL && c.nameTable != nil {
			resp.Resources = []*anypb.Any{{TypeUrl: nds.TypeURL, Value: nds.Marshal(c.nameTable)}}
		}
		if err := s.Send(resp); err != nil {
			return err
		}
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	p, err := freeport.Port("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func httpGet(url string) (int, string) {
	c := &http.Client{Timeout: time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v; last: %s", what, timeout, last)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAgent runs the whole agent against a fake control plane, with the
// test binary as the proxy: bootstrap, xDS relay, readiness, merged
// metrics, drain and shutdown.
func TestAgent(t *testing.T) {
	cp := &controlPlane{}
	cpLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(srv, cp)
	go srv.Serve(cpLis)
	defer srv.Stop()

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	proxyLog := filepath.Join(dir, "proxy.log")
	t.Setenv(fakeProxyEnv, proxyLog) // for the child only
	adminPort, statusPort, readyPort := freePort(t), freePort(t), freePort(t)
	if err := os.MkdirAll(filepath.Join(dir, "pod"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pod", "labels"), []byte("app=\"client\"\nversion=\"v1\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"POD_NAME":               "client-1",
		"POD_NAMESPACE":          "demo",
		"INSTANCE_IP":            "10.1.0.2",
		"SERVICE_ACCOUNT":        "client",
		"MINIMUM_DRAIN_DURATION": "500ms",
		"PROXY_CONFIG": fmt.Sprintf(`{"discoveryAddress":%q,"binaryPath":%q,"proxyAdminPort":%d,"statusPort":%d,"configPath":"etc/istio/proxy"}`,
			cpLis.Addr().String(), exe, adminPort, statusPort),
	}
	cfg, err := settings.Load(settings.Sources{
		LookupEnv:      func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		Environ:        []string{"ISTIO_META_INTERCEPTION_MODE=REDIRECT"},
		WorkDir:        dir,
		MeshConfigFile: filepath.Join(dir, "no-mesh"),
		PodInfoDir:     filepath.Join(dir, "pod"),
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg.ReadinessPort = readyPort

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, cfg, Options{
			Logger:           slog.New(slog.DiscardHandler),
			StatusHost:       "127.0.0.1",
			XDSBackoffBase:   10 * time.Millisecond,
			TerminateTimeout: timeout,
		})
	}()

	readyURL := fmt.Sprintf("http://127.0.0.1:%d/healthz/ready", readyPort)
	waitFor(t, "readiness 200", func() (bool, string) {
		code, body := httpGet(readyURL)
		return code == http.StatusOK, fmt.Sprint(code, " ", body)
	})
	if n := cp.node.Load(); n.GetId() != "sidecar~10.1.0.2~client-1.demo~demo.svc.cluster.local" ||
		n.GetCluster() != "client.demo" ||
		n.GetMetadata().GetFields()["INTERCEPTION_MODE"].GetStringValue() != "REDIRECT" ||
		n.GetMetadata().GetFields()["LABELS"].GetStructValue().GetFields()["app"].GetStringValue() != "client" ||
		n.GetMetadata().GetFields()["LABELS"].GetStructValue().GetFields()["version"].GetStringValue() != "v1" ||
		n.GetMetadata().GetFields()["NAME"].GetStringValue() != "client-1" {
		t.Errorf("control plane saw node %v", n)
	}
	bootstrapPath := filepath.Join(dir, "etc", "istio", "proxy", "envoy-rev.json")
	if _, err := os.Stat(bootstrapPath); err != nil {
		t.Errorf("bootstrap: %v", err)
	}
	code, metrics := httpGet(fmt.Sprintf("http://127.0.0.1:%d/stats/prometheus", statusPort))
	for _, want := range []string{`envoy_cluster_upstream_rq_total{cluster_name="xds-grpc"} 0`, "strait_agent_xds_cds_acked 1", "strait_agent_xds_lds_acked 1", "strait_agent_proxy_restarts_total 0"} {
		if code != http.StatusOK || !strings.Contains(metrics, want) {
			t.Errorf("merged metrics (%d) lack %q:\n%s", code, want, metrics)
		}
	}
	if code, _ := httpGet(fmt.Sprintf("http://127.0.0.1:%d/healthz/ready", statusPort)); code != http.StatusOK {
		t.Errorf("status port readiness = %d", code)
	}

	// SIGTERM: readiness fails during the drain, then the proxy is stopped.
	cancel()
	waitFor(t, "readiness 503 while draining", func() (bool, string) {
		code, body := httpGet(readyURL)
		return code == http.StatusServiceUnavailable && strings.Contains(body, "draining"), fmt.Sprint(code, " ", body)
	})
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
	case <-time.After(timeout):
		t.Fatal("agent did not stop")
	}
	log, _ := os.ReadFile(proxyLog)
	wantStart := fmt.Sprintf("start -c %s --concurrency 2 --drain-time-s 45\nsigterm\n", bootstrapPath)
	if string(log) != wantStart {
		t.Errorf("proxy log = %q, want %q", log, wantStart)
	}
}

func TestTerminateTimeout(t *testing.T) {
	for _, tc := range []struct{ given, drain, want time.Duration }{
		{0, 0, 30 * time.Second},
		{0, 45 * time.Second, 50 * time.Second},
		{0, 10 * time.Second, 30 * time.Second},
		{2 * time.Second, 45 * time.Second, 2 * time.Second},
	} {
		if got := terminateTimeout(tc.given, tc.drain); got != tc.want {
			t.Errorf("terminateTimeout(%v, %v) = %v, want %v", tc.given, tc.drain, got, tc.want)
		}
	}
}

// TestAgentDNSProxy: with ISTIO_META_DNS_CAPTURE the agent asks the
// control plane for the name table on the proxy's own stream (one stream
// per pod, as pilot-agent), whose node metadata has DNS_CAPTURE, is ready
// once the table is in, and answers the mesh's names on its DNS address.
func TestAgentDNSProxy(t *testing.T) {
	cp := &controlPlane{nameTable: nds.NameTable{
		"reviews.demo.svc.cluster.local": {IPs: []string{"10.96.0.20"}, Registry: nds.RegistryKubernetes, Shortname: "reviews", Namespace: "demo"},
	}}
	cpLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(srv, cp)
	go srv.Serve(cpLis)
	defer srv.Stop()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	t.Setenv(fakeProxyEnv, filepath.Join(dir, "proxy.log"))
	adminPort, readyPort, dnsPort := freePort(t), freePort(t), freePort(t)
	resolvConf := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(resolvConf, []byte("search demo.svc.cluster.local svc.cluster.local\nnameserver 127.0.0.1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"POD_NAME": "client-1", "POD_NAMESPACE": "demo", "INSTANCE_IP": "10.1.0.2", "MINIMUM_DRAIN_DURATION": "500ms",
		"PROXY_CONFIG": fmt.Sprintf(`{"discoveryAddress":%q,"binaryPath":%q,"proxyAdminPort":%d,"statusPort":0,"configPath":"etc/istio/proxy"}`,
			cpLis.Addr().String(), exe, adminPort),
	}
	cfg, err := settings.Load(settings.Sources{
		LookupEnv:      func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		Environ:        []string{"ISTIO_META_DNS_CAPTURE=true"},
		WorkDir:        dir,
		MeshConfigFile: filepath.Join(dir, "no-mesh"),
		PodInfoDir:     filepath.Join(dir, "pod"),
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg.ReadinessPort = readyPort
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	dnsAddr := fmt.Sprintf("127.0.0.1:%d", dnsPort)
	go func() {
		done <- Run(ctx, cfg, Options{
			Logger:           slog.New(slog.DiscardHandler),
			StatusHost:       "127.0.0.1",
			XDSBackoffBase:   10 * time.Millisecond,
			TerminateTimeout: timeout,
			DNSAddr:          dnsAddr,
			ResolvConf:       resolvConf,
			DNSReadyTimeout:  time.Hour, // ready only with the table
		})
	}()
	waitFor(t, "readiness 200", func() (bool, string) {
		code, body := httpGet(fmt.Sprintf("http://127.0.0.1:%d/healthz/ready", readyPort))
		return code == http.StatusOK, fmt.Sprint(code, " ", body)
	})
	if n := cp.ndsNode.Load(); n.GetId() != "sidecar~10.1.0.2~client-1.demo~demo.svc.cluster.local" ||
		n.GetMetadata().GetFields()["DNS_CAPTURE"].GetStringValue() != "true" {
		t.Errorf("name table asked by node %v", n)
	}
	if !cp.ndsWithProxy.Load() || cp.streams.Load() != 1 {
		t.Errorf("name table on the proxy's stream: %v; %d streams opened, want 1", cp.ndsWithProxy.Load(), cp.streams.Load())
	}
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, dnsAddr)
	}}
	for _, name := range []string{"reviews.demo.svc.cluster.local", "reviews.", "reviews.demo."} {
		lctx, lcancel := context.WithTimeout(ctx, timeout)
		addrs, err := r.LookupIPAddr(lctx, name)
		lcancel()
		if err != nil || len(addrs) != 1 || addrs[0].IP.String() != "10.96.0.20" {
			t.Errorf("lookup %s = %v, %v; want 10.96.0.20", name, addrs, err)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
	case <-time.After(timeout):
		t.Fatal("agent did not stop")
	}
}

// TestAgentInProcessProxy runs the agent with strait-proxy in its own
// process (binaryPath unset: the default, in-process): the real proxy
// reads the bootstrap the agent wrote, gets its configuration over the
// agent's xDS relay, answers readiness through 15021 and its stats
// through the merged metrics, and on shutdown drains and stops, freeing
// its admin port.
func TestAgentInProcessProxy(t *testing.T) {
	cp := &controlPlane{}
	cpLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(srv, cp)
	go srv.Serve(cpLis)
	defer srv.Stop()
	dir := t.TempDir()
	adminPort, statusPort, readyPort := freePort(t), freePort(t), freePort(t)
	env := map[string]string{
		"POD_NAME": "client-1", "POD_NAMESPACE": "demo", "INSTANCE_IP": "10.1.0.2", "MINIMUM_DRAIN_DURATION": "200ms",
		"PROXY_CONFIG": fmt.Sprintf(`{"discoveryAddress":%q,"proxyAdminPort":%d,"statusPort":%d,"configPath":"etc/istio/proxy"}`,
			cpLis.Addr().String(), adminPort, statusPort),
	}
	cfg, err := settings.Load(settings.Sources{
		LookupEnv:      func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		Environ:        []string{"ISTIO_META_INTERCEPTION_MODE=REDIRECT"},
		Executable:     filepath.Join(dir, "bin", "strait-agent"), // no strait-proxy beside it: never executed
		WorkDir:        dir,
		MeshConfigFile: filepath.Join(dir, "no-mesh"),
		PodInfoDir:     filepath.Join(dir, "pod"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ProxyMode != settings.ProxyInProcess {
		t.Fatalf("ProxyMode = %q, want %q by default", cfg.ProxyMode, settings.ProxyInProcess)
	}
	cfg.ReadinessPort = readyPort
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, cfg, Options{
			Logger:           slog.New(slog.DiscardHandler),
			StatusHost:       "127.0.0.1",
			XDSBackoffBase:   10 * time.Millisecond,
			TerminateTimeout: timeout,
		})
	}()
	readyURL := fmt.Sprintf("http://127.0.0.1:%d/healthz/ready", readyPort)
	waitFor(t, "readiness 200", func() (bool, string) {
		code, body := httpGet(readyURL)
		return code == http.StatusOK, fmt.Sprint(code, " ", body)
	})
	if code, body := httpGet(fmt.Sprintf("http://127.0.0.1:%d/ready", adminPort)); code != http.StatusOK || strings.TrimSpace(body) != "LIVE" {
		t.Errorf("the proxy's admin /ready = %d %q, want 200 LIVE", code, body)
	}
	code, metrics := httpGet(fmt.Sprintf("http://127.0.0.1:%d/stats/prometheus", statusPort))
	for _, want := range []string{"envoy_server_state 0", "strait_agent_proxy_restarts_total 0"} {
		if code != http.StatusOK || !strings.Contains(metrics, want) {
			t.Errorf("merged metrics (%d) lack %q:\n%s", code, want, metrics)
		}
	}
	cancel()
	waitFor(t, "readiness 503 while draining", func() (bool, string) {
		code, body := httpGet(readyURL)
		return code == http.StatusServiceUnavailable, fmt.Sprint(code, " ", body)
	})
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
	case <-time.After(timeout):
		t.Fatal("agent did not stop")
	}
	if code, _ := httpGet(fmt.Sprintf("http://127.0.0.1:%d/ready", adminPort)); code != 0 {
		t.Errorf("the proxy's admin still answers (%d) after the agent stopped", code)
	}
}
