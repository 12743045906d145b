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
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/testreq"
)

// localUp runs the real `straitctl local up` on cfg until the test ends
// and returns once the mesh is ready, with up's output and its state
// directory. When the test failed, the output's and the named pods'
// agent logs' tails are logged.
func localUp(ctx context.Context, t *testing.T, cfg string, logs ...string) (out *syncBuffer, stateDir string) {
	t.Helper()
	straitctl := filepath.Join(binDir, "straitctl")
	if _, err := os.Stat(straitctl); err != nil {
		testreq.Missing(t, "no straitctl in %s: build ./cmd/... into STRAIT_BIN_DIR", binDir)
	}
	stateDir = filepath.Join(t.TempDir(), "state")
	out = &syncBuffer{}
	up := exec.Command(straitctl, "local", "up", "--config-dir", cfg, "--bin-dir", binDir, "--state-dir", stateDir)
	up.Stdout, up.Stderr = out, out
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
				for _, n := range append([]string{"straitd"}, logs...) {
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
	return out, stateDir
}

// The addresses of TestEgressGatewayLocalUp's pods: examples/egress's,
// moved to a /24 of their own.
const (
	egClient   = "10.213.92.10"
	egGateway  = "10.213.92.30"
	egExternal = "10.213.92.40"
	egVIP      = "240.240.92.20"
)

// TestEgressGatewayLocalUp runs examples/egress with the real `straitctl
// local up`: a client in a REGISTRY_ONLY namespace, an egress gateway pod,
// and the external host, an HTTPS server in its own network namespace on
// the bridge with no sidecar (local.strait.io/outside-mesh). The client
// sends plain HTTP to api.external.test; the request reaches the
// external host from the egress gateway's address (the hop is there:
// without the VirtualService's mesh rule or the gateway, the sidecar would
// call the external host's port 80, where nothing listens), over TLS with
// SNI api.external.test that the gateway originated (the client spoke
// plaintext). The hop from the sidecar to the gateway is mTLS: the
// gateway's ISTIO_MUTUAL server refuses the host's plaintext and a TLS
// client without a mesh certificate. A direct request from the client
// to the external host's own address is refused (BlackHoleCluster under
// REGISTRY_ONLY), and reaches it once the Sidecar says ALLOW_ANY, so the
// refusal is the policy's.
func TestEgressGatewayLocalUp(t *testing.T) {
	requireMesh(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	certs := egressCerts(t)
	_, file, _, _ := runtime.Caller(0)
	example, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "examples", "egress", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	mesh := strings.NewReplacer("/etc/strait-egress", certs, "10.97.0.", "10.213.92.", "240.240.97.", "240.240.92.").Replace(string(example))
	cfg := configDir(t, map[string]string{"mesh.yaml": mesh})
	out, stateDir := localUp(ctx, t, cfg, "client-agent", "egressgateway-agent", "external-app")
	if !strings.Contains(out.String(), "egressgateway: HTTPS https://"+egGateway+":80 (Gateway istio-system/istio-egressgateway, hosts api.external.test)") {
		t.Errorf("local up does not list the egress gateway's server")
	}

	straitctl := filepath.Join(binDir, "straitctl")
	get := func(args ...string) (getLine, error) {
		cmd := exec.CommandContext(ctx, straitctl, append([]string{"local", "exec", "client", "-n", "shop", "--state-dir", stateDir, "--",
			"strait-echo", "get", "-timeout", "3s"}, args...)...)
		b, err := cmd.CombinedOutput()
		if err != nil {
			return getLine{}, fmt.Errorf("local exec: %w: %s", err, b)
		}
		var l getLine
		if err := json.Unmarshal(b, &l); err != nil {
			return getLine{}, fmt.Errorf("decode %q: %w", b, err)
		}
		return l, nil
	}

	t.Run("through the egress gateway with TLS origination", func(t *testing.T) {
		var l getLine
		waitFor(ctx, t, 30*time.Second, "api.external.test answers through the egress gateway", func() error {
			var err error
			if l, err = get("-header", "Host=api.external.test", "http://"+egVIP+"/hello"); err != nil {
				return err
			}
			if l.Status != http.StatusOK || l.Reply == nil {
				return fmt.Errorf("status %d, error %q", l.Status, l.Error)
			}
			return nil
		})
		r := l.Reply
		if r.Version != "external" || r.Path != "/hello" {
			t.Errorf("reply %+v: want the external host's, path /hello", r)
		}
		if host, _, _ := net.SplitHostPort(r.Remote); host != egGateway {
			t.Errorf("the external host saw the request from %s, want the egress gateway %s", r.Remote, egGateway)
		}
		if r.TLSServerName != "api.external.test" {
			t.Errorf("the external host saw SNI %q over TLS, want api.external.test (TLS originated by the gateway)", r.TLSServerName)
		}
	})

	t.Run("the gateway's server is ISTIO_MUTUAL", func(t *testing.T) {
		if resp, _, err := gatewayGet(gatewayClient(egGateway+":80", nil), "http://api.external.test/"); err == nil {
			t.Errorf("plaintext from the host to the egress gateway answered %d", resp.StatusCode)
		}
		// A TLS client with no certificate: the server must refuse it.
		c := gatewayClient(egGateway+":80", &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}) //nolint:gosec // nothing to verify: the handshake must fail
		if resp, _, err := gatewayGet(c, "https://api.external.test:80/"); err == nil {
			t.Errorf("TLS without a mesh client certificate answered %d", resp.StatusCode)
		}
	})

	t.Run("direct to the external host: REGISTRY_ONLY", func(t *testing.T) {
		l, err := get("http://" + egExternal + ":8443/")
		if err != nil {
			t.Fatal(err)
		}
		if l.Status != 0 || l.Error == "" {
			t.Fatalf("direct request answered %d: REGISTRY_ONLY must refuse the external host's own address", l.Status)
		}
		// The same request under ALLOW_ANY reaches the server (which
		// answers plaintext on its TLS port with 400).
		allow := strings.Replace(mesh, "mode: REGISTRY_ONLY", "mode: ALLOW_ANY", 1)
		if err := os.WriteFile(filepath.Join(cfg, "mesh.yaml"), []byte(allow), 0o644); err != nil {
			t.Fatal(err)
		}
		waitFor(ctx, t, 30*time.Second, "ALLOW_ANY lets the direct request through", func() error {
			l, err := get("http://" + egExternal + ":8443/")
			if err != nil {
				return err
			}
			if l.Status != http.StatusBadRequest {
				return fmt.Errorf("status %d, error %q", l.Status, l.Error)
			}
			return nil
		})
	})
}

// getLine is one line of `strait-echo get`.
type getLine struct {
	Status int    `json:"status"`
	Error  string `json:"error"`
	Reply  *struct {
		Version       string `json:"version"`
		Remote        string `json:"remote"`
		Path          string `json:"path"`
		TLSServerName string `json:"tlsServerName"`
	} `json:"reply"`
}

// egressCerts writes a self-signed certificate for api.external.test
// (api.crt, api.key) into a directory every user may read (the gateway's
// agent and the external host's app run as their pods' users).
func egressCerts(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "strait-egress-certs-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "api.external.test"}, DNSNames: []string{"api.external.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	for name, block := range map[string]*pem.Block{"api.crt": {Type: "CERTIFICATE", Bytes: der}, "api.key": {Type: "PRIVATE KEY", Bytes: kder}} {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(block), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
