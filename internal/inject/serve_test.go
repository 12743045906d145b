package inject

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func startServer(t *testing.T, opts ServerOptions) (*Server, string) {
	t.Helper()
	opts.Logger = quietLogger()
	srv, err := NewServer(NewWebhookHandler(New(nil, Options{}), quietLogger()), opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("server did not stop")
		}
	})
	return srv, ln.Addr().String()
}

func clientTrusting(t *testing.T, caPEM []byte) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("bad CA PEM")
	}
	return &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "istiod.istio-system.svc"}},
	}
}

// The self-signed server answers /inject and /inject/ over TLS that its
// CA bundle verifies, as the API server would call it.
func TestServerSelfSigned(t *testing.T) {
	srv, addr := startServer(t, ServerOptions{})
	c := clientTrusting(t, srv.CABundle())
	body := reviewJSON("admission.k8s.io/v1", "u", "default", seedPodJSON(t, nil))
	for _, path := range []string{"/inject", "/inject/", "/inject/cluster/Kubernetes/net/network1"} {
		resp, err := c.Post("https://"+addr+path, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !bytes.Contains(b, []byte(`"patchType":"JSONPatch"`)) {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, b)
		}
	}
	resp, err := c.Post("https://"+addr+"/inject", "text/plain", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Fatalf("text/plain: %d", resp.StatusCode)
	}
}

// A certificate rewritten on disk is served without a restart.
func TestServerReloadsCertificate(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	write := func() *CertPair {
		p, err := SelfSigned([]string{"istiod.istio-system.svc"}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		// Write to temporary names and rename, as a kubelet-updated
		// secret volume does, so the server never sees half a pair.
		for name, data := range map[string][]byte{certFile: p.CertPEM, keyFile: p.KeyPEM} {
			if err := os.WriteFile(name+".tmp", data, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(name+".tmp", name); err != nil {
				t.Fatal(err)
			}
		}
		return p
	}
	first := write()
	_, addr := startServer(t, ServerOptions{CertFile: certFile, KeyFile: keyFile})
	if _, err := clientTrusting(t, first.CAPEM).Get("https://" + addr + "/inject"); err != nil {
		t.Fatalf("first certificate: %v", err)
	}
	second := write()
	c := clientTrusting(t, second.CAPEM)
	deadline := time.Now().Add(15 * time.Second)
	for {
		c.CloseIdleConnections()
		resp, err := c.Get("https://" + addr + "/inject")
		if err == nil {
			resp.Body.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the new certificate was not served: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestNewServerNeedsBothFiles(t *testing.T) {
	if _, err := NewServer(http.NotFoundHandler(), ServerOptions{CertFile: "x"}); err == nil {
		t.Fatal("no error for a certificate without a key")
	}
}
