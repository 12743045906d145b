package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/localmesh"
)

// TestTLSOrigination runs a client sidecar and an HTTPS server outside
// the mesh (a Go TLS server in its own network namespace, no sidecar),
// known to the mesh by a ServiceEntry. The application calls
// http://api.tls.test:PORT in plaintext; the DestinationRule's tls makes
// the sidecar originate TLS with files on the client's host, served to
// the proxy by its agent over SDS (file-cert:/file-root:):
//   - SIMPLE with the server's CA: 200, the server saw the SNI;
//   - MUTUAL (port-level) with a client certificate the server
//     requires: 200, the server saw the client's certificate; SIMPLE to
//     that port (no client certificate): 503;
//   - a CA that did not sign the server's certificate: 503, counted as
//     ssl.connection_error on the cluster;
//   - subjectAltNames that the server's certificate lacks: 503;
//   - caCrl: a current CRL without the server's certificate 200, one
//     listing it 503;
//   - insecureSkipVerify with the wrong CA's server: 200.
func TestTLSOrigination(t *testing.T) {
	requireMesh(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	m := startMesh(ctx, t, "tlsorig", localmesh.Options{Workloads: []localmesh.Workload{{Name: "client", Namespace: "egress", ConfigIP: "10.93.0.10"}}})
	client := m.Pod("client")

	// The PKI: serverCA signs the server, clientCA the client, otherCA
	// nothing the server shows.
	serverCA, clientCA, otherCA := newTestCA(t, "server CA"), newTestCA(t, "client CA"), newTestCA(t, "other CA")
	serverCert := serverCA.issue(t, "api.tls.test", []string{"api.tls.test"}, x509.ExtKeyUsageServerAuth)
	clientCert := clientCA.issue(t, "strait-client", nil, x509.ExtKeyUsageClientAuth)
	certs := filepath.Join(client.Dir(), "certs")
	files := map[string][]byte{
		"server-ca.pem": serverCA.certPEM, "other-ca.pem": otherCA.certPEM,
		"client.pem": clientCert.certPEM, "client-key.pem": clientCert.keyPEM,
	}
	if err := os.MkdirAll(certs, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		p := filepath.Join(certs, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		// The agent reads them as the proxy's user.
		if err := os.Chown(p, client.ProxyUID(), client.ProxyUID()); err != nil {
			t.Fatal(err)
		}
	}

	// The HTTPS server: 8443 takes any client, 9443 requires a client
	// certificate from clientCA. Both answer with what they saw.
	srvPod, err := m.Network().AddPod(ctx, "tlsserver")
	if err != nil {
		t.Fatal(err)
	}
	clientPool := x509.NewCertPool()
	clientPool.AddCert(clientCA.cert)
	for _, l := range []struct {
		port string
		auth tls.ClientAuthType
	}{{"8443", tls.NoClientCert}, {"9443", tls.RequireAndVerifyClientCert}} {
		lis, err := srvPod.Listen(ctx, "tcp", ":"+l.port)
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				seen := tlsSeen{Path: r.URL.Path, SNI: r.TLS.ServerName, Port: l.port}
				if len(r.TLS.PeerCertificates) > 0 {
					seen.Client = r.TLS.PeerCertificates[0].Subject.CommonName
				}
				_ = json.NewEncoder(w).Encode(seen)
			}),
			TLSConfig:         &tls.Config{Certificates: []tls.Certificate{serverCert.tls}, ClientAuth: l.auth, ClientCAs: clientPool},
			ReadHeaderTimeout: 5 * time.Second,
		}
		go func() { _ = srv.ServeTLS(lis, "", "") }()
		t.Cleanup(func() { srv.Close() })
	}

	const se = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: api, namespace: egress}
spec:
  hosts: [api.tls.test]
  addresses: [240.240.9.1]
  ports:
  - {number: 8443, name: http, protocol: HTTP}
  - {number: 9443, name: http-mtls, protocol: HTTP}
  location: MESH_EXTERNAL
  resolution: STATIC
  endpoints: [{address: %s}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: api, namespace: egress}
