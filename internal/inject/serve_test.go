package inject

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
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
		case err := <-done:
			if err != nil {
				t.Errorf("Serve after cancel: %v", err)
			}
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
	const want = "webhook server: both a certificate file and a key file are needed"
	for _, opts := range []ServerOptions{{CertFile: "x"}, {KeyFile: "x"}} {
		_, err := NewServer(http.NotFoundHandler(), opts)
		if err == nil || err.Error() != want {
			t.Errorf("NewServer(cert %q, key %q) = %v, want %q", opts.CertFile, opts.KeyFile, err, want)
		}
	}
}

// TestSelfSignedCertificate: the leaf is signed by the CA, names the first
// DNS name (or strait-webhook), covers loopback and is valid from an hour
// before now for a year.
func TestSelfSignedCertificate(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, names := range [][]string{{"a.example", "b.example"}, nil} {
		p, err := SelfSigned(names, now)
		if err != nil {
			t.Fatal(err)
		}
		parse := func(b []byte) *x509.Certificate {
			blk, _ := pem.Decode(b)
			c, err := x509.ParseCertificate(blk.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
		leaf, ca := parse(p.CertPEM), parse(p.CAPEM)
		roots := x509.NewCertPool()
		roots.AddCert(ca)
		host := "127.0.0.1"
		if len(names) > 0 {
			host = names[1]
		}
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: roots, CurrentTime: now}); err != nil {
			t.Errorf("%v: leaf does not verify for %s: %v", names, host, err)
		}
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "::1", Roots: roots, CurrentTime: now}); err != nil {
			t.Errorf("%v: leaf does not cover ::1: %v", names, err)
		}
		wantCN := "strait-webhook"
		if len(names) > 0 {
			wantCN = names[0]
		}
		if leaf.Subject.CommonName != wantCN || !ca.IsCA || leaf.IsCA {
			t.Errorf("%v: CN %q, CA %v, leaf CA %v", names, leaf.Subject.CommonName, ca.IsCA, leaf.IsCA)
		}
		for _, c := range []*x509.Certificate{leaf, ca} {
			if !c.NotBefore.Equal(now.Add(-time.Hour)) || !c.NotAfter.Equal(now.Add(365*24*time.Hour)) {
				t.Errorf("%v: valid %s to %s", names, c.NotBefore, c.NotAfter)
			}
		}
		if _, err := tls.X509KeyPair(p.CertPEM, p.KeyPEM); err != nil {
			t.Errorf("key does not match: %v", err)
		}
		if leaf.SerialNumber.Cmp(ca.SerialNumber) == 0 {
			t.Error("leaf and CA share a serial number")
		}
	}
}

