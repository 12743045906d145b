package sds

import (
	"context"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	secretv3 "github.com/envoyproxy/go-control-plane/envoy/service/secret/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/straitmesh/strait/internal/ca"
	"github.com/straitmesh/strait/internal/xdsapi"
)

const spiffeID = "spiffe://cluster.local/ns/demo/sa/client"

// caSigner signs with a real CA as the caller demo/client; fail makes the
// next n requests fail.
type caSigner struct {
	ca    *ca.CA
	fail  atomic.Int32
	calls atomic.Int32
	csrs  chan []byte
}

func (s *caSigner) Sign(_ context.Context, csr []byte, ttl time.Duration) ([]string, error) {
	s.calls.Add(1)
	if s.csrs != nil {
		select {
		case s.csrs <- csr:
		default:
		}
	}
	if s.fail.Load() > 0 {
		s.fail.Add(-1)
		return nil, errors.New("CA unavailable")
	}
	return s.ca.Sign(ca.SignRequest{CSR: csr, Identity: ca.Identity{TrustDomain: "cluster.local", Namespace: "demo", ServiceAccount: "client"}, TTL: ttl})
}

func newSigner(t *testing.T) *caSigner {
	t.Helper()
	c, err := ca.Load(ca.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return &caSigner{ca: c}
}

// TestRotatorRenewsAtEightyPercent runs the rotator on a virtual clock:
// the first certificate is stored at once, nothing is renewed before 80%
// of its lifetime, a renewal (with a new key) is stored right after, and
// a failing CA is retried with backoff while the current certificate
// stays.
func TestRotatorRenewsAtEightyPercent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		signer := newSigner(t)
		store := NewStore()
		r, err := NewRotator(RotatorOptions{Signer: signer, SPIFFEID: spiffeID, TTL: time.Hour, Store: store, Rand: func() float64 { return 0.5 }})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		synctest.Wait()
		first, _ := store.Current()
		if first == nil {
			t.Fatal("no certificate after start")
		}
		if first.Leaf.URIs[0].String() != spiffeID {
			t.Errorf("URI %v", first.Leaf.URIs)
		}
		time.Sleep(47 * time.Minute)
		synctest.Wait()
		if cur, _ := store.Current(); cur.Version != first.Version {
			t.Fatalf("renewed at 47 min of 60 (version %s)", cur.Version)
		}
		time.Sleep(2 * time.Minute) // 49 min: past 48 (80%)
		synctest.Wait()
		second, _ := store.Current()
		if second.Version == first.Version {
			t.Fatal("not renewed at 49 min of 60")
		}
		if second.Leaf.PublicKey.(*ecdsa.PublicKey).Equal(first.Leaf.PublicKey) {
			t.Error("renewal reused the key")
		}
		// The CA fails three times: retried after 200ms, 400ms, 800ms. The
		// second certificate came at 48 min, so it is renewed at 96 min.
		signer.fail.Store(3)
		calls := signer.calls.Load()
		time.Sleep(47*time.Minute + 100*time.Millisecond) // 96:00.1
		synctest.Wait()
		if cur, _ := store.Current(); cur.Version != second.Version || signer.calls.Load() != calls+1 {
			t.Fatalf("after one failure: version %s, calls %d", cur.Version, signer.calls.Load()-calls)
		}
		time.Sleep(200*time.Millisecond + 400*time.Millisecond + 800*time.Millisecond - 150*time.Millisecond) // 96:01.35
		synctest.Wait()
		if signer.calls.Load() != calls+3 {
			t.Fatalf("called %d times by 96:01.35, want 3 (at 96:00, then after 200 and 400 ms)", signer.calls.Load()-calls)
		}
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		if cur, _ := store.Current(); cur.Version == second.Version || signer.calls.Load() != calls+4 {
			t.Fatalf("after the retries: version %s, calls %d (want a new certificate after 4 calls)", cur.Version, signer.calls.Load()-calls)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

func TestRenewJitter(t *testing.T) {
	r, err := NewRotator(RotatorOptions{Signer: &caSigner{}, SPIFFEID: spiffeID, TTL: time.Hour, Store: NewStore()})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	sec := &Secrets{Leaf: &x509.Certificate{NotAfter: now.Add(100 * time.Second)}, IssuedAt: now}
	for _, tt := range []struct {
		rand float64
		want time.Duration
	}{{0, 75 * time.Second}, {0.5, 80 * time.Second}, {0.999999, 85 * time.Second}} {
		r.opts.Rand = func() float64 { return tt.rand }
		if got := r.renewAfter(sec).Round(time.Second); got != tt.want {
			t.Errorf("rand %v: renew after %v, want %v", tt.rand, got, tt.want)
		}
	}
}

func TestRotatorRefusesForeignCertificate(t *testing.T) {
	signer := newSigner(t)
	r, err := NewRotator(RotatorOptions{Signer: signer, SPIFFEID: "spiffe://cluster.local/ns/demo/sa/other", TTL: time.Hour, Store: NewStore()})
	if err != nil {
		t.Fatal(err)
	}
	// The fake CA refuses (the CSR names another identity than the caller).
	if _, err := r.request(context.Background()); err == nil || !strings.Contains(err.Error(), "asks for") {
		t.Fatalf("request: %v", err)
	}
}

// startSDS serves SDS on a Unix socket with a real rotator behind it and
// returns a client of it.
func startSDS(t *testing.T, ttl time.Duration) (secretv3.SecretDiscoveryServiceClient, *Store, *caSigner) {
	t.Helper()
	signer := newSigner(t)
	signer.csrs = make(chan []byte, 16)
	store := NewStore()
	sock := filepath.Join(t.TempDir(), "var/run/secrets/workload-spiffe-uds/socket")
	lis, err := ListenUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(ServerOptions{Store: store})
	go srv.Serve(lis) //nolint:errcheck // ends with Stop
	t.Cleanup(srv.Stop)
	r, err := NewRotator(RotatorOptions{Signer: signer, SPIFFEID: spiffeID, TTL: ttl, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = r.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	cc, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return secretv3.NewSecretDiscoveryServiceClient(cc), store, signer
}

func recv(t *testing.T, stream grpc.BidiStreamingClient[discovery.DiscoveryRequest, discovery.DiscoveryResponse]) *discovery.DiscoveryResponse {
	t.Helper()
	ch := make(chan *discovery.DiscoveryResponse, 1)
	errc := make(chan error, 1)
	go func() {
		r, err := stream.Recv()
		if err != nil {
			errc <- err
			return
		}
		ch <- r
	}()
	select {
	case r := <-ch:
		return r
	case err := <-errc:
		t.Fatalf("recv: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("no SDS response within 20s")
	}
	return nil
}

func decode(t *testing.T, resp *discovery.DiscoveryResponse) map[string]*tlsv3.Secret {
	t.Helper()
	out := map[string]*tlsv3.Secret{}
	for _, a := range resp.Resources {
		var s tlsv3.Secret
		if err := a.UnmarshalTo(&s); err != nil {
			t.Fatal(err)
		}
		out[s.Name] = &s
	}
	return out
}

// TestSDSServesAndPushesRotation reads default and ROOTCA over SDS, checks
// the key matches the certificate, and waits for a renewal (2 s lifetime)
// to be pushed on the same stream.
func TestSDSServesAndPushesRotation(t *testing.T) {
	client, _, signer := startSDS(t, 2*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := client.StreamSecrets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&discovery.DiscoveryRequest{TypeUrl: xdsapi.SecretType, ResourceNames: []string{"default", "ROOTCA"}}); err != nil {
		t.Fatal(err)
	}
	first := recv(t, stream)
	secrets := decode(t, first)
	def, root := secrets["default"].GetTlsCertificate(), secrets["ROOTCA"].GetValidationContext()
	if def == nil || root == nil {
		t.Fatalf("resources %v", secrets)
	}
	chainPEM := def.GetCertificateChain().GetInlineBytes()
	leaf := parseLeaf(t, chainPEM)
	if leaf.URIs[0].String() != spiffeID {
		t.Errorf("URI %v", leaf.URIs)
	}
	if string(root.GetTrustedCa().GetInlineBytes()) != string(signer.ca.TrustBundle()) {
		t.Error("ROOTCA is not the CA's trust bundle")
	}
	keyBlock, _ := pem.Decode(def.GetPrivateKey().GetInlineBytes())
	key, err := x509.ParsePKCS8PrivateKey(keyBlock.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if !key.(*ecdsa.PrivateKey).PublicKey.Equal(leaf.PublicKey) {
		t.Error("the key does not match the certificate")
	}
	// The key never left the agent: the CSR carried only the public key.
	csr := <-signer.csrs
	if strings.Contains(string(csr), "PRIVATE") {
		t.Error("the CSR carries a private key")
	}
	// ACK, then wait for the pushed renewal.
	if err := stream.Send(&discovery.DiscoveryRequest{TypeUrl: xdsapi.SecretType, ResourceNames: []string{"default", "ROOTCA"}, VersionInfo: first.VersionInfo, ResponseNonce: first.Nonce}); err != nil {
		t.Fatal(err)
	}
	second := recv(t, stream)
	if second.VersionInfo == first.VersionInfo || second.Nonce == first.Nonce {
		t.Fatalf("push has version %s nonce %s, same as the first", second.VersionInfo, second.Nonce)
	}
	leaf2 := parseLeaf(t, decode(t, second)["default"].GetTlsCertificate().GetCertificateChain().GetInlineBytes())
	if leaf2.SerialNumber.Cmp(leaf.SerialNumber) == 0 {
		t.Error("pushed the same certificate")
	}
}

func parseLeaf(t *testing.T, chainPEM []byte) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode(chainPEM)
	if b == nil {
		t.Fatal("no PEM in the certificate chain")
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestSDSRefusals(t *testing.T) {
	client, _, _ := startSDS(t, time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, req := range []*discovery.DiscoveryRequest{
		{TypeUrl: xdsapi.SecretType, ResourceNames: []string{"file-cert:/etc/certs/cert.pem"}},
		{TypeUrl: "type.googleapis.com/envoy.config.cluster.v3.Cluster", ResourceNames: []string{"default"}},
	} {
		stream, err := client.StreamSecrets(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := stream.Send(req); err != nil {
			t.Fatal(err)
		}
		_, err = stream.Recv()
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("%v: %v, want InvalidArgument", req.ResourceNames, err)
		}
	}
	// FetchSecrets answers one request.
	resp, err := client.FetchSecrets(ctx, &discovery.DiscoveryRequest{ResourceNames: []string{"ROOTCA"}})
	if err != nil || len(resp.Resources) != 1 {
		t.Fatalf("fetch: %v %v", resp, err)
	}
	// Delta SDS is refused at once.
	d, err := client.DeltaSecrets(ctx)
	if err == nil {
		_, err = d.Recv()
	}
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("delta: %v, want Unimplemented", err)
	}
}

func TestDumpNeverShowsKey(t *testing.T) {
	signer := newSigner(t)
	r, _ := NewRotator(RotatorOptions{Signer: signer, SPIFFEID: spiffeID, TTL: time.Hour, Store: NewStore()})
	sec, err := r.request(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	d := Dump(sec)
	if len(d.Secrets) != 2 || d.Secrets[0].Certs[0].SPIFFEIDs[0] != spiffeID || d.Secrets[1].Certs[0].SHA256 != Fingerprint(signer.ca.Roots()[0]) {
		t.Fatalf("dump %+v", d)
	}
}
