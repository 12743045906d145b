// Package kubeapiserver runs a real Kubernetes API for tests: etcd and kube-apiserver,
// built from their Go modules (see hack/kube-testenv-build.sh) and cached
// by version, started on loopback with generated certificates, a
// service-account signing key and token auth. It installs the Istio CRDs
// (from the istio.io/api module the code is built with) and, on request,
// the Gateway API CRDs.
//
// There is no kubelet, scheduler or controller manager: tests create
// EndpointSlices and pods through the API themselves.
//
//	env := kube.Start(t, kube.Options{})
//	client := env.Client // kubernetes.Interface, admin
//	path := env.KubeconfigPath
package kubeapiserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/straitmesh/strait/internal/daemon"
	"github.com/straitmesh/strait/internal/testreq"
)

// ServiceCIDR is the API server's ClusterIP range; KubernetesServiceIP,
// its first address, is the kubernetes Service's.
var (
	ServiceCIDR         = netip.MustParsePrefix("10.96.0.0/16")
	KubernetesServiceIP = netip.MustParseAddr("10.96.0.1")
)

// Options configure Start.
type Options struct {
	// GatewayAPI installs the Gateway API standard-channel CRDs.
	GatewayAPI bool
	// NoIstioCRDs starts without the Istio CRDs; InstallIstioCRDs adds
	// them later.
	NoIstioCRDs bool
	// Progress receives build progress and start-up messages; nil means
	// os.Stderr (go test shows it live, unlike t.Log).
	Progress io.Writer
	// NodeIP, when set, configures the API server for a cluster with a
	// kubelet, a controller manager and pods (internal/kubenode): it
	// listens on and advertises NodeIP (the node's bridge address, which
	// pods reach; the kubernetes Service's endpoint) instead of
	// 127.0.0.1, its certificate also names NodeIP and the kubernetes
	// Service's ClusterIP, ServiceAccount admission is on (the controller
	// manager creates the default service accounts), and kubelets are
	// reached at their InternalIP (a test node's hostname resolves
	// nowhere).
	NodeIP netip.Addr
}

// Env is a running etcd and kube-apiserver.
type Env struct {
	// Set by Start, read-only afterwards.

	// Config is an admin rest.Config (bearer token, CA pinned). Copy it
	// before changing it: rest.CopyConfig(env.Config).
	Config *rest.Config
	// KubeconfigPath is a kubeconfig file with the same credentials.
	KubeconfigPath string
	// Client and Dynamic are admin clients built from Config.
	Client  kubernetes.Interface
	Dynamic dynamic.Interface
	// Dir holds the certificates, logs and etcd's data; Stop removes it.
	Dir string

	binDir string
	// host is the address the API server listens on and advertises.
	host    netip.Addr
	forNode bool
	pki     *pki
	etcdURL string
	port    int
	out     io.Writer

	// mu guards the processes.
	mu        sync.Mutex
	etcd      *daemon.Process
	apiserver *daemon.Process
	stopped   bool
}

// Start starts a test API server for t and stops it when t ends. The
// binaries are built first when they are not cached (with progress on
// stderr). If they cannot be built (no go toolchain or module proxy), t is
// skipped with the reason, unless $STRAIT_KUBE_TESTENV_REQUIRED is set, in
// which case it fails.
func Start(t testing.TB, opts Options) *Env {
	t.Helper()
	testreq.Privileged(t, "a real kube-apiserver and etcd")
	if opts.Progress == nil {
		opts.Progress = os.Stderr
	}
	buildCtx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	if _, err := Binaries(buildCtx, opts.Progress); err != nil {
		if v := os.Getenv(EnvRequired); v == "1" || v == "true" {
			t.Fatalf("testenv/kube: %v", err)
		}
		testreq.Missing(t, "no Kubernetes API server for tests: %v (run `make kube-testenv` to see the build fail or succeed)", err)
	}
	ctx, cancel2 := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel2()
	env, err := StartContext(ctx, opts)
	if err != nil {
		t.Fatalf("testenv/kube: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			env.mu.Lock()
			api := env.apiserver
			env.mu.Unlock()
			if api != nil {
				t.Logf("kube-apiserver log (tail):\n%s", api.LogTail(30))
			}
		}
		if err := env.Stop(); err != nil {
			t.Errorf("testenv/kube: stop: %v", err)
		}
	})
	return env
}