// TestListenAndServe: the server listens on its address and stops cleanly
// when ctx ends; an address it cannot listen on is an error naming the
// webhook server, not a server that never answers.
func TestListenAndServe(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	srv, err := NewServer(NewWebhookHandler(New(nil, Options{}), quietLogger()),
		ServerOptions{Addr: taken.Addr().String(), Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	err = srv.ListenAndServe(context.Background())
	if err == nil || !strings.HasPrefix(err.Error(), "webhook server: ") || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("ListenAndServe on a taken address = %v, want a webhook server error", err)
	}

	// A free port: the server answers there until ctx ends.
	free := taken.Addr().String()
	taken.Close()
	srv, err = NewServer(NewWebhookHandler(New(nil, Options{}), quietLogger()),
		ServerOptions{Addr: free, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.ListenAndServe(ctx) }()
	c := clientTrusting(t, srv.CABundle())
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := c.Get("https://" + free + "/inject")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusMethodNotAllowed {
				t.Errorf("GET /inject: %s, want 405", resp.Status)
			}
			break
		}
		select {
		case err := <-done:
			t.Fatalf("ListenAndServe returned before ctx ended: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server never answered: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ListenAndServe after ctx ended = %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ListenAndServe did not return after ctx ended")
	}
}

// TestCertReloaderGet: the served certificate is re-read when the files'
// stamp changed and a second has passed since the last look, not when
// they are unchanged nor within that second; a pair that does not load
// keeps the previous one.
func TestCertReloaderGet(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	stampAt := time.Now().Add(-time.Hour)
	write := func(cert, key []byte) {
		t.Helper()
		// A distinct modification time each time: two writes within one
		// clock tick could otherwise leave the same stamp.
		stampAt = stampAt.Add(time.Minute)
		for name, data := range map[string][]byte{certFile: cert, keyFile: key} {
			if err := os.WriteFile(name, data, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(name, stampAt, stampAt); err != nil {
				t.Fatal(err)
			}
		}
	}
	pair := func() *CertPair {
		t.Helper()
		p, err := SelfSigned([]string{"a.example"}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	leafOf := func(p *CertPair) []byte {
		blk, _ := pem.Decode(p.CertPEM)
		return blk.Bytes
	}
	first, second, third := pair(), pair(), pair()
	write(first.CertPEM, first.KeyPEM)
	var logs bytes.Buffer
	r := &certReloader{certFile: certFile, keyFile: keyFile, log: slog.New(slog.NewTextHandler(&logs, nil))}
	logged := func(what, want string) {
		t.Helper()
		if !strings.Contains(logs.String(), want) {
			t.Errorf("%s: log %q does not say %q", what, logs.String(), want)
		}
		logs.Reset()
	}
	if err := r.reload(); err != nil {
		t.Fatal(err)
	}
	loaded := r.cert
	get := func(what string, want *CertPair) *tls.Certificate {
		t.Helper()
		c, err := r.get(nil)
		if err != nil || c == nil {
			t.Fatalf("%s: get = %v, %v", what, c, err)
		}
		if !bytes.Equal(c.Certificate[0], leafOf(want)) {
			t.Fatalf("%s: served another certificate than the expected one", what)
		}
		return c
	}

	// Unchanged files: the loaded certificate itself, not a re-read copy.
	if c := get("unchanged files", first); c != loaded {
		t.Error("unchanged files were loaded again")
	}
	// Changed files, but looked at less than a second ago: not yet.
	write(second.CertPEM, second.KeyPEM)
	get("changed within a second of the last look", first)
	// A second later: the new pair.
	r.lastCheck = time.Now().Add(-2 * time.Second)
	get("changed, a second later", second)
	logged("changed, a second later", `msg="webhook certificate reloaded"`)
	// Changed again right after that look: not yet.
	write(third.CertPEM, third.KeyPEM)
	get("changed right after a look", second)
	// A pair that does not load keeps the previous one.
	write(third.CertPEM, first.KeyPEM)
	r.lastCheck = time.Now().Add(-2 * time.Second)
	get("mismatched pair", second)
	logged("mismatched pair", `msg="keeping the previous webhook certificate" error="webhook certificate: tls: private key does not match public key"`)
	// A missing file too.
	if err := os.Remove(keyFile); err != nil {
		t.Fatal(err)
	}
	r.lastCheck = time.Now().Add(-2 * time.Second)
	get("missing key file", second)
}

// TestServeDrainsOnCancel: when ctx ends, a request already being served
// is let finish (within the shutdown grace period) and Serve returns nil.
func TestServeDrainsOnCancel(t *testing.T) {
	inHandler, release := make(chan struct{}), make(chan struct{})
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(inHandler)
		<-release
		_, _ = io.WriteString(w, "done")
	})
	srv, err := NewServer(handler, ServerOptions{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// The handler is released only once the shutdown has begun, so the
	// request is still in flight when it starts.
	shuttingDown := make(chan struct{})
	srv.srv.RegisterOnShutdown(func() { close(shuttingDown) })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()

	type result struct {
		body string
		err  error
	}
	got := make(chan result, 1)
	go func() {
		resp, err := clientTrusting(t, srv.CABundle()).Post("https://"+ln.Addr().String()+"/inject", "application/json", nil)
		if err != nil {
			got <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		got <- result{string(b), err}
	}()
	select {
	case <-inHandler:
	case <-time.After(10 * time.Second):
		t.Fatal("the request never reached the handler")
	}
	cancel()
	select {
	case <-shuttingDown:
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not start shutting down after ctx ended")
	}
	close(release)
	select {
	case r := <-got:
		if r.err != nil || r.body != "done" {
			t.Errorf("in-flight request: %q, %v; want it answered", r.body, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the in-flight request was not answered")
	}
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve after ctx ended = %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after ctx ended")
	}
}

// TestServerBoundsSlowClients: the webhook server (reachable by anything
// in the cluster) gives a client that trickles or stalls a bounded time
// for the request head, the request and the response: each timeout is set,
// and none is longer than the API server's own webhook timeout of 30s.
func TestServerBoundsSlowClients(t *testing.T) {
	srv, err := NewServer(http.NotFoundHandler(), ServerOptions{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	for name, d := range map[string]time.Duration{
		"ReadHeaderTimeout": srv.srv.ReadHeaderTimeout,
		"ReadTimeout":       srv.srv.ReadTimeout,
		"WriteTimeout":      srv.srv.WriteTimeout,
	} {
		if d <= 0 || d > 30*time.Second {
			t.Errorf("%s = %v, want a bound in (0, 30s]", name, d)
		}
	}
	if srv.srv.ReadHeaderTimeout > srv.srv.ReadTimeout {
		t.Errorf("ReadHeaderTimeout %v is longer than ReadTimeout %v, which already bounds the head", srv.srv.ReadHeaderTimeout, srv.srv.ReadTimeout)
	}
}
