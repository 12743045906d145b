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
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/testreq"
)

// The addresses of TestGatewayLocalUp's pods (their own /24).
const (
	gwAddr     = "10.213.91.30"
	gwEchoAddr = "10.213.91.11"
)

// gatewayMesh is the config of TestGatewayLocalUp; CERTS is replaced by
// the directory of the test's certificates. echo (namespace shop) is
// STRICT, and also behind headless (resolution NONE, as a Kubernetes
// headless Service); secure serves HTTPS itself with a certificate for
// secure.example.com that only it has; the gateway pod is the
// WorkloadEntry that Gateway ingress/gw selects.
const gatewayMesh = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: echo, namespace: shop}
spec:
  hosts: [echo.shop.svc.cluster.local]
  addresses: [240.240.91.10]
  ports:
  - {number: 80, name: http, protocol: HTTP, targetPort: 8080}
  location: MESH_INTERNAL
  resolution: STATIC
  workloadSelector: {labels: {app: echo}}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: secure, namespace: shop}
spec:
  hosts: [secure.shop.svc.cluster.local]
  addresses: [240.240.91.11]
  ports:
  - {number: 8443, name: tls, protocol: TLS}
  location: MESH_INTERNAL
  resolution: STATIC
  workloadSelector: {labels: {app: secure}}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: headless, namespace: shop}
spec:
  hosts: [headless.shop.svc.cluster.local]
  ports:
  - {number: 8080, name: http, protocol: HTTP}
  location: MESH_INTERNAL
  resolution: NONE
  workloadSelector: {labels: {app: echo}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: echo, namespace: shop}
spec:
  address: 10.213.91.11
  serviceAccount: echo
  labels: {app: echo, security.istio.io/tlsMode: istio}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata:
  name: secure
  namespace: shop
  annotations:
    local.strait.io/app: "strait-echo --addr :8443 --version tls-backend --tls-cert CERTS/secure.crt --tls-key CERTS/secure.key"
spec:
  address: 10.213.91.12
  serviceAccount: secure
  labels: {app: secure, security.istio.io/tlsMode: istio}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: ingressgateway, namespace: ingress}
spec:
  address: 10.213.91.30
  serviceAccount: ingressgateway
  labels: {istio: ingressgateway}
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: strict, namespace: shop}
spec:
  mtls: {mode: STRICT}
---
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: gw, namespace: ingress}
spec:
  selector: {istio: ingressgateway}
  servers:
  - port: {number: 80, name: http, protocol: HTTP}
    hosts: ["*"]
  - port: {number: 8080, name: http-redirect, protocol: HTTP}
    hosts: [www.example.com]
    tls: {httpsRedirect: true}
  - port: {number: 443, name: https-www, protocol: HTTPS}
    hosts: [www.example.com]
    tls: {mode: SIMPLE, serverCertificate: CERTS/www.crt, privateKey: CERTS/www.key}
  - port: {number: 443, name: https-mtls, protocol: HTTPS}
    hosts: [mtls.example.com]
    tls: {mode: MUTUAL, serverCertificate: CERTS/mtls.crt, privateKey: CERTS/mtls.key, caCertificates: CERTS/ca.crt}
  - port: {number: 443, name: https-api, protocol: HTTPS}
    hosts: [api.example.com]
    tls: {mode: SIMPLE, credentialName: api-cert}
  - port: {number: 443, name: https-missing, protocol: HTTPS}
    hosts: [missing.example.com]
    tls: {mode: SIMPLE, credentialName: no-such-cert}
  - port: {number: 443, name: https-malformed, protocol: HTTPS}
    hosts: [malformed.example.com]
    tls: {mode: SIMPLE, credentialName: bad-cert}
  - port: {number: 8444, name: https-alone, protocol: HTTPS}
    hosts: [alone.example.com]
    tls: {mode: SIMPLE, credentialName: no-such-cert}
  - port: {number: 443, name: tls-pass, protocol: TLS}
    hosts: [secure.example.com]
    tls: {mode: PASSTHROUGH}
  - port: {number: 8445, name: https-crl, protocol: HTTPS}
    hosts: [api.example.com]
    tls: {mode: MUTUAL, credentialName: crl-cert}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: web, namespace: shop}
