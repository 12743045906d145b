package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/straitmesh/strait/internal/ca"
	"github.com/straitmesh/strait/internal/istiobin"
	"github.com/straitmesh/strait/internal/kubeapiserver"
	"github.com/straitmesh/strait/internal/netns"
)

// TestIstioPilotAgentGetsCertificate runs Istio's own pilot-agent (in a
// network namespace, without Envoy: DISABLE_ENVOY, as for proxyless gRPC,
// which makes it fetch its certificate at once and write it to
// OUTPUT_CERTS) against straitd's certificate service over TLS, with a
// real service-account token checked by TokenReview against a real
// kube-apiserver. The certificate it writes must carry its SPIFFE ID and
// chain to straitd's root.
func TestIstioPilotAgentGetsCertificate(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kube-apiserver and Istio's pilot-agent")
	}
	agentBin := istiobin.Path(t, "pilot-agent", "STRAIT_PILOT_AGENT")
	network := netns.NewTestNetwork(t)
	pod := network.AddTestPod(t, "istio")
	env := kubeapiserver.Start(t, kubeapiserver.Options{NoIstioCRDs: true})
	kc := env.Client
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "demo"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kc.CoreV1().ServiceAccounts("demo").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "client"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	authority, err := ca.Load(ca.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Options{CA: authority, Authenticators: []Authenticator{KubeTokens{Client: kc}}, Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	hostIP := network.HostIP.AsSlice()
	sc, err := ca.NewServingCert(authority, ca.ServingOptions{DNSNames: []string{"istiod.istio-system.svc"}, IPs: []net.IP{hostIP}})
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{GetCertificate: sc.GetCertificate, MinVersion: tls.VersionTLS12})))
	srv.Register(g)
	lis, err := net.Listen("tcp", net.JoinHostPort(network.HostIP.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(lis) //nolint:errcheck // ends with Stop
	defer g.Stop()
	caAddr := lis.Addr().String()

	wd := t.TempDir()
	write := func(rel string, data []byte) {
		p := filepath.Join(wd, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("var/run/secrets/istio/root-cert.pem", authority.TrustBundle())
	write("var/run/secrets/tokens/istio-token", []byte(requestToken(ctx, t, kc, "client", "istio-ca")))
	out := filepath.Join(wd, "out") // pilot-agent writes into it, does not create it
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	proc, err := pod.Start(ctx, netns.ExecOptions{Dir: wd, Stdout: &logs, Stderr: &logs, Env: []string{
		"DISABLE_ENVOY=true",
		"OUTPUT_CERTS=" + out,
		"CA_ADDR=" + caAddr,
		"POD_NAME=client-1", "POD_NAMESPACE=demo", "SERVICE_ACCOUNT=client", "INSTANCE_IP=" + pod.IP.String(),
		"PROXY_CONFIG={\"discoveryAddress\":\"" + caAddr + "\",\"statusPort\":15020}",
		"GRPC_XDS_BOOTSTRAP=" + filepath.Join(wd, "grpc-bootstrap.json"),
		"ISTIO_META_GENERATOR=grpc",
	}}, agentBin, "proxy", "sidecar")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = proc.Kill()
		<-proc.Done()
		if t.Failed() {
			t.Logf("pilot-agent output:\n%s", tailBytes(logs.Bytes(), 4000))
		}
	}()

	certPath := filepath.Join(out, "cert-chain.pem")
	deadline := time.Now().Add(60 * time.Second)
	var chainPEM []byte
	for time.Now().Before(deadline) {
		if chainPEM, err = os.ReadFile(certPath); err == nil && len(chainPEM) > 0 {
			break
		}
		select {
		case <-proc.Done():
			t.Fatalf("pilot-agent exited: %v", proc.Wait())
		case <-time.After(100 * time.Millisecond):
		}
	}
	if len(chainPEM) == 0 {
		t.Fatalf("pilot-agent wrote no %s within 60s", certPath)
	}
	block, rest := pem.Decode(chainPEM)
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	inter := x509.NewCertPool()
	for len(rest) > 0 {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if c, err := x509.ParseCertificate(b.Bytes); err == nil {
			inter.AddCert(c)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: authority.CertPool(), Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("pilot-agent's certificate does not verify against straitd's root: %v", err)
	}
	if len(leaf.URIs) != 1 || leaf.URIs[0].String() != "spiffe://cluster.local/ns/demo/sa/client" {
		t.Errorf("SAN %v", leaf.URIs)
	}
	t.Logf("pilot-agent got serial %s, key %T, valid until %s", leaf.SerialNumber.Text(16), leaf.PublicKey, leaf.NotAfter.Format(time.RFC3339)+" ("+strconv.Itoa(int(time.Until(leaf.NotAfter).Hours()))+"h)")
}

func tailBytes(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
