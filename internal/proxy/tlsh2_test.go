package proxy

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/straitmesh/strait/internal/proxy/bootstrap"
	"github.com/straitmesh/strait/internal/proxy/hcm"
)

// selfSignedLocalhost writes a P-256 certificate for "localhost" and its
// key into dir and returns their paths and a pool trusting it.
func selfSignedLocalhost(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "localhost"},
		DNSNames:     []string{"localhost"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// TestHTTP2OverTLS: a listener whose filter chain terminates TLS
// (DownstreamTlsContext) in front of an HCM with codec_type AUTO serves
// HTTP/2 to clients that negotiate "h2" by ALPN and HTTP/1.1 to the others,
// on the HTTP/1.1 codec; a chain offering only http/1.1 gets curl --http2
// to negotiate and speak HTTP/1.1; every request reaches the backend with
// x-forwarded-proto https. Go's HTTP/2 and HTTP/1.1 clients, and real curl
// where installed.
func TestHTTP2OverTLS(t *testing.T) {
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s body=%s xfp=%s", r.Method, r.URL.Path, body, r.Header.Get("X-Forwarded-Proto"))
	}))
	t.Cleanup(be.Close)
	dir := t.TempDir()
	certFile, keyFile, pool := selfSignedLocalhost(t, dir)
	curl, curlErr := exec.LookPath("curl")

	for _, tc := range []struct {
		codec hcm.Codec
		alpn  string
		want  int // the HTTP major version an h2-capable client gets
	}{
		{hcm.CodecStrait, "[h2, http/1.1]", 2},
		{hcm.CodecStrait, "[http/1.1]", 1},
	} {
		t.Run(fmt.Sprintf("%s alpn %s", tc.codec, tc.alpn), func(t *testing.T) {
			addr := freeAddr(t)
			host, port, _ := net.SplitHostPort(addr)
			beHost, bePort, _ := net.SplitHostPort(be.Listener.Addr().String())
			b, err := bootstrap.Parse([]byte(fmt.Sprintf(`
admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}
static_resources:
  clusters:
  - name: be
    type: STATIC
    connect_timeout: 2s
    load_assignment:
      cluster_name: be
      endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: %s, port_value: %s}}}}]}]
  listeners:
  - name: https
    address: {socket_address: {address: %s, port_value: %s}}
    filter_chains:
    - transport_socket:
        name: envoy.transport_sockets.tls
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
          common_tls_context:
            alpn_protocols: %s
            tls_certificates: [{certificate_chain: {filename: %s}, private_key: {filename: %s}}]
      filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: https
          route_config:
            virtual_hosts: [{name: all, domains: ["*"], routes: [{match: {prefix: /}, route: {cluster: be}}]}]
          http_filters: [{name: envoy.filters.http.router, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}]
`, beHost, bePort, host, port, tc.alpn, certFile, keyFile)))
			if err != nil {
				t.Fatal(err)
			}
			p, err := New(Options{Bootstrap: b, Logger: testLogger(t), AdminAddress: "127.0.0.1:0", HTTPCodec: tc.codec})
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Close() })
			waitFor(t, 10*time.Second, "the listener", func() bool {
				c, err := net.Dial("tcp", addr)
				if err == nil {
					c.Close()
				}
				return err == nil
			})
			url := "https://localhost:" + port + "/x"
			dialLocal := func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, addr)
			}
			tlsConf := &tls.Config{RootCAs: pool, ServerName: "localhost", NextProtos: []string{"h2"}}
			h2 := &http.Client{Timeout: 10 * time.Second, Transport: &http2.Transport{TLSClientConfig: tlsConf,
				DialTLSContext: func(ctx context.Context, network, a string, cfg *tls.Config) (net.Conn, error) {
					c, err := dialLocal(ctx, network, a)
					if err != nil {
						return nil, err
					}
					tc := tls.Client(c, cfg)
					if err := tc.HandshakeContext(ctx); err != nil {
						c.Close()
						return nil, err
					}
					return tc, nil
				}}}
			h1 := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: dialLocal,
				TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "localhost", NextProtos: []string{"http/1.1"}}}}

			if tc.want == 2 {
				resp, err := h2.Post(url, "text/plain", strings.NewReader("ping"))
				if err != nil {
					t.Fatalf("HTTP/2 over TLS: %v", err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || resp.ProtoMajor != 2 || string(body) != "POST /x body=ping xfp=https" {
					t.Fatalf("HTTP/2 over TLS: %s %d %q, want HTTP/2 200 \"POST /x body=ping xfp=https\"", resp.Proto, resp.StatusCode, body)
				}
			}
			resp, err := h1.Get(url)
			if err != nil {
				t.Fatalf("HTTP/1.1 over TLS: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || resp.ProtoMajor != 1 || string(body) != "GET /x body= xfp=https" {
				t.Fatalf("HTTP/1.1 over TLS: %s %d %q", resp.Proto, resp.StatusCode, body)
			}

			if curlErr != nil {
				t.Log("curl not found: the Go clients above stand for it")
				return
			}
			for _, args := range [][]string{{}, {"-d", "hello"}} {
				cmd := exec.Command(curl, append([]string{"-sS", "--max-time", "10", "--http2", "--cacert", certFile,
					"--resolve", "localhost:" + port + ":" + host, "-w", " http=%{http_version}"}, append(args, url)...)...)
				out, err := cmd.CombinedOutput()
				want := "GET /x body= xfp=https http=2"
				if len(args) > 0 {
					want = "POST /x body=hello xfp=https http=2"
				}
				if tc.want == 1 {
					want = strings.TrimSuffix(want, "2") + "1.1"
				}
				if err != nil || string(out) != want {
					t.Fatalf("curl --http2 %v over https: %q, %v; want %q", args, out, err, want)
				}
			}
		})
	}
}
