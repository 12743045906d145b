package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	pb "istio.io/api/security/v1alpha1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/straitmesh/strait/internal/ca"
	"github.com/straitmesh/strait/internal/ca/token"
	"github.com/straitmesh/strait/internal/kubeapiserver"
	"github.com/straitmesh/strait/internal/meshconfig"
	"github.com/straitmesh/strait/internal/proxypush"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// TestServeSecure runs straitd with its TLS port: the CA root is created in
// --ca-dir, a client that trusts only root-cert.pem and expects Istio's
// Service name istiod.istio-system.svc gets a certificate with a file token
// and xDS over the same TLS connection; /metrics counts the request.
func TestServeSecure(t *testing.T) {
	dir := t.TempDir()
	mesh, err := os.ReadFile(filepath.Join("..", "..", "examples", "demo", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "mesh.yaml"), mesh, 0o644); err != nil {
		t.Fatal(err)
	}
	listen := func() net.Listener {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	xdsLis, monLis, secureLis := listen(), listen(), listen()
	caDir := filepath.Join(t.TempDir(), "ca")
	f := flags{configDir: dir, domain: "cluster.local", namespace: "istio-system", identity: identityFlags{
		secureLis: secureLis, caDir: caDir, cacertsDir: filepath.Join(t.TempDir(), "none"), trustDomain: "cluster.local",
		workloadTTL: time.Hour, maxTTL: 2 * time.Hour,
	}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	push := pushSettings{DebounceAfter: 20 * time.Millisecond, DebounceMax: time.Second, EnableEDSDebounce: true, PushThrottle: 10}
	go func() { served <- serve(ctx, f, push, slog.New(slog.DiscardHandler), xdsLis, monLis) }()
	mon := "http://" + monLis.Addr().String()
	waitHTTP(t, mon+"/healthz/ready", "ok")

	rootPEM, err := os.ReadFile(filepath.Join(caDir, ca.RootCertFile))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(rootPEM) {
		t.Fatal("root-cert.pem holds no certificate")
	}
	key, err := token.LoadKey(filepath.Join(caDir, token.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tok, err := key.Issue(token.Claims{Namespace: "demo", ServiceAccount: "client", IssuedAt: now.Unix(), Expiry: now.Add(time.Hour).Unix()})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(secureLis.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: "istiod.istio-system.svc"})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cctx, ccancel := context.WithTimeout(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok), 10*time.Second)
	defer ccancel()
	wkey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	u, _ := url.Parse("spiffe://cluster.local/ns/demo/sa/client")
	der, _ := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{URIs: []*url.URL{u}}, wkey)
	resp, err := pb.NewIstioCertificateServiceClient(conn).CreateCertificate(cctx, &pb.IstioCertificateRequest{
		Csr: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})),
	})
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode([]byte(resp.CertChain[0]))
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatal(err)
	}
	if got := leaf.NotAfter.Sub(leaf.NotBefore); got > time.Hour+2*time.Minute || got < time.Hour {
		t.Errorf("lifetime %v, want --workload-cert-ttl 1h", got)
	}

	stream, err := discovery.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&discovery.DiscoveryRequest{Node: &core.Node{Id: proxypush.NodeID("10.99.0.10", "client", "demo", "")}, TypeUrl: xdsapi.ClusterType}); err != nil {
		t.Fatal(err)
	}
	if r := recvWithin(t, stream); !hasCluster(t, r, "outbound|80||echo.demo.svc.cluster.local") {
		t.Fatal("CDS over TLS lacks outbound|80||echo.demo.svc.cluster.local")
	}
	waitHTTP(t, mon+"/metrics", "citadel_server_success_cert_issuance_count 1")
	waitHTTP(t, mon+"/metrics", "citadel_server_root_cert_expiry_timestamp")

	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("serve returned %v after cancel, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not return after cancel")
	}
}

func TestSecureServerFlagErrors(t *testing.T) {
	base := identityFlags{caDir: t.TempDir(), workloadTTL: time.Hour, maxTTL: 2 * time.Hour, trustDomain: "cluster.local", secureXDSAddr: "127.0.0.1:0"}
	for _, tt := range []struct {
		mod  func(*identityFlags)
		want string
	}{
		{func(f *identityFlags) { f.workloadTTL = 3 * time.Hour }, "--workload-cert-ttl 3h0m0s is longer than --max-workload-cert-ttl 2h0m0s"},
		{func(f *identityFlags) { f.maxTTL = 0 }, "want positive durations"},
		{func(f *identityFlags) { f.trustDomain = "a/b" }, `--trust-domain "a/b"`},
		{func(f *identityFlags) { f.secureXDSAddr = "nonsense" }, "--secure-xds-addr"},
	} {
		idf := base
		tt.mod(&idf)
		_, err := newSecureServer(flags{namespace: "istio-system", identity: idf}, nil, nil, slog.New(slog.DiscardHandler))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %v, want %q", idf, err, tt.want)
		}
	}
}