spec:
  host: api.tls.test
  trafficPolicy:
%s`
	setTLS := func(t *testing.T, policy string) {
		t.Helper()
		cfg := fmt.Sprintf(se, srvPod.IP, strings.ReplaceAll(policy, "CERTS", certs))
		if err := m.WriteConfig("tlsorig.yaml", []byte(cfg)); err != nil {
			t.Fatal(err)
		}
	}
	hc := client.HTTPClient()
	get := func(port string) (int, tlsSeen, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://240.240.9.1:"+port+"/hello", nil)
		if err != nil {
			return 0, tlsSeen{}, err
		}
		req.Host = "api.tls.test:" + port
		resp, err := hc.Do(req)
		if err != nil {
			return 0, tlsSeen{}, err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var seen tlsSeen
		if resp.StatusCode == http.StatusOK {
			if err := json.Unmarshal(body, &seen); err != nil {
				return resp.StatusCode, seen, fmt.Errorf("body %q: %w", body, err)
			}
		}
		return resp.StatusCode, seen, nil
	}
	// waitStatus waits until a request to port answers want (the config
	// applied), then checks it answers want on five requests in a row.
	waitStatus := func(t *testing.T, port string, want int) tlsSeen {
		t.Helper()
		var seen tlsSeen
		err := poll(ctx, 30*time.Second, func() error {
			code, s, err := get(port)
			if err != nil {
				return err
			}
			if code != want {
				return fmt.Errorf("status %d, want %d", code, want)
			}
			seen = s
			return nil
		})
		if err != nil {
			t.Fatalf("GET :%s: %v", port, err)
		}
		for range 5 {
			if code, _, err := get(port); err != nil || code != want {
				t.Fatalf("GET :%s after the config applied: %d %v, want %d", port, code, err, want)
			}
		}
		return seen
	}

	t.Run("SIMPLE with the server's CA", func(t *testing.T) {
		setTLS(t, "    tls: {mode: SIMPLE, caCertificates: CERTS/server-ca.pem}\n")
		seen := waitStatus(t, "8443", http.StatusOK)
		if seen.SNI != "api.tls.test" || seen.Path != "/hello" || seen.Client != "" {
			t.Errorf("server saw %+v, want SNI api.tls.test, path /hello, no client certificate", seen)
		}
		if n := stat(t, ctx, client, "cluster.outbound|8443||api.tls.test.ssl.handshake"); n < 1 {
			t.Errorf("cluster ssl.handshake = %d, want >= 1", n)
		}
	})

	t.Run("SIMPLE to a port that requires a client certificate", func(t *testing.T) {
		waitStatus(t, "9443", http.StatusServiceUnavailable)
	})

	t.Run("MUTUAL per port with a client certificate", func(t *testing.T) {
		setTLS(t, "    tls: {mode: SIMPLE, caCertificates: CERTS/server-ca.pem}\n"+
			"    portLevelSettings:\n    - port: {number: 9443}\n"+
			"      tls: {mode: MUTUAL, clientCertificate: CERTS/client.pem, privateKey: CERTS/client-key.pem, caCertificates: CERTS/server-ca.pem, sni: api.tls.test}\n")
		seen := waitStatus(t, "9443", http.StatusOK)
		if seen.Client != "strait-client" || seen.Port != "9443" {
			t.Errorf("server saw %+v, want the client certificate strait-client on 9443", seen)
		}
		// The other port keeps the rule's SIMPLE.
		if seen := waitStatus(t, "8443", http.StatusOK); seen.Client != "" {
			t.Errorf("8443 got a client certificate %q: the port-level MUTUAL leaked", seen.Client)
		}
	})

	// Each refusal below starts from a working rule, so that its 503 comes
	// from the change it makes.
	baseline := func(t *testing.T) {
		t.Helper()
		setTLS(t, "    tls: {mode: SIMPLE, caCertificates: CERTS/server-ca.pem}\n")
		waitStatus(t, "8443", http.StatusOK)
	}

	t.Run("wrong CA is 503", func(t *testing.T) {
		before := stat(t, ctx, client, "cluster.outbound|8443||api.tls.test.ssl.connection_error")
		setTLS(t, "    tls: {mode: SIMPLE, caCertificates: CERTS/other-ca.pem}\n")
		waitStatus(t, "8443", http.StatusServiceUnavailable)
		if n := stat(t, ctx, client, "cluster.outbound|8443||api.tls.test.ssl.connection_error"); n <= before {
			t.Errorf("cluster ssl.connection_error %d (was %d): the 503 was not a failed handshake", n, before)
		}
	})

	t.Run("subjectAltNames the server lacks is 503", func(t *testing.T) {
		baseline(t)
		setTLS(t, "    tls: {mode: SIMPLE, caCertificates: CERTS/server-ca.pem, subjectAltNames: [other.tls.test]}\n")
		waitStatus(t, "8443", http.StatusServiceUnavailable)
	})

	t.Run("caCrl: a revoked server certificate is 503, a current CRL without it 200", func(t *testing.T) {
		for _, c := range []struct {
			name string
			crl  []byte
		}{{"revoked.crl", serverCA.crl(t, serverCert.serial)}, {"clean.crl", serverCA.crl(t)}} {
			p := filepath.Join(certs, c.name)
			if err := os.WriteFile(p, c.crl, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		baseline(t)
		setTLS(t, "    tls: {mode: SIMPLE, caCertificates: CERTS/server-ca.pem, caCrl: CERTS/clean.crl}\n")
		// The baseline answers 200 too: wait for the CRL to be in the
		// client's cluster, so that the 200 is the clean CRL's.
		waitDump(ctx, t, client, quote(filepath.Join(certs, "clean.crl"))...)
		waitStatus(t, "8443", http.StatusOK)
		setTLS(t, "    tls: {mode: SIMPLE, caCertificates: CERTS/server-ca.pem, caCrl: CERTS/revoked.crl}\n")
		waitStatus(t, "8443", http.StatusServiceUnavailable)
	})

	t.Run("insecureSkipVerify accepts any server", func(t *testing.T) {
		setTLS(t, "    tls: {mode: SIMPLE, caCertificates: CERTS/other-ca.pem}\n")
		waitStatus(t, "8443", http.StatusServiceUnavailable)
		setTLS(t, "    tls: {mode: SIMPLE, insecureSkipVerify: true}\n")
		if seen := waitStatus(t, "8443", http.StatusOK); seen.SNI != "api.tls.test" {
			t.Errorf("server saw %+v", seen)
		}
	})
}

// tlsSeen is what the test's HTTPS server saw of a request.
type tlsSeen struct {
	Path, SNI, Client, Port string
}

// testCA is a throw-away certificate authority.
type testCA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
}

type testCert struct {
	tls             tls.Certificate
	certPEM, keyPEM []byte
	serial          *big.Int
}

// crl is a PEM revocation list of ca that lists serials.
func (ca *testCA) crl(t *testing.T, serials ...*big.Int) []byte {
	t.Helper()
	var revoked []x509.RevocationListEntry
	for _, s := range serials {
		revoked = append(revoked, x509.RevocationListEntry{SerialNumber: s, RevocationTime: time.Now()})
	}
	der, err := x509.CreateRevocationList(rand.Reader, &x509.RevocationList{Number: big.NewInt(time.Now().UnixNano()),
		ThisUpdate: time.Now().Add(-time.Minute), NextUpdate: time.Now().Add(time.Hour), RevokedCertificateEntries: revoked}, ca.cert, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: der})
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

func (ca *testCA) issue(t *testing.T, cn string, dns []string, usage x509.ExtKeyUsage) testCert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn}, DNSNames: dns,
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	c := testCert{certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), serial: tmpl.SerialNumber}
	if c.tls, err = tls.X509KeyPair(c.certPEM, c.keyPEM); err != nil {
		t.Fatal(err)
	}
	return c
}
