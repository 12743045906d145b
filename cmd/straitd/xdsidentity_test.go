package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	caserver "github.com/straitmesh/strait/internal/ca/server"
	"github.com/straitmesh/strait/internal/ca/token"
	"github.com/straitmesh/strait/internal/proxypush"
)

// TestXDSIdentity: a gRPC stream over TLS carrying a service account
// token (the agent's xDS connection to 15012) authenticates as that
// namespace and service account; the same token over plaintext, a TLS
// stream without one, and a token straitd did not issue (an error) give
// no identity. Real gRPC clients and servers on loopback.
func TestXDSIdentity(t *testing.T) {
	key, err := token.LoadOrCreateKey(filepath.Join(t.TempDir(), token.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	other, err := token.LoadOrCreateKey(filepath.Join(t.TempDir(), token.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	issue := func(k token.Key) string {
		now := time.Now()
		tok, err := k.Issue(token.Claims{Namespace: "web", ServiceAccount: "gw-istio", IssuedAt: now.Add(-time.Minute).Unix(), Expiry: now.Add(time.Hour).Unix()})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	good, forged := issue(key), issue(other)
	authenticate := xdsIdentity(func() []caserver.Authenticator { return []caserver.Authenticator{caserver.FileTokens{Key: key}} })

	type result struct {
		id  *proxypush.Identity
		err error
	}
	var mu sync.Mutex
	var last result
	serve := func(opts ...grpc.ServerOption) string {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s := grpc.NewServer(append(opts, grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			id, err := authenticate(ctx)
			mu.Lock()
			last = result{id, err}
			mu.Unlock()
			return h(ctx, req)
		}))...)
		healthpb.RegisterHealthServer(s, health.NewServer())
		go func() { _ = s.Serve(lis) }()
		t.Cleanup(s.Stop)
		return lis.Addr().String()
	}
	cert, pool := selfSigned(t)
	tlsAddr := serve(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequestClientCert, MinVersion: tls.VersionTLS12})))
	plainAddr := serve()
	tlsCreds := grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: "straitd.test"}))
	plainCreds := grpc.WithTransportCredentials(insecure.NewCredentials())
	for _, tc := range []struct {
		name    string
		addr    string
		creds   grpc.DialOption
		token   string
		want    *proxypush.Identity
		wantErr string
	}{
		{"TLS with a token", tlsAddr, tlsCreds, good, &proxypush.Identity{Namespace: "web", ServiceAccount: "gw-istio"}, ""},
		{"plaintext with a token", plainAddr, plainCreds, good, nil, ""},
		{"TLS without a token", tlsAddr, tlsCreds, "", nil, ""},
		{"TLS with a token of another key", tlsAddr, tlsCreds, forged, nil, "file token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := grpc.NewClient(tc.addr, tc.creds)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if tc.token != "" {
				ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tc.token)
			}
			if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			got := last
			mu.Unlock()
			switch {
			case tc.wantErr != "" && (got.err == nil || !strings.Contains(got.err.Error(), tc.wantErr)):
				t.Errorf("error %v, want one containing %q", got.err, tc.wantErr)
			case tc.wantErr == "" && got.err != nil:
				t.Errorf("error %v", got.err)
			}
			if (got.id == nil) != (tc.want == nil) || (got.id != nil && *got.id != *tc.want) {
				t.Errorf("identity %+v, want %+v", got.id, tc.want)
			}
		})
	}
}

// selfSigned is a serving certificate for straitd.test and a pool that
// trusts it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "straitd.test"}, DNSNames: []string{"straitd.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: k, Leaf: leaf}, pool
}
