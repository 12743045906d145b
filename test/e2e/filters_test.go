package e2e

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/localmesh"
)

// l4Serve makes the test binary the L4 servers of the filters mesh (the
// l4-a and l4-b pods' app) instead of running tests: on :9000 it writes
// its name and a newline to every TCP connection, on :9443 it does the
// same inside TLS (a self-signed certificate, whatever the SNI).
var l4Serve = flag.String("l4-serve", "", "serve TCP :9000 and TLS :9443, answering this name, instead of running tests")

func serveL4(name string) int {
	cert, err := selfSigned(name)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// :9443 binds first: a pod that waits for :9000 (Workload.AppPort)
	// then has both.
	secure, err := tls.Listen("tcp", ":9443", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	plain, err := net.Listen("tcp", ":9000")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	answer := func(ln net.Listener) {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				_, _ = io.WriteString(c, name+"\n")
				_, _ = io.Copy(io.Discard, c) // until the client closes
			}()
		}
	}
	go answer(plain)
	go answer(secure)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	plain.Close()
	secure.Close()
	return 0
}

func selfSigned(name string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

const (
	filtersEchoHost = "echo.demo.svc.cluster.local"
	filtersEchoURL  = "http://240.240.0.10"
	filtersShadow   = "http://240.240.0.11"
	filtersTCPAddr  = "240.240.0.20:9000"
	filtersTLSAddr  = "240.240.0.21:443"
)

// TestFiltersThroughSidecars runs fault injection, CORS, request
// mirroring, TCP weights and SNI routes through two sidecars, with the
// config of testdata/filters: one mesh, one subtest per feature.
func TestFiltersThroughSidecars(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	m := startMesh(ctx, t, "filters", localmesh.Options{
		Workloads: []localmesh.Workload{
			{Name: "client", Namespace: "demo", ConfigIP: "10.99.0.10"},
			echoPod("echo-v1", "demo", "10.99.0.11", "v1"),
			echoPod("echo-v2", "demo", "10.99.0.12", "v2"),
			echoPod("shadow", "demo", "10.99.0.13", "shadow"),
			{Name: "l4-a", Namespace: "demo", ConfigIP: "10.99.0.21", App: []string{self, "-l4-serve", "a"}, AppPort: 9000},
			{Name: "l4-b", Namespace: "demo", ConfigIP: "10.99.0.22", App: []string{self, "-l4-serve", "b"}, AppPort: 9000},
		},
	})
	client := m.Pod("client")
	hc := client.HTTPClient()
	do := func(t *testing.T, method, path string, header map[string]string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, filtersEchoURL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = filtersEchoHost
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	// The routes are in the first push: Start returned once the client's
	// sidecar had them. Check that they route before the cases count.
	waitFor(ctx, t, applyTimeout, "the mesh never answered the CORS preflight", func() error {
		r := send(ctx, hc, "OPTIONS", filtersEchoURL+"/cors", filtersEchoHost,
			http.Header{"Origin": {"https://ok.example"}, "Access-Control-Request-Method": {"GET"}})
		if r.err != nil || r.header.Get("Access-Control-Allow-Origin") == "" {
			return fmt.Errorf("last answer %s without access-control-allow-origin", r)
		}
		return nil
	})

	t.Run("fault abort percentage", func(t *testing.T) {
		const n = 400
		aborted := 0
		for range n {
			resp, body := do(t, "GET", "/abort", nil)
			switch resp.StatusCode {
			case 418:
				aborted++
				if f := resp.Header.Get("X-Strait-Response-Flags"); f != "FI" || string(body) != "fault filter abort" {
					t.Fatalf("abort answered with flags %q body %q, want FI, \"fault filter abort\"", f, body)
				}
			case 200:
			default:
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
		}
		// 50 %: 400 requests put 10 points at 4 standard deviations.
		if p := 100 * float64(aborted) / n; p < 40 || p > 60 {
			t.Errorf("%d of %d aborted (%.1f%%), want 50%% ± 10", aborted, n, p)
		}
	})

	t.Run("fault delay", func(t *testing.T) {
		for range 3 {
			start := time.Now()
			resp, body := do(t, "GET", "/delay", nil)
			elapsed := time.Since(start)
			if resp.StatusCode != 200 || !strings.Contains(string(body), `"version":"v1"`) {
				t.Fatalf("delayed request: %d %s", resp.StatusCode, body)
			}
			if elapsed < 500*time.Millisecond {
				t.Errorf("answered after %v, before the 500ms fixedDelay", elapsed)
			}
			if f := resp.Header.Get("X-Strait-Response-Flags"); f != "DI" {
				t.Errorf("flags %q, want DI", f)
			}
		}
	})

	t.Run("cors", func(t *testing.T) {
		resp, _ := do(t, "OPTIONS", "/cors", map[string]string{"Origin": "https://ok.example",
			"Access-Control-Request-Method": "POST", "X-Echo-Key": "preflight-ok"})
		for k, want := range map[string]string{"Access-Control-Allow-Origin": "https://ok.example",
			"Access-Control-Allow-Methods": "GET,POST", "Access-Control-Allow-Headers": "x-custom", "Access-Control-Max-Age": "600"} {
			if got := resp.Header.Get(k); resp.StatusCode != 200 || got != want {
				t.Errorf("allowed preflight: %d, %s %q, want 200 and %q", resp.StatusCode, k, got, want)
			}
		}
		if n, _ := keyCount(t, ctx, hc, filtersEchoURL, "preflight-ok"); n != 0 {
			t.Errorf("the app saw %d allowed preflights; the proxy answers them", n)
		}
		resp, _ = do(t, "OPTIONS", "/cors", map[string]string{"Origin": "https://sub.dev.example",
			"Access-Control-Request-Method": "GET"})
		if got := resp.Header.Get("Access-Control-Allow-Origin"); got != "https://sub.dev.example" {
			t.Errorf("regex origin: access-control-allow-origin %q", got)
		}
		// Refused origin: Istio forwards the preflight (unmatchedPreflights
		// default), without access-control headers.
		resp, body := do(t, "OPTIONS", "/cors", map[string]string{"Origin": "https://evil.example",
			"Access-Control-Request-Method": "POST", "X-Echo-Key": "preflight-evil"})
		if resp.Header.Get("Access-Control-Allow-Origin") != "" || !strings.Contains(string(body), `"method":"OPTIONS"`) {
			t.Errorf("refused preflight: allow-origin %q, body %s; want it forwarded to the app without CORS headers", resp.Header.Get("Access-Control-Allow-Origin"), body)
		}
		if n, _ := keyCount(t, ctx, hc, filtersEchoURL, "preflight-evil"); n != 1 {
			t.Errorf("the app saw %d refused preflights, want 1", n)
		}
		resp, _ = do(t, "GET", "/cors", map[string]string{"Origin": "https://ok.example"})
		if resp.Header.Get("Access-Control-Allow-Origin") != "https://ok.example" || resp.Header.Get("Access-Control-Expose-Headers") != "x-echo-version" {
			t.Errorf("actual request: allow-origin %q expose %q", resp.Header.Get("Access-Control-Allow-Origin"), resp.Header.Get("Access-Control-Expose-Headers"))
		}
		resp, _ = do(t, "GET", "/cors", map[string]string{"Origin": "https://evil.example"})
		if resp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("actual request from a refused origin got allow-origin %q", resp.Header.Get("Access-Control-Allow-Origin"))
		}
	})

	t.Run("mirror", func(t *testing.T) {
		const key = "mirrored"
		resp, body := do(t, "GET", "/mirror/x", map[string]string{"X-Echo-Key": key})
		if resp.StatusCode != 200 || !strings.Contains(string(body), `"version":"v1"`) {
			t.Fatalf("mirrored request: %d %s; want the primary's (v1) answer", resp.StatusCode, body)
		}
		// The mirrored request is sent beside the primary's, not before
		// its answer.
		waitFor(ctx, t, 10*time.Second, "mirror", func() error {
			if n, host := keyCount(t, ctx, hc, filtersShadow, key); n != 1 || host != filtersEchoHost+"-shadow" {
				return fmt.Errorf("the shadow saw %d requests with key %q, last host %q; want 1 with host %s-shadow", n, key, host, filtersEchoHost)
			}
			return nil
		})
		if n, _ := keyCount(t, ctx, hc, filtersEchoURL, key); n != 1 {
			t.Errorf("the primary saw %d requests, want 1", n)
		}
	})

	readName := func(c net.Conn) (string, error) {
		c.SetDeadline(time.Now().Add(5 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		return strings.TrimSpace(line), err
	}

	t.Run("tcp weights", func(t *testing.T) {
		const n = 400
		counts := map[string]int{}
		for range n {
			c, err := client.DialContext(ctx, "tcp", filtersTCPAddr)
			if err != nil {
				t.Fatal(err)
			}
			name, err := readName(c)
			c.Close()
			if err != nil {
				t.Fatalf("read from %s through the mesh: %v", filtersTCPAddr, err)
			}
			counts[name]++
		}
		for name, w := range map[string]float64{"a": 30, "b": 70} {
			if p := 100 * float64(counts[name]) / n; p < w-10 || p > w+10 {
				t.Errorf("%s: %.1f%% of connections, configured %v%% (tolerance 10 points); counts %v", name, p, w, counts)
			}
		}
	})

	t.Run("sni routes", func(t *testing.T) {
		for sni, want := range map[string]string{"a.example.com": "a", "b.example.com": "b", "x.b.example.com": "b"} {
			for range 5 {
				raw, err := client.DialContext(ctx, "tcp", filtersTLSAddr)
				if err != nil {
					t.Fatal(err)
				}
				c := tls.Client(raw, &tls.Config{ServerName: sni, InsecureSkipVerify: true}) //nolint:gosec // the test's own servers
				name, err := readName(c)
				c.Close()
				if err != nil || name != want {
					t.Errorf("SNI %s: %q, %v; want backend %s", sni, name, err, want)
				}
			}
		}
		// No route for this name: the connection is closed, as Envoy does
		// with no matching filter chain.
		raw, err := client.DialContext(ctx, "tcp", filtersTLSAddr)
		if err != nil {
			t.Fatal(err)
		}
		c := tls.Client(raw, &tls.Config{ServerName: "c.example.com", InsecureSkipVerify: true}) //nolint:gosec
		if name, err := readName(c); err == nil {
			t.Errorf("SNI c.example.com reached backend %q; want no route", name)
		}
		c.Close()
	})
}
