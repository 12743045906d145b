package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	secretv3 "github.com/envoyproxy/go-control-plane/envoy/service/secret/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	pb "istio.io/api/security/v1alpha1"

	"github.com/straitmesh/strait/internal/ca/token"
	"github.com/straitmesh/strait/internal/localmesh"
)

// Rotation soak settings: workload certificates of 70 s are renewed at
// 80 % ± 5 % of their life, every 52.5 to 59.5 s, so that five minutes
// hold at least four renewals whatever the jitter (75 s, renewing at up
// to 64 s, would leave the fourth at the mercy of the first's phase).
const (
	soakSecretTTL = "70s"
	soakDuration  = 5 * time.Minute
	soakRotations = 4
)

// TestCertificateRotationSoak is the issue's acceptance test for rotation:
// two sidecars talk mTLS under continuous load for five minutes while
// their certificates rotate about every 55 s (agent SECRET_TTL=70s), and
// not one request fails. The load is HTTP on keep-alive connections (the
// sidecars' pooled connection outlives rotations) and opaque TCP with a
// new connection per request (a new sidecar-to-sidecar handshake each
// time, with whatever certificate is current). The certificate each
// sidecar serves is read from handshakes with it every second; its serial
// must change at least four times.
func TestCertificateRotationSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("a five-minute soak; skipped under -short")
	}
	requireMesh(t)
	ctx, cancel := context.WithTimeout(context.Background(), soakDuration+3*time.Minute)
	defer cancel()
	m := startMesh(ctx, t, "rotation", localmesh.Options{SecureXDS: true, AgentEnv: []string{"SECRET_TTL=" + soakSecretTTL}, Workloads: []localmesh.Workload{
		{Name: "client", Namespace: "demo", ConfigIP: "10.99.0.10"},
		echoPod("echo", "demo", "10.99.0.11", "v1"),
	}})
	client, server := m.Pod("client"), m.Pod("echo")
	const (
		httpURL = "http://240.240.0.10/"
		tcpURL  = "http://240.240.0.11:9000/"
	)
	// Both paths answer over mTLS before the soak starts.
	for _, u := range []string{httpURL, tcpURL} {
		waitOK(ctx, t, client.NewHTTPClient(false), u)
	}
	handshakesBefore := stat(t, ctx, server, "listener.0.0.0.0_15006.ssl.handshake")

	roots, caCert, caKey := meshCA(t, m.CADir())
	probeCert := issue(t, caCert, caKey, "spiffe://cluster.local/ns/demo/sa/prober")
	// servedSerial handshakes with a sidecar's inbound (Istio ALPN, a
	// mesh certificate) and returns the serial of the certificate it
	// serves. The client pod serves no port: its passthrough chain
	// terminates mTLS all the same.
	servedSerial := func(ip string) (string, error) {
		d := &net.Dialer{Timeout: 5 * time.Second}
		conn, err := tls.DialWithDialer(d, "tcp", net.JoinHostPort(ip, "8080"),
			&tls.Config{RootCAs: roots, NextProtos: []string{"istio-peer-exchange", "istio"}, InsecureSkipVerify: true, Certificates: []tls.Certificate{probeCert}})
		if err != nil {
			return "", err
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.String(), nil
	}

	// The load: HTTP with keep-alive, and TCP with a connection per request.
	httpLoad := client.StartLoad(ctx, httpURL, 4)
	loadCtx, stopLoad := context.WithCancel(ctx)
	var (
		wg                    sync.WaitGroup
		mu                    sync.Mutex
		tcpTotal, tcpFailures int
		tcpFirstError         string
	)
	for range 2 {
		wg.Go(func() {
			c := client.NewHTTPClient(false)
			for loadCtx.Err() == nil {
				err := func() error {
					resp, err := c.Get(tcpURL)
					if err != nil {
						return err
					}
					defer resp.Body.Close()
					if _, err := io.Copy(io.Discard, resp.Body); err != nil {
						return err
					}
					if resp.StatusCode != http.StatusOK {
						return fmt.Errorf("status %d", resp.StatusCode)
					}
					return nil
				}()
				if loadCtx.Err() != nil {
					return // cancelled mid-request: not a failure of the mesh
				}
				mu.Lock()
				tcpTotal++
				if err != nil {
					tcpFailures++
					if tcpFirstError == "" {
						tcpFirstError = err.Error()
					}
				}
				mu.Unlock()
			}
		})
	}

	// Watch the served certificates while the load runs.
	changes := map[string]int{}
	last := map[string]string{}
	pods := map[string]string{"client": client.IP, "echo": server.IP}
	deadline := time.Now().Add(soakDuration)
	tick := time.NewTicker(time.Second)
	for time.Now().Before(deadline) {
		for name, ip := range pods {
			serial, err := servedSerial(ip)
			if err != nil {
				t.Errorf("handshake with %s's sidecar during the soak: %v", name, err)
				continue
			}
			if prev, ok := last[name]; ok && prev != serial {
				changes[name]++
				t.Logf("%s: %s serves a new certificate (serial %s)", time.Now().Format(time.TimeOnly), name, serial)
			}
			last[name] = serial
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
	}
	tick.Stop()
	split := httpLoad.Stop()
	stopLoad()
	wg.Wait()

	t.Logf("soak %v: HTTP %d requests, %d failed; TCP %d requests, %d failed; certificate changes %v",
		soakDuration, split.Total, split.Failures, tcpTotal, tcpFailures, changes)
	if split.Total == 0 || split.Failures != 0 {
		t.Errorf("HTTP load: %d requests, %d failed (first: %s); want some and none failed", split.Total, split.Failures, split.FirstError)
	}
	if tcpTotal == 0 || tcpFailures != 0 {
		t.Errorf("TCP load: %d requests, %d failed (first: %s); want some and none failed", tcpTotal, tcpFailures, tcpFirstError)
	}
	for name := range pods {
		if changes[name] < soakRotations {
			t.Errorf("%s's sidecar changed its certificate %d times in %v, want at least %d (SECRET_TTL=%s)", name, changes[name], soakDuration, soakRotations, soakSecretTTL)
		}
	}
	// Every TCP request was a new handshake between the sidecars.
	if n := stat(t, ctx, server, "listener.0.0.0.0_15006.ssl.handshake"); n-handshakesBefore < tcpTotal {
		t.Errorf("server inbound handshakes grew by %d for %d TCP requests: the hop is not mTLS", n-handshakesBefore, tcpTotal)
	}
}

// TestRenewalOutlivesToken: an agent started with a token that lasts
// seconds keeps renewing its certificate after the token expired, as a VM
// sidecar must with `straitctl token create`'s one-hour default: it
// renews with its current certificate, which straitd's CA accepts as the
// credential (Istio's ClientCertAuthenticator). The expired token itself
// is refused, so the renewals that follow can only have used the
// certificate; mTLS traffic still flows on them.
func TestRenewalOutlivesToken(t *testing.T) {
	requireMesh(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const tokenTTL = 20 * time.Second
	start := time.Now()
	m := startMesh(ctx, t, "rotation", localmesh.Options{SecureXDS: true, TokenTTL: tokenTTL, AgentEnv: []string{"SECRET_TTL=5s"}, Workloads: []localmesh.Workload{
		{Name: "client", Namespace: "demo", ConfigIP: "10.99.0.10"},
		echoPod("echo", "demo", "10.99.0.11", "v1"),
	}})
	client := m.Pod("client")
	roots, _, _ := meshCA(t, m.CADir())
	tok, err := os.ReadFile(filepath.Join(client.Dir(), "var/run/secrets/tokens/istio-token"))
	if err != nil {
		t.Fatal(err)
	}
	key, err := token.LoadKey(filepath.Join(m.CADir(), token.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	claims, err := key.Verify(strings.TrimSpace(string(tok)), start)
	if err != nil {
		t.Fatal(err)
	}
	expired := time.Unix(claims.Expiry, 0)

	// Renewals come every ~4 s (SECRET_TTL 5s); three after the expiry
	// arrive well within 30 s of it.
	sctx, scancel := context.WithDeadline(ctx, expired.Add(30*time.Second))
	defer scancel()
	cc, err := grpc.NewClient("unix://"+client.SDSSocket(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	stream, err := secretv3.NewSecretDiscoveryServiceClient(cc).StreamSecrets(sctx)
	if err != nil {
		t.Fatal(err)
	}
	req := &discovery.DiscoveryRequest{TypeUrl: "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret", ResourceNames: []string{"default", "ROOTCA"}}
	// Certificates issued after the token expired: each renewal is
	// pushed on the stream.
	const want = 3
	var after []*x509.Certificate
	for len(after) < want {
		if err := stream.Send(req); err != nil {
			t.Fatal(err)
		}
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("SDS stream ended after %d renewals past the token's expiry (%s): %v", len(after), expired.Format(time.TimeOnly), err)
		}
		leaf, _ := sdsSecrets(t, resp)
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Fatalf("certificate %s does not verify: %v", leaf.SerialNumber, err)
		}
		if len(leaf.URIs) != 1 || leaf.URIs[0].String() != "spiffe://cluster.local/ns/demo/sa/default" {
			t.Fatalf("certificate for %v", leaf.URIs)
		}
		// NotBefore is backdated one minute (internal/ca).
		if leaf.NotBefore.Add(time.Minute).After(expired) {
			after = append(after, leaf)
			t.Logf("renewed after the token expired: serial %s issued %s", leaf.SerialNumber.Text(16), leaf.NotBefore.Add(time.Minute).Format(time.TimeOnly))
		}
		req = &discovery.DiscoveryRequest{TypeUrl: resp.TypeUrl, ResourceNames: req.ResourceNames, VersionInfo: resp.VersionInfo, ResponseNonce: resp.Nonce}
	}

	t.Run("the token itself is refused", func(t *testing.T) {
		host, _, _ := strings.Cut(m.SecureXDSAddr(), ":")
		conn, err := grpc.NewClient(m.SecureXDSAddr(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: roots, ServerName: host})))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		cctx, ccancel := context.WithTimeout(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+strings.TrimSpace(string(tok))), 10*time.Second)
		defer ccancel()
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		u, _ := url.Parse("spiffe://cluster.local/ns/demo/sa/default")
		der, _ := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{URIs: []*url.URL{u}}, key)
		_, err = pb.NewIstioCertificateServiceClient(conn).CreateCertificate(cctx, &pb.IstioCertificateRequest{Csr: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))})
		if status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "expired") {
			t.Fatalf("CSR with the expired token: %v, want Unauthenticated (expired)", err)
		}
	})
	t.Run("mTLS traffic flows", func(t *testing.T) {
		waitOK(ctx, t, client.NewHTTPClient(false), "http://240.240.0.10/")
	})
}