spec:
  hosts: [www.example.com, mtls.example.com, api.example.com]
  gateways: [ingress/gw]
  http:
  - route:
    - destination: {host: echo}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: retries, namespace: shop}
spec:
  hosts: [retry.example.com]
  gateways: [ingress/gw]
  http:
  - route:
    - destination: {host: echo}
    retries: {attempts: 3, retryOn: "connect-failure,refused-stream,unavailable,cancelled,500"}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: headless, namespace: shop}
spec:
  hosts: [headless.example.com]
  gateways: [ingress/gw]
  http:
  - route:
    - destination: {host: headless.shop.svc.cluster.local, port: {number: 8080}}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: passthrough, namespace: ingress}
spec:
  hosts: [secure.example.com]
  gateways: [gw]
  tls:
  - match:
    - sniHosts: [secure.example.com]
    route:
    - destination: {host: secure.shop.svc.cluster.local, port: {number: 8443}}
`

// gatewayCerts writes a CA and, signed by it, server certificates for
// www, mtls and secure.example.com, a client certificate, a second one
// (client-ok) and a revocation list that revokes the first
// (revoked.crl), into a directory every user may read (the gateway's
// agent and the secure pod's app run as their pods' own users), removed
// when the test ends.
func gatewayCerts(t *testing.T) (dir string, pool *x509.CertPool, client tls.Certificate) {
	t.Helper()
	dir, err := os.MkdirTemp("", "strait-gw-certs-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gateway test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	pool = x509.NewCertPool()
	pool.AddCert(ca)
	write := func(name string, block *pem.Block) {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(block), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("ca.crt", &pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	issue := func(name, dns string, usage x509.ExtKeyUsage, serial int64) tls.Certificate {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: dns}, DNSNames: []string{dns},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, _ := x509.MarshalPKCS8PrivateKey(key)
		write(name+".crt", &pem.Block{Type: "CERTIFICATE", Bytes: der})
		write(name+".key", &pem.Block{Type: "PRIVATE KEY", Bytes: kder})
		return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	}
	issue("www", "www.example.com", x509.ExtKeyUsageServerAuth, 2)
	issue("mtls", "mtls.example.com", x509.ExtKeyUsageServerAuth, 3)
	issue("secure", "secure.example.com", x509.ExtKeyUsageServerAuth, 4)
	issue("api", "api.example.com", x509.ExtKeyUsageServerAuth, 6)
	client = issue("client", "client.example.com", x509.ExtKeyUsageClientAuth, 5)
	issue("client-ok", "client-ok.example.com", x509.ExtKeyUsageClientAuth, 7)
	crl, err := x509.CreateRevocationList(rand.Reader, &x509.RevocationList{Number: big.NewInt(1), ThisUpdate: time.Now().Add(-time.Minute),
		NextUpdate: time.Now().Add(24 * time.Hour), RevokedCertificateEntries: []x509.RevocationListEntry{{SerialNumber: big.NewInt(5), RevocationTime: time.Now().Add(-time.Minute)}}}, ca, caKey)
	if err != nil {
		t.Fatal(err)
	}
	write("revoked.crl", &pem.Block{Type: "X509 CRL", Bytes: crl})
	return dir, pool, client
}

// gatewayClient is an HTTP client from the host that dials addr (the
// gateway's address and port) whatever the URL's host, so that the URL
// carries the Host and the SNI, and never follows redirects.
func gatewayClient(addr string, tlsConfig *tls.Config) *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second}
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return d.DialContext(ctx, network, addr)
			},
			TLSClientConfig: tlsConfig,
			// A new connection per request: each case is its own TLS
			// handshake.
			DisableKeepAlives: true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// gatewayGet sends GET url through client and decodes strait-echo's reply
// (nil when the answer is not one).
func gatewayGet(client *http.Client, url string) (*http.Response, *echoReply, error) {
	resp, err := client.Get(url)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var r echoReply
	if json.Unmarshal(body, &r) != nil || r.Host == "" {
		return resp, nil, nil
	}
	return resp, &r, nil
}

// TestGatewayLocalUp runs the real `straitctl local up` on a mesh with an
// Istio ingress Gateway and calls it from the host with real clients:
// plaintext HTTP to a STRICT service (the gateway → sidecar hop is mTLS
// with the gateway's own identity: the app sees it in
// x-forwarded-client-cert, which only the server sidecar's mTLS
// termination sets, and the sidecar refuses the host's plaintext),
// HTTPS SIMPLE with a certificate the client verifies, MUTUAL with and
// without a client certificate, HTTPS with a credentialName (files laid
// out as the Secret's keys; a server whose credential is missing fails
// alone), httpsRedirect's 301, and a TLS backend
// reached through PASSTHROUGH by SNI (the client sees the backend's own
// certificate, which the gateway does not have). Without gateway.go's
// hook the router gets a sidecar's listeners and nothing listens on the
// gateway's ports.
func TestGatewayLocalUp(t *testing.T) {
	requireMesh(t)
	straitctl := filepath.Join(binDir, "straitctl")
	if _, err := os.Stat(straitctl); err != nil {
		testreq.Missing(t, "no straitctl in %s: build ./cmd/... into STRAIT_BIN_DIR", binDir)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	certs, pool, clientCert := gatewayCerts(t)
	cfg := configDir(t, map[string]string{"mesh.yaml": strings.ReplaceAll(gatewayMesh, "CERTS", certs)})
	// credentialName api-cert: the Secret's keys as files, in the
	// gateway's namespace (local up copies them into the gateway pod).
	// credentialName crl-cert: MUTUAL, with a ca.crl that revokes the
	// test's first client certificate.
	for name, files := range map[string]map[string]string{
		"api-cert": {"api.crt": "tls.crt", "api.key": "tls.key"},
		"crl-cert": {"api.crt": "tls.crt", "api.key": "tls.key", "ca.crt": "ca.crt", "revoked.crl": "ca.crl"},
	} {
		cred := filepath.Join(cfg, "credentials", "ingress", name)
		if err := os.MkdirAll(cred, 0o700); err != nil {
			t.Fatal(err)
		}
		for src, dst := range files {
			data, err := os.ReadFile(filepath.Join(certs, src))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(cred, dst), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	// credentialName bad-cert: a certificate that is not PEM and a key.
	bad := filepath.Join(cfg, "credentials", "ingress", "bad-cert")
	if err := os.MkdirAll(bad, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{"tls.crt": "not a certificate\n", "tls.key": "not a key\n"} {
		if err := os.WriteFile(filepath.Join(bad, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	stateDir := filepath.Join(t.TempDir(), "state")

	var out syncBuffer
	up := exec.Command(straitctl, "local", "up", "--config-dir", cfg, "--bin-dir", binDir, "--state-dir", stateDir)
	up.Stdout, up.Stderr = &out, &out
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	upDone := make(chan error, 1)
	go func() { upDone <- up.Wait() }()
	t.Cleanup(func() {
		_ = up.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-upDone:
			if err != nil {
				t.Logf("local up: %v", err)
			}
		case <-time.After(30 * time.Second):
			_ = up.Process.Kill()
			_ = <-upDone
		}
		if t.Failed() {
			t.Logf("--- local up ---\n%s", tail(out.String(), 60))
			var st upState
			if data, err := os.ReadFile(filepath.Join(stateDir, "state.json")); err == nil && json.Unmarshal(data, &st) == nil {
				for _, n := range []string{"ingressgateway-agent", "echo-agent", "secure-agent"} {
					if data, err := os.ReadFile(filepath.Join(st.WorkDir, "logs", n+".log")); err == nil {
						t.Logf("--- %s ---\n%s", n, tail(string(data), 30))
					}
				}
			}
		}
	})
	waitFor(ctx, t, 120*time.Second, "local up ready", func() error {
		select {
		case err := <-upDone:
			upDone <- err
			return fmt.Errorf("%w: local up exited: %w", errGiveUp, err)
		default:
		}
		if !strings.Contains(out.String(), "Ctrl-C removes the mesh") {
			return errors.New("not ready yet")
		}
		return nil
	})
	for _, line := range []string{
		"ingressgateway: HTTP http://" + gwAddr + ":80 (Gateway ingress/gw, hosts *)",
		"ingressgateway: HTTPS https://" + gwAddr + ":443 (Gateway ingress/gw, hosts www.example.com)",
		"ingressgateway: TLS tls://" + gwAddr + ":443 (Gateway ingress/gw, hosts secure.example.com)",
	} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("local up does not print %q", line)
		}
	}

	plain := gatewayClient(gwAddr+":80", nil)
	waitFor(ctx, t, 30*time.Second, "the gateway serves www.example.com", func() error {
		resp, r, err := gatewayGet(plain, "http://www.example.com/")
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK || r == nil {
			return fmt.Errorf("status %d, reply %+v", resp.StatusCode, r)
		}
		return nil
	})

	t.Run("http to a STRICT service over mTLS", func(t *testing.T) {
		resp, r, err := gatewayGet(plain, "http://www.example.com/hello")
		if err != nil || resp.StatusCode != http.StatusOK || r == nil {
			t.Fatalf("GET: %v %v %+v", err, resp, r)
		}
		xfcc := r.Headers["X-Forwarded-Client-Cert"]
		if !strings.Contains(xfcc, "URI=spiffe://cluster.local/ns/ingress/sa/ingressgateway") {
			t.Errorf("x-forwarded-client-cert %q: want the gateway's identity, set by echo's sidecar on the mTLS hop", xfcc)
		}
		if r.Path != "/hello" || r.Host != "www.example.com" {
			t.Errorf("reply %+v: want path /hello, host www.example.com", r)
		}
		// The same service from the host in plaintext: STRICT refuses it.
		if resp, _, err := gatewayGet(gatewayClient(gwEchoAddr+":8080", nil), "http://echo.shop.svc.cluster.local/"); err == nil {
			t.Errorf("plaintext from the host to echo's sidecar answered %d; STRICT must refuse it", resp.StatusCode)
		}
		// A host the Gateway serves but no VirtualService routes: 404.
		if resp, _, err := gatewayGet(plain, "http://nobody.example.com/"); err != nil || resp.StatusCode != http.StatusNotFound {
			t.Errorf("unrouted host: %v %v, want 404", err, resp)
		}
	})

	// A headless service behind the gateway: its endpoints come over EDS
	// (an ORIGINAL_DST cluster would send the request back into the
	// gateway, which dialled nobody but itself).
	t.Run("http to a headless service", func(t *testing.T) {
		resp, r, err := gatewayGet(plain, "http://headless.example.com/via-headless")
		if err != nil || resp.StatusCode != http.StatusOK || r == nil {
			t.Fatalf("GET: %v %v %+v", err, resp, r)
		}
		if r.Path != "/via-headless" || r.Host != "headless.example.com" {
			t.Errorf("reply %+v: want echo's, path /via-headless, host headless.example.com", r)
		}
	})

	// The retries the Gateway API's HTTPRoute retry becomes (codes 500,
	// attempts 3: the conformance suite's HTTPRouteRetry), at the gateway:
	// a backend that fails twice is answered on the third attempt; one
	// that fails four times is answered its fourth 500; a 503, not among
	// the codes, is not retried; a POST's body is sent again.
	t.Run("retries", func(t *testing.T) {
		const cluster = `cluster_name="outbound|80||echo.shop.svc.cluster.local"`
		prom := "http://" + net.JoinHostPort(gwAddr, "15090") + "/stats/prometheus"
		counter := func(name string) int {
			t.Helper()
			l := scrapeFirst(ctx, t, prom, name+"{"+cluster+"}")
			f := strings.Fields(l)
			if len(f) != 2 {
				t.Fatalf("gateway stats: no %s for the echo cluster (line %q)", name, l)
			}
			n, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatalf("gateway stats: %q: %v", l, err)
			}
			return n
		}
		names := []string{"envoy_cluster_upstream_rq_retry", "envoy_cluster_upstream_rq_retry_success", "envoy_cluster_upstream_rq_retry_limit_exceeded"}
		before := map[string]int{}
		for _, n := range names {
			before[n] = counter(n)
		}
		key := fmt.Sprintf("retry-%d-", time.Now().UnixNano())
		attempts := func(k string) int {
			t.Helper()
			resp, err := plain.Get("http://retry.example.com/_echo/count?key=" + k)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var c struct{ Count int }
			if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
				t.Fatalf("count of %s: %v", k, err)
			}
			return c.Count
		}
		for _, tc := range []struct {
			name, method, body string
			fail, failStatus   int
			want, wantAttempts int
		}{
			{"fails twice, answered on the third attempt", http.MethodGet, "", 2, 500, 200, 3},
			{"fails past the attempts: the last 500", http.MethodGet, "", 4, 500, 500, 4},
			{"503 is not among the codes", http.MethodGet, "", 1, 503, 503, 1},
			{"a POST's body is sent again", http.MethodPost, "payload", 2, 500, 200, 3},
		} {
			k := key + strings.ReplaceAll(tc.name, " ", "-")
			req, err := http.NewRequestWithContext(ctx, tc.method, "http://retry.example.com/r", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-Echo-Key", k)
			req.Header.Set("X-Echo-Fail", strconv.Itoa(tc.fail))
			req.Header.Set("X-Echo-Fail-Status", strconv.Itoa(tc.failStatus))
			resp, err := plain.Do(req)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			var r echoReply
			_ = json.NewDecoder(resp.Body).Decode(&r)
			_ = resp.Body.Close()
			if resp.StatusCode != tc.want || r.Attempt != tc.wantAttempts {
				t.Errorf("%s: %d from attempt %d, want %d from attempt %d", tc.name, resp.StatusCode, r.Attempt, tc.want, tc.wantAttempts)
			}
			if got := r.Headers["X-Envoy-Attempt-Count"]; got != strconv.Itoa(tc.wantAttempts) {
				t.Errorf("%s: x-envoy-attempt-count %q, want %d", tc.name, got, tc.wantAttempts)
			}
			if tc.body != "" && r.Headers["Content-Length"] != strconv.Itoa(len(tc.body)) {
				t.Errorf("%s: the last attempt's content-length %q, want %d", tc.name, r.Headers["Content-Length"], len(tc.body))
			}
			if n := attempts(k); n != tc.wantAttempts {
				t.Errorf("%s: the backend saw %d attempts, want %d", tc.name, n, tc.wantAttempts)
			}
		}
		// The gateway's counters: 2+3+2 retries, two of them ending in
		// a response after a retry, one over the limit.
		for n, want := range map[string]int{names[0]: 7, names[1]: 2, names[2]: 1} {
			if got := counter(n) - before[n]; got != want {
				t.Errorf("gateway %s grew by %d, want %d", n, got, want)
			}
		}
	})

	t.Run("https SIMPLE", func(t *testing.T) {
		c := gatewayClient(gwAddr+":443", &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
		resp, r, err := gatewayGet(c, "https://www.example.com/secure")
		if err != nil || resp.StatusCode != http.StatusOK || r == nil {
			t.Fatalf("GET: %v %v %+v", err, resp, r)
		}
		if cs := resp.TLS; cs == nil || cs.PeerCertificates[0].Subject.CommonName != "www.example.com" {
			t.Errorf("TLS state %+v: want the gateway's www.example.com certificate", cs)
		}
		if r.Headers["X-Forwarded-Proto"] != "https" {
			t.Errorf("x-forwarded-proto %q, want https", r.Headers["X-Forwarded-Proto"])
		}
		// A client that does not trust the CA refuses the gateway.
		if _, _, err := gatewayGet(gatewayClient(gwAddr+":443", &tls.Config{MinVersion: tls.VersionTLS12}), "https://www.example.com/"); err == nil {
			t.Error("a client without the CA accepted the gateway's certificate")
		}
	})

	t.Run("https credentialName", func(t *testing.T) {
		c := gatewayClient(gwAddr+":443", &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
		resp, r, err := gatewayGet(c, "https://api.example.com/")
		if err != nil || resp.StatusCode != http.StatusOK || r == nil {
			t.Fatalf("GET: %v %v %+v", err, resp, r)
		}
		if cs := resp.TLS; cs == nil || cs.PeerCertificates[0].Subject.CommonName != "api.example.com" {
			t.Errorf("TLS state %+v: want the api-cert credential's certificate", cs)
		}
	})

	t.Run("missing or malformed credential", func(t *testing.T) {
		// https-missing names a credential that does not exist and
		// https-malformed one that does not parse: straitd serves no
		// chain for them, so their handshakes fail at once (no chain
		// matches their SNI; port 8444, whose one server has no
		// credential, has no listener) instead of waiting for a secret,
		// while the other servers of port 443 (the other subtests) keep
		// working; straitd's log names each.
		for _, tc := range []struct{ addr, url string }{
			{gwAddr + ":443", "https://missing.example.com/"},
			{gwAddr + ":443", "https://malformed.example.com/"},
			{gwAddr + ":8444", "https://alone.example.com/"},
		} {
			c := gatewayClient(tc.addr, &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
			c.Timeout = 10 * time.Second
			start := time.Now()
			resp, _, err := gatewayGet(c, tc.url)
			took := time.Since(start)
			switch {
			case err == nil:
				t.Errorf("%s: a server without a usable credential answered %d", tc.url, resp.StatusCode)
			case took > 2*time.Second:
				t.Errorf("%s: failed after %v (%v): the handshake must fail at once, not wait for the secret", tc.url, took.Round(time.Millisecond), err)
			default:
				t.Logf("%s: %v after %v", tc.url, err, took.Round(time.Millisecond))
			}
		}
		var st upState
		data, err := os.ReadFile(filepath.Join(stateDir, "state.json"))
		if err != nil || json.Unmarshal(data, &st) != nil {
			t.Fatalf("state.json: %v", err)
		}
		log, err := os.ReadFile(filepath.Join(st.WorkDir, "logs", "straitd.log"))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{
			"spec.servers[5].tls.credentialName: credential ingress/no-such-cert of Gateway ingress/gw cannot be served: no certificate",
			"spec.servers[6].tls.credentialName: credential ingress/bad-cert of Gateway ingress/gw cannot be served: tls.crt and tls.key",
		} {
			if !strings.Contains(string(log), want) {
				t.Errorf("straitd's log does not report %q", want)
			}
		}
	})

	t.Run("https MUTUAL", func(t *testing.T) {
		with := gatewayClient(gwAddr+":443", &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{clientCert}, MinVersion: tls.VersionTLS12})
		resp, r, err := gatewayGet(with, "https://mtls.example.com/")
		if err != nil || resp.StatusCode != http.StatusOK || r == nil {
			t.Fatalf("with a client certificate: %v %v %+v", err, resp, r)
		}
		without := gatewayClient(gwAddr+":443", &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
		if resp, _, err := gatewayGet(without, "https://mtls.example.com/"); err == nil {
			t.Errorf("without a client certificate: answered %d; MUTUAL must refuse the handshake", resp.StatusCode)
		}
	})

	t.Run("https MUTUAL credentialName with ca.crl", func(t *testing.T) {
		okCert, err := tls.LoadX509KeyPair(filepath.Join(certs, "client-ok.crt"), filepath.Join(certs, "client-ok.key"))
		if err != nil {
			t.Fatal(err)
		}
		ok := gatewayClient(gwAddr+":8445", &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{okCert}, MinVersion: tls.VersionTLS12})
		resp, r, err := gatewayGet(ok, "https://api.example.com/")
		if err != nil || resp.StatusCode != http.StatusOK || r == nil {
			t.Fatalf("with a certificate the list does not revoke: %v %v %+v", err, resp, r)
		}
		revoked := gatewayClient(gwAddr+":8445", &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{clientCert}, MinVersion: tls.VersionTLS12})
		if resp, _, err := gatewayGet(revoked, "https://api.example.com/"); err == nil {
			t.Errorf("with a revoked certificate: answered %d; the credential's ca.crl must refuse it", resp.StatusCode)
		}
	})

	t.Run("httpsRedirect", func(t *testing.T) {
		resp, _, err := gatewayGet(gatewayClient(gwAddr+":8080", nil), "http://www.example.com/a/b?q=1")
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "https://www.example.com/a/b?q=1" {
			t.Errorf("status %d, location %q: want 301 to https://www.example.com/a/b?q=1", resp.StatusCode, resp.Header.Get("Location"))
		}
	})

	t.Run("tls PASSTHROUGH by SNI", func(t *testing.T) {
		c := gatewayClient(gwAddr+":443", &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
		resp, r, err := gatewayGet(c, "https://secure.example.com/pass")
		if err != nil || resp.StatusCode != http.StatusOK || r == nil {
			t.Fatalf("GET: %v %v %+v", err, resp, r)
		}
		if r.Version != "tls-backend" {
			t.Errorf("answered by %q, want the TLS backend", r.Version)
		}
		if cs := resp.TLS; cs == nil || cs.PeerCertificates[0].Subject.CommonName != "secure.example.com" {
			t.Errorf("TLS state %+v: want the backend's own secure.example.com certificate", cs)
		}
	})
}
