package e2e

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	secretv3 "github.com/envoyproxy/go-control-plane/envoy/service/secret/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/straitmesh/strait/internal/istiobin"
	"github.com/straitmesh/strait/internal/kubeapiserver"
	"github.com/straitmesh/strait/internal/netns"
	"github.com/straitmesh/strait/internal/testreq"
)

// TestIdentityFromIstiod runs strait-agent against Istio's own
// pilot-discovery (CA and xDS on its TLS port) on a real kube-apiserver:
// the agent trusts the root istiod publishes in istio-ca-root-cert,
// authenticates with a projected-style service-account token (TokenReview
// by istiod), and serves istiod's certificate for its SPIFFE ID over SDS.
func TestIdentityFromIstiod(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kube-apiserver and Istio's pilot-discovery")
	}
	istiod := istiobin.Path(t, "pilot-discovery", "STRAIT_PILOT_DISCOVERY")
	if binDir == "" {
		testreq.Missing(t, "no binaries: run as root or set STRAIT_BIN_DIR")
	}
	network := netns.NewTestNetwork(t)
	pod := network.AddTestPod(t, "client")
	env := kubeapiserver.Start(t, kubeapiserver.Options{})
	kc := env.Client
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	for _, ns := range []string{"istio-system", "demo"} {
		if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := kc.CoreV1().ServiceAccounts("demo").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "client"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	host := network.HostIP.String()
	ports := make([]string, 4)
	for i := range ports {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			t.Fatal(err)
		}
		_, ports[i], _ = net.SplitHostPort(l.Addr().String())
		l.Close()
	}
	grpcAddr, secureAddr := net.JoinHostPort(host, ports[0]), net.JoinHostPort(host, ports[1])
	httpAddr, monAddr := "127.0.0.1:"+ports[2], "127.0.0.1:"+ports[3]
	dir := t.TempDir()
	meshCfg := filepath.Join(dir, "mesh.yaml")
	if err := os.WriteFile(meshCfg, []byte("defaultConfig:\n  discoveryAddress: "+secureAddr+"\nrootNamespace: istio-system\ntrustDomain: cluster.local\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var istiodLog bytes.Buffer
	cmd := exec.CommandContext(ctx, istiod, "discovery", "--kubeconfig", env.KubeconfigPath, "-a", "istio-system",
		"--meshConfig", meshCfg, "--grpcAddr", grpcAddr, "--secureGRPCAddr", secureAddr, "--httpAddr", httpAddr,
		"--httpsAddr", "", "--monitoringAddr", monAddr, "--log_output_level", "default:info")
	cmd.Env = append(os.Environ(), "POD_NAMESPACE=istio-system", "POD_NAME=istiod-test", "REVISION=default", "CLUSTER_ID=Kubernetes",
		"ENABLE_CA_SERVER=true", "PILOT_ENABLE_GATEWAY_API=false", "INJECTION_WEBHOOK_CONFIG_NAME=", "VALIDATION_WEBHOOK_CONFIG_NAME=",
		"PILOT_ENABLE_STATUS=false", "GOMAXPROCS=2")
	cmd.Stdout, cmd.Stderr = &istiodLog, &istiodLog
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("pilot-discovery:\n%s", tail(istiodLog.String(), 40))
		}
	}()
	waitFor(ctx, t, 180*time.Second, "pilot-discovery ready", func() error {
		resp, err := http.Get("http://" + httpAddr + "/ready")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/ready: %s", resp.Status)
		}
		return nil
	})
	var root string
	waitFor(ctx, t, 60*time.Second, "istio-ca-root-cert in demo", func() error {
		cm, err := kc.CoreV1().ConfigMaps("demo").Get(ctx, "istio-ca-root-cert", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if root = cm.Data["root-cert.pem"]; root == "" {
			return errors.New("the config map has no root-cert.pem")
		}
		return nil
	})
	exp := int64(3600)
	tr, err := kc.CoreV1().ServiceAccounts("demo").CreateToken(ctx, "client", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{"istio-ca"}, ExpirationSeconds: &exp},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	wd := filepath.Join(dir, "pod")
	for rel, data := range map[string]string{
		"var/run/secrets/istio/root-cert.pem": root,
		"var/run/secrets/tokens/istio-token":  tr.Status.Token,
	} {
		p := filepath.Join(wd, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var agentLog bytes.Buffer
	agent, err := pod.Start(ctx, netns.ExecOptions{Dir: wd, Stdout: &agentLog, Stderr: &agentLog, Env: []string{
		"POD_NAME=client-1", "POD_NAMESPACE=demo", "SERVICE_ACCOUNT=client", "INSTANCE_IP=" + pod.IP.String(),
		"ISTIOD_SAN=istiod.istio-system.svc",
		"PROXY_CONFIG={\"discoveryAddress\":\"" + secureAddr + "\",\"binaryPath\":\"" + filepath.Join(binDir, "strait-proxy") + "\",\"configPath\":\"" + filepath.Join(wd, "proxy") + "\"}",
	}}, filepath.Join(binDir, "strait-agent"), "proxy", "sidecar", "--concurrency", "1")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = agent.Kill()
		<-agent.Done()
		if t.Failed() {
			t.Logf("strait-agent:\n%s", tail(agentLog.String(), 40))
		}
	}()
	sock := filepath.Join(wd, "var/run/secrets/workload-spiffe-uds/socket")
	waitFor(ctx, t, 30*time.Second, "the SDS socket", func() error { _, err := os.Stat(sock); return err })
	cc, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	sctx, scancel := context.WithTimeout(ctx, 60*time.Second)
	defer scancel()
	resp, err := secretv3.NewSecretDiscoveryServiceClient(cc).FetchSecrets(sctx, &discovery.DiscoveryRequest{ResourceNames: []string{"default", "ROOTCA"}})
	if err != nil {
		t.Fatalf("SDS fetch (the certificate from istiod): %v", err)
	}
	leaf, bundle := sdsSecrets(t, resp)
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM([]byte(root)) || string(bundle) == "" {
		t.Fatal("no root")
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("istiod's certificate does not verify against istio-ca-root-cert: %v", err)
	}
	if len(leaf.URIs) != 1 || leaf.URIs[0].String() != "spiffe://cluster.local/ns/demo/sa/client" {
		t.Errorf("SAN %v", leaf.URIs)
	}
	// xDS over the same TLS port, authenticated by istiod with the token
	// the agent sends per RPC: istiod's syncz shows that the proxy answered
	// its clusters: an ACK, or a NACK that names a field strait-proxy
	// refuses rather than ignores; any other answer fails the test.
	var lastSyncz string
	defer func() {
		if t.Failed() {
			t.Logf("last istiod syncz: %.3000s", lastSyncz)
		}
	}()
	waitFor(ctx, t, 60*time.Second, "CDS from istiod answered through the agent", func() error {
		resp, err := http.Get("http://" + httpAddr + "/debug/syncz")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var statuses []struct {
			Proxy        string `json:"proxy"`
			ClusterAcked string `json:"cluster_acked"`
			Resources    map[string]struct {
				LastError string `json:"lastError"`
			} `json:"resources"`
		}
		body, _ := io.ReadAll(resp.Body)
		lastSyncz = string(body)
		if err := json.Unmarshal(body, &statuses); err != nil {
			return fmt.Errorf("syncz: %w", err)
		}
		for _, s := range statuses {
			if !strings.HasPrefix(s.Proxy, "client-1.demo") {
				continue
			}
			nack := s.Resources["type.googleapis.com/envoy.config.cluster.v3.Cluster"].LastError
			switch {
			case s.ClusterAcked != "":
				return nil
			case strings.Contains(nack, "not supported"):
				// A refusal by name: strait-proxy heard istiod over TLS
				// and said what it does not implement.
				return nil
			case nack != "":
				t.Fatalf("istiod's clusters NACKed without naming a refused field: %s", nack)
			}
		}
		return errors.New("no ACK or NACK of istiod's clusters from client-1 in syncz")
	})
	t.Logf("istiod issued serial %s for %s, %sh", leaf.SerialNumber.Text(16), leaf.URIs[0], strconv.Itoa(int(leaf.NotAfter.Sub(leaf.NotBefore).Hours())))
}
