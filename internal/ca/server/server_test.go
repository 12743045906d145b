package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
	pb "istio.io/api/security/v1alpha1"

	"github.com/straitmesh/strait/internal/ca"
	"github.com/straitmesh/strait/internal/ca/token"
)

// fixture is a CA server on loopback behind TLS with a certificate the CA
// issued for "localhost", as straitd serves it on 15012.
type fixture struct {
	ca     *ca.CA
	key    token.Key
	client pb.IstioCertificateServiceClient
	reg    *prometheus.Registry
}

func start(t *testing.T, extra ...Authenticator) *fixture {
	t.Helper()
	dir := t.TempDir()
	c, err := ca.Load(ca.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	key, err := token.LoadOrCreateKey(dir + "/" + token.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	srv, err := New(Options{CA: c, Authenticators: append([]Authenticator{FileTokens{Key: key}}, extra...), Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	sc, err := ca.NewServingCert(c, ca.ServingOptions{DNSNames: []string{"localhost"}})
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{GetCertificate: sc.GetCertificate, MinVersion: tls.VersionTLS12})))
	srv.Register(g)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(lis) //nolint:errcheck // ends with Stop below
	t.Cleanup(g.Stop)
	_, port, _ := net.SplitHostPort(lis.Addr().String())
	cc, err := grpc.NewClient("localhost:"+port, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: c.CertPool(), ServerName: "localhost"})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return &fixture{ca: c, key: key, client: pb.NewIstioCertificateServiceClient(cc), reg: reg}
}

func csrFor(t *testing.T, spiffe string) string {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(spiffe)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{URIs: []*url.URL{u}}, k)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))
}

func (f *fixture) token(t *testing.T, ns, sa string, ttl time.Duration) string {
	t.Helper()
	now := time.Now()
	if ttl < 0 { // an expired token: issued before it expired
		now = now.Add(2 * ttl)
		ttl = -ttl
	}
	tok, err := f.key.Issue(token.Claims{Namespace: ns, ServiceAccount: sa, IssuedAt: now.Unix(), Expiry: now.Add(ttl).Unix()})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func call(ctx context.Context, c pb.IstioCertificateServiceClient, tok, csr string, ttl int64, md map[string]string) (*pb.IstioCertificateResponse, error) {
	if tok != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
	}
	req := &pb.IstioCertificateRequest{Csr: csr, ValidityDuration: ttl}
	if md != nil {
		s := map[string]any{}
		for k, v := range md {
			s[k] = v
		}
		req.Metadata, _ = structpb.NewStruct(s)
	}
	return c.CreateCertificate(ctx, req)
}

func wantCode(t *testing.T, name string, err error, code codes.Code, msg string) {
	t.Helper()
	if status.Code(err) != code || !strings.Contains(status.Convert(err).Message(), msg) {
		t.Errorf("%s: %v, want %v containing %q", name, err, code, msg)
	}
}

