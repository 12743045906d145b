package e2e

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/localmesh"
)

// TestPeerAuthentication runs one mesh (file mode, every workload with a
// sidecar and a mesh certificate) and a pod without a sidecar in its own
// network namespace, and changes the PeerAuthentications between
// subtests:
//   - no policy is PERMISSIVE: the sidecar client talks mTLS, the
//     non-mesh client plaintext;
//   - a mesh-wide STRICT (root namespace) closes the non-mesh client's
//     connections while the sidecar client is served; a client
//     certificate of the mesh root for another trust domain is refused;
//   - a workload policy (selector) beats its namespace's;
//   - portLevelMtls sets one of a workload's ports apart;
//   - a namespace DISABLE beats the mesh STRICT: the workload serves
//     plaintext, refuses TLS, and client sidecars send it plaintext;
//   - a client sidecar refuses a server whose certificate, from the mesh
//     root, is for another trust domain (503), and accepts the same
//     server with a certificate of the mesh's trust domain.
func TestPeerAuthentication(t *testing.T) {
	requireMesh(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	echo := filepath.Join(binDir, "strait-echo")
	// One server on both ports, started directly: a shell command line
	// naming the binary would need the pod's app user to reach binDir,
	// which a private checkout does not allow (local mesh apps do not
	// run as root; localmesh.AppBinary binds only the command itself).
	twoPorts := []string{echo, "--addr", ":8080,:9090", "--version", "v1"}
	m := startMesh(ctx, t, "peerauthn", localmesh.Options{SecureXDS: true, Workloads: []localmesh.Workload{
		{Name: "client", Namespace: "demo", ConfigIP: "10.99.0.10"},
		{Name: "echo", Namespace: "demo", ConfigIP: "10.99.0.11", App: twoPorts, AppPort: 9090},
		echoPod("echo2", "demo", "10.99.0.12", "echo2"),
		echoPod("legacy", "legacy", "10.99.0.13", "legacy"),
	}})
	// A workload outside the mesh: its own network namespace on the
	// pods' bridge, no capture rules, no sidecar. The mesh's network
	// removes it on Close.
	outsider, err := m.Network().AddPod(ctx, "pa-out")
	if err != nil {
		t.Fatal(err)
	}
	client, echoServer, echo2, legacy := m.Pod("client"), m.Pod("echo"), m.Pod("echo2"), m.Pod("legacy")
	roots, caCert, caKey := meshCA(t, m.CADir())
	outsiderHTTP := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: outsider.DialContext, DisableKeepAlives: true}}
	meshHTTP := client.NewHTTPClient(false)

	// refused wants the non-mesh client's plaintext connection to addr
	// closed by the server's sidecar (reset or EOF, not a timeout and not
	// an HTTP answer), retrying while a change applies.
	refused := func(t *testing.T, addr string) {
		t.Helper()
		err := poll(ctx, 30*time.Second, func() error {
			resp, err := outsiderHTTP.Get("http://" + addr + "/")
			if err == nil {
				resp.Body.Close()
				return fmt.Errorf("plaintext to %s answered %d, want the connection closed", addr, resp.StatusCode)
			}
			if !closedByPeer(err) {
				return fmt.Errorf("plaintext to %s: %w; want the connection closed (reset or EOF)", addr, err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// mtlsTo makes a TLS connection from the non-mesh pod with Istio's
	// ALPN and a certificate of the mesh root for id, and sends one
	// request; it returns the status or the error.
	mtlsTo := func(addr, id string) (int, error) {
		cert := issue(t, caCert, caKey, id)
		raw, err := outsider.DialContext(ctx, "tcp", addr)
		if err != nil {
			return 0, err
		}
		defer raw.Close()
		raw.SetDeadline(time.Now().Add(5 * time.Second))
		conn := tls.Client(raw, &tls.Config{RootCAs: roots, NextProtos: []string{"istio-peer-exchange", "istio"}, InsecureSkipVerify: true, Certificates: []tls.Certificate{cert}})
		if err := conn.Handshake(); err != nil {
			return 0, err
		}
		fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	write := func(t *testing.T, docs ...string) {
		t.Helper()
		if err := m.WriteConfig("peerauthn.yaml", []byte(strings.Join(docs, "---\n"))); err != nil {
			t.Fatal(err)
		}
	}
	pa := func(ns, name, spec string) string {
		return fmt.Sprintf("apiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata: {name: %s, namespace: %s}\nspec:\n%s", name, ns, spec)
	}
	echoAddr := net.JoinHostPort(echoServer.IP, "8080")
	echoAlt := net.JoinHostPort(echoServer.IP, "9090")
	echo2Addr := net.JoinHostPort(echo2.IP, "8080")
	legacyAddr := net.JoinHostPort(legacy.IP, "8080")
	const echoURL, legacyURL = "http://240.240.0.10/", "http://240.240.0.13/"
	const handshakes = "listener.0.0.0.0_15006.ssl.handshake"
	meshSTRICT := pa("istio-system", "default", "  mtls: {mode: STRICT}\n")

	t.Run("no policy is PERMISSIVE: mTLS from the sidecar, plaintext from outside", func(t *testing.T) {
		before := stat(t, ctx, echoServer, handshakes)
		waitOK(ctx, t, meshHTTP, echoURL)
		if n := stat(t, ctx, echoServer, handshakes); n <= before {
			t.Errorf("echo's inbound handshakes %d (was %d): the sidecar hop is not mTLS", n, before)
		}
		waitOK(ctx, t, outsiderHTTP, "http://"+echoAddr+"/")
	})

	t.Run("mesh-wide STRICT refuses the non-mesh client and serves the sidecar", func(t *testing.T) {
		write(t, meshSTRICT)
		refused(t, echoAddr)
		refused(t, legacyAddr)
		refused(t, echoAlt)
		waitOK(ctx, t, meshHTTP, echoURL)
		waitOK(ctx, t, meshHTTP, legacyURL)
		// A mesh certificate is served; one of the same root for
		// another trust domain is refused in the handshake.
		if code, err := mtlsTo(echoAddr, "spiffe://cluster.local/ns/demo/sa/tester"); err != nil || code != http.StatusOK {
			t.Errorf("mTLS with a cluster.local certificate: %d %v, want 200", code, err)
		}
		if code, err := mtlsTo(echoAddr, "spiffe://evil.example/ns/demo/sa/tester"); err == nil {
			t.Errorf("mTLS with a certificate of trust domain evil.example got %d, want the handshake refused", code)
		}
	})

	t.Run("a workload policy beats its namespace's", func(t *testing.T) {
		write(t, meshSTRICT, pa("demo", "default", "  mtls: {mode: STRICT}\n"),
			pa("demo", "echo2", "  selector: {matchLabels: {app: echo2}}\n  mtls: {mode: PERMISSIVE}\n"))
		waitOK(ctx, t, outsiderHTTP, "http://"+echo2Addr+"/")
		refused(t, echoAddr)
		waitOK(ctx, t, meshHTTP, "http://240.240.0.12/")
	})

	t.Run("portLevelMtls sets one port apart", func(t *testing.T) {
		write(t, meshSTRICT, pa("demo", "default", "  mtls: {mode: STRICT}\n"),
			pa("demo", "echo", "  selector: {matchLabels: {app: echo}}\n  portLevelMtls:\n    9090: {mode: DISABLE}\n"))
		waitOK(ctx, t, outsiderHTTP, "http://"+echoAlt+"/")
		refused(t, echoAddr)
		waitOK(ctx, t, meshHTTP, echoURL)
		// 9090 is plaintext only now: an mTLS client is closed.
		if code, err := mtlsTo(echoAlt, "spiffe://cluster.local/ns/demo/sa/tester"); err == nil {
			t.Errorf("mTLS to the DISABLE port got %d, want the connection closed", code)
		}
	})

	t.Run("namespace DISABLE beats the mesh: plaintext served, the client sidecar sends plaintext", func(t *testing.T) {
		write(t, meshSTRICT, pa("legacy", "default", "  mtls: {mode: DISABLE}\n"))
		const legacyCluster = "outbound|80||legacy.legacy.svc.cluster.local"
		err := poll(ctx, 30*time.Second, func() error {
			has, found, err := adminClusterHasTLS(ctx, client, legacyCluster)
			if err != nil {
				return err
			}
			if !found || has {
				return fmt.Errorf("cluster %s: found %v, TLS %v; want plaintext", legacyCluster, found, has)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		waitOK(ctx, t, outsiderHTTP, "http://"+legacyAddr+"/")
		before := stat(t, ctx, legacy, handshakes)
		for range 3 {
			waitOK(ctx, t, meshHTTP, legacyURL)
		}
		if n := stat(t, ctx, legacy, handshakes); n != before {
			t.Errorf("legacy's inbound handshakes went %d -> %d under DISABLE: the sidecar hop is still TLS", before, n)
		}
		if code, err := mtlsTo(legacyAddr, "spiffe://cluster.local/ns/demo/sa/tester"); err == nil {
			t.Errorf("mTLS to a DISABLE workload got %d, want the connection closed", code)
		}
		// The rest of the mesh is still STRICT.
		refused(t, echoAddr)
		waitOK(ctx, t, meshHTTP, echoURL)
	})

	t.Run("a client sidecar accepts a server of the mesh's trust domain only", func(t *testing.T) {
		// An impostor in the non-mesh pod claims a sidecar (tlsMode
		// label): the client sidecar originates mTLS to it and checks
		// its certificate, from the mesh root either way, for the
		// SPIFFE ID spiffe://cluster.local/ns/demo/sa/default.
		var served atomic.Pointer[tls.Certificate]
		lis, err := outsider.Listen(ctx, "tcp", ":8443")
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprint(w, "impostor")
		})}
		// A connection per request: each request is a new handshake
		// between the client sidecar and the impostor.
		srv.SetKeepAlivesEnabled(false)
		srvTLS := &tls.Config{ClientAuth: tls.RequireAnyClientCert,
			GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return served.Load(), nil }}
		go srv.Serve(tls.NewListener(lis, srvTLS))
		t.Cleanup(func() { srv.Close() })
		impostor := fmt.Sprintf(`apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: impostor, namespace: demo}
spec:
  hosts: [impostor.demo.svc.cluster.local]
  addresses: [240.240.0.20]
  ports: [{number: 80, name: http, protocol: HTTP, targetPort: 8443}]
  location: MESH_INTERNAL
  resolution: STATIC
  workloadSelector: {labels: {app: impostor}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: impostor, namespace: demo}
spec:
  address: %s
  labels: {app: impostor, security.istio.io/tlsMode: istio}
`, outsider.IP)
		if err := m.WriteConfig("impostor.yaml", []byte(impostor)); err != nil {
			t.Fatal(err)
		}
		good := issue(t, caCert, caKey, "spiffe://cluster.local/ns/demo/sa/default")
		served.Store(&good)
		waitOK(ctx, t, meshHTTP, "http://240.240.0.20/")
		evil := issue(t, caCert, caKey, "spiffe://evil.example/ns/demo/sa/default")
		served.Store(&evil)
		// The impostor is now another server: it does not hold the keys
		// of the tickets the client sidecar got from the good one (a
		// server that does holds that session's secret, and resuming it
		// proves nothing new), so the sidecar's cached session cannot be
		// resumed and the evil certificate is checked.
		var fresh [32]byte
		if _, err := rand.Read(fresh[:]); err != nil {
			t.Fatal(err)
		}
		srvTLS.SetSessionTicketKeys([][32]byte{fresh})
		resp, err := meshHTTP.Get("http://240.240.0.20/")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("a server of trust domain evil.example answered %d %q through the client sidecar, want 503 (the handshake refused)", resp.StatusCode, body)
		}
		served.Store(&good)
		waitOK(ctx, t, meshHTTP, "http://240.240.0.20/")
	})
}

// closedByPeer reports whether err is the peer closing or resetting the
// connection (not a timeout).
func closedByPeer(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	// net/http's Transport says "http: server closed idle connection"
	// for a kept-alive connection the server closed before answering
	// (the TCP authorization tests reuse one that a new policy then
	// closes): the same outcome as an EOF on a new one.
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		strings.Contains(err.Error(), "EOF") || strings.Contains(err.Error(), "connection reset") ||
		strings.Contains(err.Error(), "server closed idle connection")
}

// adminClusterHasTLS reads a pod proxy's config dump and reports whether
// the named cluster has a transport socket.
func adminClusterHasTLS(ctx context.Context, p *localmesh.Pod, name string) (hasTLS, found bool, err error) {
	body, err := p.Admin(ctx, "/config_dump")
	if err != nil {
		return false, false, err
	}
	var doc any
	if err := json.Unmarshal(body, &doc); err != nil {
		return false, false, err
	}
	hasTLS, found = clusterHasTLS(doc, name)
	return hasTLS, found, nil
}