// TestKubeModeIdentity runs straitd in Kubernetes mode against a real
// kube-apiserver: the trust bundle appears as istio-ca-root-cert in the
// workload's namespace, and a projected-style service-account token
// (audience istio-ca) gets a certificate for its own identity over the TLS
// port, checked by TokenReview, but not for another service account's.
func TestKubeModeIdentity(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kube-apiserver")
	}
	env := kubeapiserver.Start(t, kubeapiserver.Options{})
	kc := env.Client
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, ns := range []string{"istio-system", "demo"} {
		mustNamespace(ctx, t, kc, ns, nil)
	}
	if _, err := kc.CoreV1().ServiceAccounts("demo").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "client"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	listen := func() net.Listener {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	xdsLis, monLis, secureLis := listen(), listen(), listen()
	caDir := filepath.Join(t.TempDir(), "ca")
	f := flags{kubeconfig: env.KubeconfigPath, kubeMode: true, domain: "cluster.local", namespace: "istio-system",
		identity: identityFlags{secureLis: secureLis, caDir: caDir, trustDomain: "cluster.local", workloadTTL: time.Hour, maxTTL: 2 * time.Hour}}
	push := pushSettings{DebounceAfter: 20 * time.Millisecond, DebounceMax: time.Second, EnableEDSDebounce: true, PushThrottle: 10}
	serveCtx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- serve(serveCtx, f, push, slog.New(slog.DiscardHandler), xdsLis, monLis) }()
	defer func() {
		stop()
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("serve: %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Error("serve did not return after cancel")
		}
	}()
	waitHTTP(t, "http://"+monLis.Addr().String()+"/healthz/ready", "ok")

	rootPEM, err := os.ReadFile(filepath.Join(caDir, ca.RootCertFile))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		cm, err := kc.CoreV1().ConfigMaps("demo").Get(ctx, "istio-ca-root-cert", metav1.GetOptions{})
		if err == nil && cm.Data["root-cert.pem"] == string(rootPEM) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("istio-ca-root-cert in demo: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}

	exp := int64(3600)
	tr, err := kc.CoreV1().ServiceAccounts("demo").CreateToken(ctx, "client", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{"istio-ca"}, ExpirationSeconds: &exp},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(rootPEM)
	conn, err := grpc.NewClient(secureLis.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: "istiod.istio-system.svc"})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := pb.NewIstioCertificateServiceClient(conn)
	cctx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tr.Status.Token)
	csr := func(id string) string {
		k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		u, _ := url.Parse(id)
		der, _ := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{URIs: []*url.URL{u}}, k)
		return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))
	}
	if _, err := client.CreateCertificate(cctx, &pb.IstioCertificateRequest{Csr: csr("spiffe://cluster.local/ns/demo/sa/client")}); err != nil {
		t.Fatalf("own identity: %v", err)
	}
	_, err = client.CreateCertificate(cctx, &pb.IstioCertificateRequest{Csr: csr("spiffe://cluster.local/ns/istio-system/sa/istiod")})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("another identity: %v, want PermissionDenied", err)
	}
}

// TestResolveTrustDomain: the CA signs the mesh config's trust domain
// unless --trust-domain is given, which must then agree with it.
func TestResolveTrustDomain(t *testing.T) {
	mc, err := meshconfig.Parse([]byte("trustDomain: example.org\n"))
	if err != nil {
		t.Fatal(err)
	}
	idf := identityFlags{trustDomain: "cluster.local"}
	if err := resolveTrustDomain(&idf, mc); err != nil || idf.trustDomain != "example.org" {
		t.Errorf("default flag: trust domain %q, err %v; want the mesh config's example.org", idf.trustDomain, err)
	}
	idf = identityFlags{trustDomain: "example.org", trustDomainSet: true}
	if err := resolveTrustDomain(&idf, mc); err != nil {
		t.Errorf("agreeing flag: %v", err)
	}
	idf = identityFlags{trustDomain: "other.org", trustDomainSet: true}
	if err := resolveTrustDomain(&idf, mc); err == nil || !strings.Contains(err.Error(), `--trust-domain "other.org" differs from the mesh config's trustDomain "example.org"`) {
		t.Errorf("conflicting flag: err %v", err)
	}
}

// TestCacertsDirGivenWithoutKey: --cacerts-dir given on the command line
// that does not exist, or holds cacerts files but no ca-key.pem, stops
// straitd naming what is wrong; an empty directory (an optional Secret's
// mount) and the default directory fall back to the self-signed root, as
// istiod does.
func TestCacertsDirGivenWithoutKey(t *testing.T) {
	partial, empty := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(partial, ca.CertFile), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	newFlags := func(dir string, set bool) flags {
		return flags{namespace: "istio-system", identity: identityFlags{
			caDir: filepath.Join(t.TempDir(), "ca"), cacertsDir: dir, cacertsDirSet: set, trustDomain: "cluster.local",
			workloadTTL: time.Hour, maxTTL: 2 * time.Hour,
		}}
	}
	tlsLayout := t.TempDir()
	for _, name := range []string{"tls.crt", "tls.key", "ca.crt"} {
		if err := os.WriteFile(filepath.Join(tlsLayout, name), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name, dir, want string
		explicit        bool
	}{
		{"half a CA", partial, "--cacerts-dir: " + partial + " holds ca-cert.pem but no ca-key.pem", true},
		{"no such directory", filepath.Join(empty, "typo"), "--cacerts-dir: stat " + filepath.Join(empty, "typo"), true},
		{"kubernetes.io/tls layout", tlsLayout, "--cacerts-dir: " + tlsLayout + " holds tls.key, the kubernetes.io/tls layout", true},
		{"kubernetes.io/tls layout in the default directory", tlsLayout, "holds tls.key", false},
	} {
		if _, err := newSecureServer(newFlags(tc.dir, tc.explicit), nil, nil, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.want)
		}
	}
	for _, tc := range []struct {
		name string
		f    flags
	}{
		{"explicit empty directory", newFlags(empty, true)},
		{"default directory with half a CA", newFlags(partial, false)},
	} {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		tc.f.identity.secureLis = l
		s, err := newSecureServer(tc.f, nil, nil, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Errorf("%s: %v (want the self-signed root)", tc.name, err)
			l.Close()
			continue
		}
		s.lis.Close()
		if _, err := os.Stat(filepath.Join(tc.f.identity.caDir, ca.RootCertFile)); err != nil {
			t.Errorf("%s: self-signed root not generated: %v", tc.name, err)
		}
	}
}