func TestCreateCertificateFileTokens(t *testing.T) {
	f := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const id = "spiffe://cluster.local/ns/demo/sa/client"
	resp, err := call(ctx, f.client, f.token(t, "demo", "client", time.Hour), csrFor(t, id), 3600, map[string]string{"WorkloadName": "client-1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.CertChain) != 2 {
		t.Fatalf("chain %d elements, want leaf and root", len(resp.CertChain))
	}
	block, _ := pem.Decode([]byte(resp.CertChain[0]))
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: f.ca.CertPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatal(err)
	}
	if leaf.URIs[0].String() != id || leaf.NotAfter.Sub(leaf.NotBefore) > time.Hour+2*time.Minute {
		t.Errorf("leaf %v, %v..%v", leaf.URIs, leaf.NotBefore, leaf.NotAfter)
	}
	if resp.CertChain[1] != string(f.ca.TrustBundle()) {
		t.Error("last element is not the trust bundle")
	}

	clientTok := f.token(t, "demo", "client", time.Hour)
	wantCode(t, "CSR for another service account", errOf(call(ctx, f.client, clientTok, csrFor(t, "spiffe://cluster.local/ns/demo/sa/admin"), 0, nil)),
		codes.PermissionDenied, "the CSR asks for spiffe://cluster.local/ns/demo/sa/admin but the caller is spiffe://cluster.local/ns/demo/sa/client")
	wantCode(t, "CSR for another namespace", errOf(call(ctx, f.client, f.token(t, "prod", "client", time.Hour), csrFor(t, id), 0, nil)),
		codes.PermissionDenied, "caller is spiffe://cluster.local/ns/prod/sa/client")
	wantCode(t, "no token", errOf(call(ctx, f.client, "", csrFor(t, id), 0, nil)), codes.Unauthenticated, "no bearer token")
	wantCode(t, "expired token", errOf(call(ctx, f.client, f.token(t, "demo", "client", -time.Minute), csrFor(t, id), 0, nil)), codes.Unauthenticated, "file token: token expired")
	other, _ := token.LoadOrCreateKey(t.TempDir() + "/k")
	now := time.Now()
	foreign, _ := other.Issue(token.Claims{Namespace: "demo", ServiceAccount: "client", IssuedAt: now.Unix(), Expiry: now.Add(time.Hour).Unix()})
	wantCode(t, "token of another straitd", errOf(call(ctx, f.client, foreign, csrFor(t, id), 0, nil)), codes.Unauthenticated, "signature does not verify")
	wantCode(t, "a JWT with no Kubernetes authenticator", errOf(call(ctx, f.client, "eyJhbGciOiJSUzI1NiJ9.e30.c2ln", csrFor(t, id), 0, nil)), codes.Unauthenticated, "none of this straitd's authenticators (file token)")
	wantCode(t, "lifetime above the maximum", errOf(call(ctx, f.client, clientTok, csrFor(t, id), int64(ca.DefaultMaxTTL/time.Second)+1, nil)), codes.InvalidArgument, "longer than the maximum")
	wantCode(t, "impersonation", errOf(call(ctx, f.client, clientTok, csrFor(t, id), 0, map[string]string{"ImpersonatedIdentity": "spiffe://cluster.local/ns/demo/sa/admin"})), codes.PermissionDenied, "ImpersonatedIdentity")
	wantCode(t, "external signer", errOf(call(ctx, f.client, clientTok, csrFor(t, id), 0, map[string]string{"CertSigner": "x"})), codes.InvalidArgument, "CertSigner")
	wantCode(t, "garbage CSR", errOf(call(ctx, f.client, clientTok, "nope", 0, nil)), codes.InvalidArgument, "does not parse")

	for name, want := range map[string]float64{
		"citadel_server_csr_count":                    11,
		"citadel_server_success_cert_issuance_count":  1,
		"citadel_server_authentication_failure_count": 5,
	} {
		if got := gather(t, f.reg, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if got := gather(t, f.reg, "citadel_server_csr_sign_err_count"); got != 5 {
		t.Errorf("citadel_server_csr_sign_err_count = %v, want 5", got)
	}
	if got := gather(t, f.reg, "citadel_server_root_cert_expiry_timestamp"); got != float64(f.ca.RootExpiry().Unix()) {
		t.Errorf("root expiry gauge %v, want %v", got, f.ca.RootExpiry().Unix())
	}
	if got := gather(t, f.reg, "citadel_server_root_cert_expiry_seconds"); got < float64(ca.DefaultRootTTL/time.Second)-120 {
		t.Errorf("root expiry seconds %v", got)
	}
}

func errOf(_ *pb.IstioCertificateResponse, err error) error { return err }

// gather sums every series of the named metric.
func gather(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		var sum float64
		for _, m := range mf.GetMetric() {
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
		return sum
	}
	t.Fatalf("metric %s not registered", name)
	return 0
}
