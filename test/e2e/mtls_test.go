package e2e

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/localmesh"
)

// TestMTLS runs two sidecars with workload certificates (file mode, xDS
// and the CA on straitd's TLS port) whose WorkloadEntries carry
// security.istio.io/tlsMode=istio, so straitd gives the client an mTLS
// cluster and the server Istio's PERMISSIVE inbound chains:
//   - requests between the sidecars succeed over TLS, counted by the
//     client cluster's and the server listener's ssl.handshake, also for
//     a TCP service (tcp_proxy over mTLS);
//   - the server's inbound port, dialled from outside the mesh as a TLS
//     client with Istio's ALPN, is TLS 1.3 with the server's SPIFFE ID
//     and refuses a client without a certificate; with a mesh certificate
//     it serves HTTP;
//   - under PERMISSIVE a plaintext client outside the mesh still gets
//     through;
//   - a DestinationRule's tls DISABLE turns the hop to plaintext and
//     ISTIO_MUTUAL back to mTLS;
//   - certificates rotate (SECRET_TTL=6s: about every 5 s) under
//     continuous load without a failed request, and new handshakes get
//     the new certificate.
func TestMTLS(t *testing.T) {
	requireMesh(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	m := startMesh(ctx, t, "mtls", localmesh.Options{SecureXDS: true, AgentEnv: []string{"SECRET_TTL=6s"}, Workloads: []localmesh.Workload{
		{Name: "client", Namespace: "demo", ConfigIP: "10.99.0.10"},
		echoPod("echo-v1", "demo", "10.99.0.11", "v1"),
		echoPod("raw", "demo", "10.99.0.12", "raw"),
	}})
	client, server, raw := m.Pod("client"), m.Pod("echo-v1"), m.Pod("raw")
	const serverID = "spiffe://cluster.local/ns/demo/sa/default"
	roots, caCert, caKey := meshCA(t, m.CADir())

	t.Run("sidecars talk mTLS", func(t *testing.T) {
		before := stat(t, ctx, server, "listener.0.0.0.0_15006.ssl.handshake")
		waitOK(ctx, t, client.NewHTTPClient(false), localmesh.DemoURL)
		if n := stat(t, ctx, client, "cluster.outbound|80||echo.demo.svc.cluster.local.ssl.handshake"); n < 1 {
			t.Errorf("client cluster ssl.handshake = %d, want >= 1", n)
		}
		if n := stat(t, ctx, server, "listener.0.0.0.0_15006.ssl.handshake"); n <= before {
			t.Errorf("server inbound ssl.handshake = %d (was %d): the request did not arrive over TLS", n, before)
		}
		if n := stat(t, ctx, client, "cluster.outbound|80||echo.demo.svc.cluster.local.ssl.connection_error"); n != 0 {
			t.Errorf("client cluster ssl.connection_error = %d, want 0", n)
		}
	})

	t.Run("TCP service over mTLS", func(t *testing.T) {
		waitOK(ctx, t, client.NewHTTPClient(false), "http://240.240.0.11:9000/")
		if n := stat(t, ctx, client, "cluster.outbound|9000||echo-tcp.demo.svc.cluster.local.ssl.handshake"); n < 1 {
			t.Errorf("client TCP cluster ssl.handshake = %d, want >= 1", n)
		}
		if n := stat(t, ctx, raw, "listener.0.0.0.0_15006.ssl.handshake"); n < 1 {
			t.Errorf("TCP server inbound ssl.handshake = %d, want >= 1", n)
		}
	})

	addr := net.JoinHostPort(server.IP, "8080")
	t.Run("inbound mTLS is TLS 1.3 with the server's SPIFFE ID and requires a client certificate", func(t *testing.T) {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr,
			&tls.Config{RootCAs: roots, NextProtos: []string{"istio"}, InsecureSkipVerify: true})
		if err != nil {
			t.Fatalf("TLS to %s: %v", addr, err)
		}
		defer conn.Close()
		st := conn.ConnectionState()
		if st.Version != tls.VersionTLS13 {
			t.Errorf("TLS version %x, want 1.3", st.Version)
		}
		if uris := st.PeerCertificates[0].URIs; len(uris) != 1 || uris[0].String() != serverID {
			t.Errorf("server SANs %v, want %s", uris, serverID)
		}
		if _, err := st.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots}); err != nil {
			t.Errorf("server certificate does not chain to the mesh root: %v", err)
		}
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: echo\r\n\r\n")
		if _, err := http.ReadResponse(bufio.NewReader(conn), nil); err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Errorf("a client without a certificate got %v, want the server's certificate-required alert", err)
		}
	})

	t.Run("inbound mTLS with a mesh certificate serves HTTP", func(t *testing.T) {
		cert := issue(t, caCert, caKey, "spiffe://cluster.local/ns/demo/sa/tester")
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr,
			&tls.Config{RootCAs: roots, NextProtos: []string{"istio-peer-exchange", "istio"}, InsecureSkipVerify: true, Certificates: []tls.Certificate{cert}})
		if err != nil {
			t.Fatalf("mTLS to %s: %v", addr, err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(conn, "GET /hello HTTP/1.1\r\nHost: echo.demo.svc.cluster.local\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"path":"/hello"`) {
			t.Errorf("status %d body %s, want 200 from the echo app", resp.StatusCode, body)
		}
	})

	t.Run("rotation under load drops nothing", func(t *testing.T) {
		load := client.StartLoad(ctx, localmesh.DemoURL, 4)
		cert := issue(t, caCert, caKey, "spiffe://cluster.local/ns/demo/sa/tester")
		serials := map[string]bool{}
		deadline := time.Now().Add(40 * time.Second)
		for len(serials) < 3 && time.Now().Before(deadline) {
			conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr,
				&tls.Config{RootCAs: roots, NextProtos: []string{"istio"}, InsecureSkipVerify: true, Certificates: []tls.Certificate{cert}})
			if err != nil {
				t.Fatalf("mTLS handshake during rotation: %v", err)
			}
			serials[conn.ConnectionState().PeerCertificates[0].SerialNumber.String()] = true
			conn.Close()
			time.Sleep(500 * time.Millisecond)
		}
		split := load.Stop()
		if len(serials) < 3 {
			t.Errorf("server certificates seen: %d, want 3 (two rotations)", len(serials))
		}
		if split.Total == 0 || split.Failures != 0 {
			t.Errorf("load during rotation: %d requests, %d failed (first: %s); want some and none failed", split.Total, split.Failures, split.FirstError)
		}
		t.Logf("%d requests across %d server certificates, %d failed", split.Total, len(serials), split.Failures)
	})

	t.Run("DestinationRule tls DISABLE, then ISTIO_MUTUAL", func(t *testing.T) {
		const echoCluster = "outbound|80||echo.demo.svc.cluster.local"
		setMode := func(mode string, wantTLS bool) {
			t.Helper()
			dr := fmt.Sprintf("apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: echo, namespace: demo}\n"+
				"spec:\n  host: echo.demo.svc.cluster.local\n  trafficPolicy:\n    tls: {mode: %s}\n", mode)
			if err := m.WriteConfig("dr-tls.yaml", []byte(dr)); err != nil {
				t.Fatal(err)
			}
			err := poll(ctx, 30*time.Second, func() error {
				body, err := client.Admin(ctx, "/config_dump")
				if err != nil {
					return err
				}
				var doc any
				if err := json.Unmarshal(body, &doc); err != nil {
					return err
				}
				has, found := clusterHasTLS(doc, echoCluster)
				if !found || has != wantTLS {
					return fmt.Errorf("cluster %s in the client's config: found %v, TLS %v; want TLS %v", echoCluster, found, has, wantTLS)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		plain := client.NewHTTPClient(false)
		setMode("DISABLE", false)
		before := stat(t, ctx, server, "listener.0.0.0.0_15006.ssl.handshake")
		for range 5 {
			waitOK(ctx, t, plain, localmesh.DemoURL)
		}
		if n := stat(t, ctx, server, "listener.0.0.0.0_15006.ssl.handshake"); n != before {
			t.Errorf("server ssl.handshake went %d -> %d under DISABLE: the hop is still TLS", before, n)
		}
		setMode("ISTIO_MUTUAL", true)
		waitOK(ctx, t, plain, localmesh.DemoURL)
		if n := stat(t, ctx, server, "listener.0.0.0.0_15006.ssl.handshake"); n <= before {
			t.Errorf("server ssl.handshake %d (was %d) under ISTIO_MUTUAL: the hop is not TLS", n, before)
		}
	})

	t.Run("PERMISSIVE lets a plaintext client outside the mesh through", func(t *testing.T) {
		// The test process is on the host side of the pods' bridge: no
		// sidecar, plaintext to the pod's port, captured by its inbound.
		waitOK(ctx, t, &http.Client{Timeout: 5 * time.Second}, "http://"+addr+"/")
	})
}

// stat reads one counter from a pod proxy's /stats (0 when absent).
func stat(t *testing.T, ctx context.Context, p *localmesh.Pod, name string) int {
	t.Helper()
	body, err := p.Admin(ctx, "/stats")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `: (\d+)$`)
	mm := re.FindSubmatch(body)
	if mm == nil {
		return 0
	}
	n, _ := strconv.Atoi(string(mm[1]))
	return n
}

// meshCA loads straitd's self-signed root and its key from the mesh's CA
// directory.
func meshCA(t *testing.T, dir string) (*x509.CertPool, *x509.Certificate, any) {
	t.Helper()
	certPEM, err := os.ReadFile(filepath.Join(dir, "ca-cert.pem"))
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, "ca-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	cb, _ := pem.Decode(certPEM)
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := pem.Decode(keyPEM)
	key, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		if key, err = x509.ParseECPrivateKey(kb.Bytes); err != nil {
			t.Fatalf("CA key: %v", err)
		}
	}
	rootPEM, err := os.ReadFile(filepath.Join(dir, "root-cert.pem"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(rootPEM)
	return roots, cert, key
}

// issue signs a workload certificate for a SPIFFE ID with the mesh CA.
func issue(t *testing.T, ca *x509.Certificate, caKey any, id string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(id)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		URIs: []*url.URL{u}, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// clusterHasTLS finds the cluster named name in a config dump and reports
// whether it has a transport socket.
func clusterHasTLS(v any, name string) (hasTLS, found bool) {
	switch t := v.(type) {
	case map[string]any:
		if t["name"] == name {
			if _, ok := t["type"]; ok { // a cluster, not a route's weighted entry
				_, a := t["transport_socket"]
				_, b := t["transportSocket"]
				return a || b, true
			}
		}
		for _, c := range t {
			if h, f := clusterHasTLS(c, name); f {
				return h, f
			}
		}
	case []any:
		for _, c := range t {
			if h, f := clusterHasTLS(c, name); f {
				return h, f
			}
		}
	}
	return false, false
}
