package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	secretv3 "github.com/envoyproxy/go-control-plane/envoy/service/secret/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	pb "istio.io/api/security/v1alpha1"

	"github.com/straitmesh/strait/internal/localmesh"
)

// TestIdentity runs the demo mesh in file mode with workload identities:
// every agent reaches straitd over TLS (xDS on the TLS port), gets a
// certificate for spiffe://cluster.local/ns/demo/sa/default with the token
// beside it, serves it over SDS on Istio's workload socket and pushes a
// renewal (SECRET_TTL=6s: every ~5 s) on the open stream; traffic still
// flows; a token may not get another service account's certificate;
// straitctl proxy-config secret shows the certificates.
func TestIdentity(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	m := startMesh(ctx, t, "", localmesh.Options{ConfigDir: examplesDir(t), Workloads: localmesh.DemoWorkloads(),
		SecureXDS: true, AgentEnv: []string{"SECRET_TTL=6s"}})
	rootPEM, err := os.ReadFile(filepath.Join(m.CADir(), "root-cert.pem"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(rootPEM)
	client := m.Pod("client")
	const spiffeID = "spiffe://cluster.local/ns/demo/sa/default"

	t.Run("xDS over TLS serves traffic", func(t *testing.T) {
		resp, err := client.HTTPClient().Get("http://" + localmesh.DemoVIP + "/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
		log, _ := os.ReadFile(m.LogPath("client-agent"))
		if !strings.Contains(string(log), "tls=true") {
			t.Errorf("the client's agent did not dial xDS with TLS:\n%s", tail(string(log), 20))
		}
	})

	t.Run("SDS serves default and ROOTCA and pushes the renewal", func(t *testing.T) {
		cc, err := grpc.NewClient("unix://"+client.SDSSocket(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		sctx, scancel := context.WithTimeout(ctx, 40*time.Second)
		defer scancel()
		stream, err := secretv3.NewSecretDiscoveryServiceClient(cc).StreamSecrets(sctx)
		if err != nil {
			t.Fatal(err)
		}
		names := []string{"default", "ROOTCA"}
		if err := stream.Send(&discovery.DiscoveryRequest{TypeUrl: "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret", ResourceNames: names}); err != nil {
			t.Fatal(err)
		}
		first, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		leaf, bundle := sdsSecrets(t, first)
		if string(bundle) != string(rootPEM) {
			t.Error("ROOTCA is not straitd's root-cert.pem")
		}
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Fatalf("workload certificate does not verify against the mesh root: %v", err)
		}
		if len(leaf.URIs) != 1 || leaf.URIs[0].String() != spiffeID {
			t.Errorf("SAN %v, want %s", leaf.URIs, spiffeID)
		}
		if err := stream.Send(&discovery.DiscoveryRequest{TypeUrl: first.TypeUrl, ResourceNames: names, VersionInfo: first.VersionInfo, ResponseNonce: first.Nonce}); err != nil {
			t.Fatal(err)
		}
		second, err := stream.Recv()
		if err != nil {
			t.Fatalf("no renewal pushed: %v", err)
		}
		leaf2, _ := sdsSecrets(t, second)
		if leaf2.SerialNumber.Cmp(leaf.SerialNumber) == 0 || !leaf2.NotAfter.After(leaf.NotAfter) {
			t.Errorf("push is not a renewal: serial %v -> %v, not after %v -> %v", leaf.SerialNumber, leaf2.SerialNumber, leaf.NotAfter, leaf2.NotAfter)
		}
		if lt := leaf2.NotAfter.Sub(leaf2.NotBefore); lt > 6*time.Second+2*time.Minute {
			t.Errorf("lifetime %v, want SECRET_TTL 6s (+ the 1 min backdating)", lt)
		}
	})

	t.Run("a token cannot get another service account's certificate", func(t *testing.T) {
		tok, err := os.ReadFile(filepath.Join(client.Dir(), "var/run/secrets/tokens/istio-token"))
		if err != nil {
			t.Fatal(err)
		}
		host, _, _ := strings.Cut(m.SecureXDSAddr(), ":")
		cc, err := grpc.NewClient(m.SecureXDSAddr(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: roots, ServerName: host})))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		cctx, ccancel := context.WithTimeout(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+strings.TrimSpace(string(tok))), 10*time.Second)
		defer ccancel()
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		u, _ := url.Parse("spiffe://cluster.local/ns/demo/sa/admin")
		der, _ := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{URIs: []*url.URL{u}}, key)
		_, err = pb.NewIstioCertificateServiceClient(cc).CreateCertificate(cctx, &pb.IstioCertificateRequest{Csr: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))})
		if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "but the caller is "+spiffeID) {
			t.Fatalf("CSR for sa/admin with sa/default's token: %v, want PermissionDenied naming both", err)
		}
	})

	t.Run("a token from straitctl token create gets its identity", func(t *testing.T) {
		out, err := exec.CommandContext(ctx, filepath.Join(binDir, "straitctl"), "token", "create", "--ca-dir", m.CADir(),
			"--namespace", "demo", "--service-account", "reports", "--ttl", "10m").Output()
		if err != nil {
			t.Fatalf("straitctl token create: %v", err)
		}
		host, _, _ := strings.Cut(m.SecureXDSAddr(), ":")
		cc, err := grpc.NewClient(m.SecureXDSAddr(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: roots, ServerName: host})))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		cctx, ccancel := context.WithTimeout(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+strings.TrimSpace(string(out))), 10*time.Second)
		defer ccancel()
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		u, _ := url.Parse("spiffe://cluster.local/ns/demo/sa/reports")
		der, _ := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{URIs: []*url.URL{u}}, key)
		resp, err := pb.NewIstioCertificateServiceClient(cc).CreateCertificate(cctx, &pb.IstioCertificateRequest{Csr: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := pem.Decode([]byte(resp.CertChain[0]))
		leaf, err := x509.ParseCertificate(b.Bytes)
		if err != nil || leaf.URIs[0].String() != u.String() {
			t.Fatalf("certificate %v %v, want %s", leaf, err, u)
		}
	})

	t.Run("straitctl proxy-config secret", func(t *testing.T) {
		ctl := filepath.Join(binDir, "straitctl")
		if _, err := os.Stat(ctl); err != nil {
			t.Fatalf("straitctl not in %s: %v", binDir, err)
		}
		out, err := exec.CommandContext(ctx, ctl, "proxy-config", "secret", "client.demo", "--straitd-addr", m.MonitoringAddr()).CombinedOutput()
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		for _, want := range []string{"default", "Cert Chain", spiffeID, "ROOTCA", "CA", "sha256:"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
	})

	t.Run("CA metrics", func(t *testing.T) {
		resp, err := http.Get("http://" + m.MonitoringAddr() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, want := range []string{"citadel_server_csr_count", "citadel_server_success_cert_issuance_count", "citadel_server_root_cert_expiry_timestamp"} {
			if !strings.Contains(string(body), want+" ") {
				t.Errorf("/metrics lacks %s", want)
			}
		}
	})
}

func sdsSecrets(t *testing.T, resp *discovery.DiscoveryResponse) (*x509.Certificate, []byte) {
	t.Helper()
	var leaf *x509.Certificate
	var bundle []byte
	for _, a := range resp.Resources {
		var s tlsv3.Secret
		if err := a.UnmarshalTo(&s); err != nil {
			t.Fatal(err)
		}
		switch s.Name {
		case "default":
			b, _ := pem.Decode(s.GetTlsCertificate().GetCertificateChain().GetInlineBytes())
			if b == nil {
				t.Fatal("default has no certificate")
			}
			c, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			leaf = c
		case "ROOTCA":
			bundle = s.GetValidationContext().GetTrustedCa().GetInlineBytes()
		}
	}
	if leaf == nil || bundle == nil {
		t.Fatalf("response lacks default or ROOTCA: %d resources", len(resp.Resources))
	}
	return leaf, bundle
}
