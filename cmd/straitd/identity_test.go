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
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	pb "istio.io/api/security/v1alpha1"

	"github.com/straitmesh/strait/internal/ca"
	"github.com/straitmesh/strait/internal/ca/token"
	"github.com/straitmesh/strait/internal/model"
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
	if err := stream.Send(&discovery.DiscoveryRequest{Node: &core.Node{Id: model.NodeID("10.99.0.10", "client", "demo", "")}, TypeUrl: xdsapi.ClusterType}); err != nil {
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