// StartContext is Start without a testing.TB: it does not build the
// binaries (call Binaries first) and the caller must call Stop.
func StartContext(ctx context.Context, opts Options) (env *Env, err error) {
	if opts.Progress == nil {
		opts.Progress = os.Stderr
	}
	binDir, err := BinDir()
	if err != nil {
		return nil, err
	}
	if !haveBinaries(binDir, apiBinaries) {
		return nil, fmt.Errorf("%w: kube-apiserver and etcd are not in %s (call Binaries first)", ErrUnavailable, binDir)
	}
	dir, err := os.MkdirTemp("", "strait-kube-")
	if err != nil {
		return nil, err
	}
	e := &Env{Dir: dir, binDir: binDir, out: opts.Progress, host: netip.AddrFrom4([4]byte{127, 0, 0, 1})}
	var extraIPs []net.IP
	if opts.NodeIP.IsValid() {
		e.host, e.forNode = opts.NodeIP, true
		extraIPs = []net.IP{opts.NodeIP.AsSlice(), net.IP(KubernetesServiceIP.AsSlice())}
	}
	defer func() {
		if err != nil {
			_ = e.Stop()
		}
	}()
	start := time.Now()
	if e.pki, err = newPKI(dir, extraIPs); err != nil {
		return nil, fmt.Errorf("generate certificates: %w", err)
	}
	// A port picked free can be taken before the child binds it: retry
	// with fresh ports.
	for attempt := 1; ; attempt++ {
		err = e.startProcesses(ctx)
		if err == nil || attempt == 3 || ctx.Err() != nil {
			break
		}
		fmt.Fprintf(e.out, "testenv/kube: start failed (%v); retrying with other ports\n", err)
		e.stopProcesses()
	}
	if err != nil {
		return nil, err
	}
	if err := e.writeClients(); err != nil {
		return nil, err
	}
	if !opts.NoIstioCRDs {
		if err := e.InstallIstioCRDs(ctx); err != nil {
			return nil, err
		}
	}
	if opts.GatewayAPI {
		if err := e.InstallGatewayAPICRDs(ctx); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(e.out, "testenv/kube: API server %s ready in %v (dir %s)\n", e.Config.Host, time.Since(start).Round(time.Millisecond), dir)
	return e, nil
}

// startProcesses starts etcd and kube-apiserver on fresh ports and waits
// until the API server is ready.
func (e *Env) startProcesses(ctx context.Context) error {
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	e.etcdURL = "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	e.port = ports[2]
	dataDir := filepath.Join(e.Dir, "etcd")
	_ = os.RemoveAll(dataDir)
	etcd, err := daemon.Start("etcd", filepath.Join(e.binDir, "etcd"), []string{
		"--name=default",
		"--data-dir=" + dataDir,
		"--listen-client-urls=" + e.etcdURL,
		"--advertise-client-urls=" + e.etcdURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=default=" + peerURL,
		"--unsafe-no-fsync=true", // test data: durability does not matter
		"--log-level=warn",
	}, filepath.Join(e.Dir, "etcd.log"))
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.etcd = etcd
	e.mu.Unlock()
	if err := waitHTTP(ctx, etcd, http.DefaultClient, e.etcdURL+"/health", ""); err != nil {
		return err
	}
	return e.StartAPIServer(ctx)
}

// apiserverArgs are kube-apiserver's flags.
func (e *Env) apiserverArgs() []string {
	args := []string{
		"--advertise-address=" + e.host.String(),
		"--bind-address=" + e.host.String(),
		"--secure-port=" + strconv.Itoa(e.port),
		"--cert-dir=" + filepath.Join(e.Dir, "certs"),
		"--etcd-servers=" + e.etcdURL,
		"--tls-cert-file=" + e.pki.servingCertFile,
		"--tls-private-key-file=" + e.pki.servingKeyFile,
		"--client-ca-file=" + e.pki.caFile,
		"--token-auth-file=" + e.pki.tokenFile,
		"--service-account-key-file=" + e.pki.saPublicFile,
		"--service-account-signing-key-file=" + e.pki.saPrivateFile,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		// An allocation range for ClusterIPs; only a node's kube-proxy
		// routes it.
		"--service-cluster-ip-range=" + ServiceCIDR.String(),
		"--authorization-mode=RBAC",
		"--allow-privileged=true",
		"--enable-priority-and-fairness=false",
		"--profiling=false",
	}
	if e.forNode {
		return append(args, "--kubelet-preferred-address-types=InternalIP", "--endpoint-reconciler-type=lease")
	}
	args = append(args, "--endpoint-reconciler-type=none")
	// No controller manager creates the default service account.
	return append(args, "--disable-admission-plugins=ServiceAccount")
}

// StartAPIServer starts kube-apiserver (again, after StopAPIServer) on the
// same port and etcd, and waits until it is ready.
func (e *Env) StartAPIServer(ctx context.Context) error {
	e.mu.Lock()
	if e.apiserver != nil && !e.apiserver.Exited() {
		e.mu.Unlock()
		return errors.New("kube-apiserver is already running")
	}
	p, err := daemon.Start("kube-apiserver", filepath.Join(e.binDir, "kube-apiserver"), e.apiserverArgs(), filepath.Join(e.Dir, "kube-apiserver.log"))
	if err == nil {
		e.apiserver = p
	}
	e.mu.Unlock()
	if err != nil {
		return err
	}
	return waitHTTP(ctx, p, e.httpsClient(), e.URL()+"/readyz", e.pki.token)
}

// StopAPIServer stops kube-apiserver and leaves etcd running (an API
// server outage; StartAPIServer ends it).
func (e *Env) StopAPIServer() {
	e.mu.Lock()
	p := e.apiserver
	e.mu.Unlock()
	p.Stop(10 * time.Second)
}

// URL is the API server's address, https://127.0.0.1:PORT (or the
// NodeIP).
func (e *Env) URL() string { return "https://" + netip.AddrPortFrom(e.host, uint16(e.port)).String() }

// Token is the admin bearer token.
func (e *Env) Token() string { return e.pki.token }

// CAFile is the path of CAData, for components that read it from a file
// (the controller manager's --root-ca-file).
func (e *Env) CAFile() string { return e.pki.caFile }

// ServiceAccountKeyFile is the private key that signs service-account
// tokens (the controller manager's --service-account-private-key-file).
func (e *Env) ServiceAccountKeyFile() string { return e.pki.saPrivateFile }

// CAData is the PEM CA certificate of the serving certificate.
func (e *Env) CAData() []byte { return e.pki.caPEM }

// ClientCertConfig returns an admin rest.Config that authenticates with a
// client certificate (O=system:masters) instead of the token.
func (e *Env) ClientCertConfig() *rest.Config {
	return &rest.Config{
		Host: e.URL(),
		TLSClientConfig: rest.TLSClientConfig{
			CAData: e.pki.caPEM, CertData: e.pki.clientCert, KeyData: e.pki.clientKey,
		},
		QPS: 100, Burst: 200,
	}
}

// InstallIstioCRDs installs the Istio CRDs and waits until they are served.
func (e *Env) InstallIstioCRDs(ctx context.Context) error {
	crds, err := IstioCRDs()
	if err != nil {
		return err
	}
	return InstallCRDs(ctx, e.Dynamic, crds)
}

// InstallGatewayAPICRDs installs the Gateway API standard-channel CRDs.
func (e *Env) InstallGatewayAPICRDs(ctx context.Context) error {
	return e.InstallGatewayAPIChannelCRDs(ctx, GatewayAPIStandard)
}

// InstallGatewayAPIChannelCRDs installs the Gateway API CRDs of channel.
// The channels hold the same CRD names: one replaces the other's already
// installed.
func (e *Env) InstallGatewayAPIChannelCRDs(ctx context.Context, channel GatewayAPIChannel) error {
	crds, err := GatewayAPIChannelCRDs(channel)
	if err != nil {
		return err
	}
	return InstallCRDs(ctx, e.Dynamic, crds)
}

// Stop stops kube-apiserver and etcd and removes Dir. It may be called
// more than once.
func (e *Env) Stop() error {
	e.mu.Lock()
	if e.stopped {
		e.mu.Unlock()
		return nil
	}
	e.stopped = true
	e.mu.Unlock()
	e.stopProcesses()
	return os.RemoveAll(e.Dir)
}

func (e *Env) stopProcesses() {
	e.mu.Lock()
	api, etcd := e.apiserver, e.etcd
	e.apiserver, e.etcd = nil, nil
	e.mu.Unlock()
	api.Stop(10 * time.Second)
	etcd.Stop(10 * time.Second)
}

// writeClients fills Config, the clients and the kubeconfig file.
func (e *Env) writeClients() error {
	e.Config = &rest.Config{
		Host:            e.URL(),
		BearerToken:     e.pki.token,
		TLSClientConfig: rest.TLSClientConfig{CAData: e.pki.caPEM},
		QPS:             100,
		Burst:           200,
	}
	var err error
	if e.Client, err = kubernetes.NewForConfig(e.Config); err != nil {
		return err
	}
	if e.Dynamic, err = dynamic.NewForConfig(e.Config); err != nil {
		return err
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["strait-testenv"] = &clientcmdapi.Cluster{Server: e.URL(), CertificateAuthorityData: e.pki.caPEM}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: e.pki.token}
	kc.Contexts["strait-testenv"] = &clientcmdapi.Context{Cluster: "strait-testenv", AuthInfo: "admin", Namespace: "default"}
	kc.CurrentContext = "strait-testenv"
	e.KubeconfigPath = filepath.Join(e.Dir, "kubeconfig")
	return clientcmd.WriteToFile(*kc, e.KubeconfigPath)
}

func (e *Env) httpsClient() *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(e.pki.caPEM)
	return &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
	}
}

// waitHTTP polls url until it answers 200, p exits, or ctx is done.
func waitHTTP(ctx context.Context, p *daemon.Process, client *http.Client, url, token string) error {
	var last string
	for {
		if p.Exited() {
			return fmt.Errorf("%s exited (%w) before it was ready; log %s:\n%s", p.Name, p.ExitError(), p.LogPath, p.LogTail(20))
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%s: %s", resp.Status, body)
		} else {
			last = err.Error()
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return fmt.Errorf("%s not ready at %s (%s): %w; log %s:\n%s", p.Name, url, last, err, p.LogPath, p.LogTail(20))
		}
	}
}
