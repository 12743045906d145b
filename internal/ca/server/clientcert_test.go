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

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	pb "istio.io/api/security/v1alpha1"

	"github.com/straitmesh/strait/internal/ca"
	"github.com/straitmesh/strait/internal/ca/token"
)

// workloadCert has c sign a certificate for id and returns it with its key,
// as an agent holds it.
func workloadCert(t *testing.T, c *ca.CA, id ca.Identity) tls.Certificate {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{URIs: []*url.URL{id.URL()}}, k)
	if err != nil {
		t.Fatal(err)
	}
	chain, err := c.Sign(ca.SignRequest{CSR: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), Identity: id, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	kd, _ := x509.MarshalPKCS8PrivateKey(k)
	cert, err := tls.X509KeyPair([]byte(strings.Join(chain[:len(chain)-1], "")), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kd}))
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// TestCreateCertificateClientCerts: over real TLS, a caller that presents
// a workload certificate of the CA renews it without a token (for its own
// identity only); a certificate of another CA, or straitd's own serving
// certificate, authenticates nobody, and then the token decides.
func TestCreateCertificateClientCerts(t *testing.T) {
	dir := t.TempDir()
	authority, err := ca.Load(ca.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	key, err := token.LoadOrCreateKey(dir + "/" + token.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Options{CA: authority, Authenticators: []Authenticator{FileTokens{Key: key}},
		ClientCerts: &ClientCerts{Roots: authority.Roots, TrustDomain: authority.TrustDomain}})
	if err != nil {
		t.Fatal(err)
	}
	sc, err := ca.NewServingCert(authority, ca.ServingOptions{DNSNames: []string{"localhost"}})
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{GetCertificate: sc.GetCertificate, ClientAuth: tls.RequestClientCert, MinVersion: tls.VersionTLS12})))
	srv.Register(g)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(lis) //nolint:errcheck // ends with Stop below
	t.Cleanup(g.Stop)
	_, port, _ := net.SplitHostPort(lis.Addr().String())
	clientWith := func(certs ...tls.Certificate) pb.IstioCertificateServiceClient {
		cc, err := grpc.NewClient("localhost:"+port, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: authority.CertPool(), ServerName: "localhost", Certificates: certs})))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		return pb.NewIstioCertificateServiceClient(cc)
	}
	other, err := ca.Load(ca.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	demo := ca.Identity{TrustDomain: "cluster.local", Namespace: "demo", ServiceAccount: "client"}
	serving, err := authority.IssueServing(ca.ServingOptions{DNSNames: []string{"localhost"}, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	now := time.Now()
	validToken, err := key.Issue(token.Claims{Namespace: "demo", ServiceAccount: "client", IssuedAt: now.Unix(), Expiry: now.Add(time.Hour).Unix()})
	if err != nil {
		t.Fatal(err)
	}

	withCert := clientWith(workloadCert(t, authority, demo))
	if _, err := call(ctx, withCert, "", csrFor(t, demo.String()), 0, nil); err != nil {
		t.Errorf("renewal with the workload certificate, no token: %v", err)
	}
	wantCode(t, "another identity with the certificate", errOf(call(ctx, withCert, "", csrFor(t, "spiffe://cluster.local/ns/demo/sa/admin"), 0, nil)),
		codes.PermissionDenied, "but the caller is "+demo.String())
	for name, cert := range map[string]tls.Certificate{
		"another CA's certificate":      workloadCert(t, other, demo),
		"straitd's serving certificate": *serving,
	} {
		c := clientWith(cert)
		wantCode(t, name+", no token", errOf(call(ctx, c, "", csrFor(t, demo.String()), 0, nil)), codes.Unauthenticated, "client certificate:")
		if _, err := call(ctx, c, validToken, csrFor(t, demo.String()), 0, nil); err != nil {
			t.Errorf("%s with a valid token: %v", name, err)
		}
	}
	wantCode(t, "no certificate, no token", errOf(call(ctx, clientWith(), "", csrFor(t, demo.String()), 0, nil)), codes.Unauthenticated, "no bearer token")
}

// TestClientCertsAuthenticate: expiry and trust domain, at the clock's
// and the CA's say.
func TestClientCertsAuthenticate(t *testing.T) {
	authority, err := ca.Load(ca.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	cert := workloadCert(t, authority, ca.Identity{TrustDomain: "cluster.local", Namespace: "demo", ServiceAccount: "client"})
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	chain := []*x509.Certificate{leaf}
	td := "cluster.local"
	clock := time.Now()
	cc := &ClientCerts{Roots: authority.Roots, TrustDomain: func() string { return td }, Now: func() time.Time { return clock }}
	if c, err := cc.Authenticate(chain); err != nil || c != (Caller{Namespace: "demo", ServiceAccount: "client"}) {
		t.Fatalf("valid: %+v %v", c, err)
	}
	clock = leaf.NotAfter.Add(time.Second)
	if _, err := cc.Authenticate(chain); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("expired: %v", err)
	}
	clock, td = time.Now(), "other.local"
	if _, err := cc.Authenticate(chain); err == nil || !strings.Contains(err.Error(), "trust domain other.local") {
		t.Errorf("other trust domain: %v", err)
	}
}
