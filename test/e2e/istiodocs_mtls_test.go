package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/localmesh"
)

// TestIstioDocsMTLSTasks applies the YAML of istio.io's mutual TLS and
// authorization tasks, as the tasks print it, to the tasks' workloads:
// sleep and httpbin in namespaces foo and bar with sidecars, tcp-echo in
// foo, and a client without a sidecar (the tasks' namespace legacy). The
// mesh's trust domain is strait.example, so the tasks' principals
// "cluster.local/ns/..." stand for the local trust domain, as in Istio.
// One mesh; each subtest writes its policies, waits until they show in
// the answers, checks what the task documents, and removes them:
//   - straitctl proxy-config secret shows sleep's SPIFFE ID of the mesh's
//     trust domain, proxy-status every proxy in sync, and httpbin sees
//     the X-Forwarded-Client-Cert of a sidecar client (none from the
//     plaintext client);
//   - "Mutual TLS Migration": a namespace STRICT closes the sidecar-less
//     client's connections to that namespace only; the mesh-wide STRICT
//     closes them everywhere; sidecars are served throughout;
//   - "Authentication Policy": a workload STRICT by selector, its
//     portLevelMtls DISABLE port, a workload PERMISSIVE beating its
//     namespace's STRICT, and a DestinationRule tls DISABLE towards a
//     STRICT server (503);
//   - with the mesh config's enableAutoMtls false, a client sidecar
//     sends plaintext to a STRICT server (503) until a DestinationRule
//     says ISTIO_MUTUAL;
//   - "Authorization for TCP traffic": ALLOW by ports (the port the
//     service does not declare is closed too), ALLOW with an HTTP-only
//     field (nothing matches: every port closed), DENY with an HTTP-only
//     field (denies every port) and with a port (that port only);
//   - DENY on principals (exact and "*", and notPrincipals "*" to require
//     mTLS), notMethods, notPaths, source namespaces;
//   - `when` on source.ip, destination.port and connection.sni;
//   - "Dry run": an istio.io/dry-run annotation that is not a boolean is
//     refused by straitctl validate, naming it;
//   - "Trust domain migration": a policy naming the old trust domain
//     denies until the mesh config's trustDomainAliases lists it; a client
//     certificate of the old trust domain is refused in the handshake
//     until then, and afterwards is the policy's principal; a server
//     with an old-td certificate is refused by the client sidecar (503)
//     until then, and afterwards served.
func TestIstioDocsMTLSTasks(t *testing.T) {
	requireMesh(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	meshFile := filepath.Join(t.TempDir(), "mesh.yaml")
	writeMesh := func(t *testing.T, extra string) { replaceFile(t, meshFile, "trustDomain: strait.example\n"+extra) }
	writeMesh(t, "")

	echo := filepath.Join(binDir, "strait-echo")
	// The agents learn the trust domain as injected sidecars do, from
	// TRUST_DOMAIN (Istio's injector sets it from the mesh config).
	m := startMesh(ctx, t, "istiodocs-mtls", localmesh.Options{SecureXDS: true, AgentEnv: []string{"TRUST_DOMAIN=strait.example"}, StraitdArgs: []string{"--mesh", meshFile}, Workloads: []localmesh.Workload{
		{Name: "sleep", Namespace: "foo", ConfigIP: "10.99.0.20", ServiceAccount: "sleep"},
		{Name: "httpbin", Namespace: "foo", ConfigIP: "10.99.0.21", ServiceAccount: "httpbin",
			App: []string{echo, "--addr", ":8080", "--version", "foo"}, AppPort: 8080},
		{Name: "sleep-bar", Namespace: "bar", ConfigIP: "10.99.0.22", ServiceAccount: "sleep"},
		{Name: "httpbin-bar", Namespace: "bar", ConfigIP: "10.99.0.23", ServiceAccount: "httpbin",
			App: []string{echo, "--addr", ":8080", "--version", "bar"}, AppPort: 8080},
		{Name: "tcp-echo", Namespace: "foo", ConfigIP: "10.99.0.24", ServiceAccount: "tcp-echo",
			App: []string{echo, "--addr", ":9000,:9001,:9002", "--version", "tcp"}, AppPort: 9002},
	}})
	// The tasks' sleep of namespace legacy: its own network namespace on
	// the pods' bridge, no capture rules, no sidecar. The mesh's network
	// removes it on Close.
	legacy, err := m.Network().AddPod(ctx, "leg-sleep")
	if err != nil {
		t.Fatal(err)
	}
	clients := map[string]*http.Client{
		"sleep.foo": m.Pod("sleep").NewHTTPClient(false),
		"sleep.bar": m.Pod("sleep-bar").NewHTTPClient(false),
		"sleep.legacy": {Timeout: 5 * time.Second, Transport: &http.Transport{
			DialContext: legacy.DialContext, DisableKeepAlives: true}},
	}
	// The sidecar clients reach the services by their addresses; the
	// legacy client, outside the mesh, the pods' own (as kube-proxy would
	// send it).
	httpbinFoo, httpbinBar := "http://240.240.0.21:8000", "http://240.240.0.23:8000"
	legacyFoo := "http://" + net.JoinHostPort(m.Pod("httpbin").IP, "8080")
	legacyBar := "http://" + net.JoinHostPort(m.Pod("httpbin-bar").IP, "8080")
	tcpEcho := func(port string) string {
		if port == "9002" { // not in the service: the pod's address, as the task does
			return "http://" + net.JoinHostPort(m.Pod("tcp-echo").IP, port)
		}
		return "http://240.240.0.24:" + port
	}

	// mtlsFrom connects from the legacy pod with Istio's ALPN and a
	// certificate of the mesh root for id, sends GET /ip, and returns the
	// status or the error (the handshake's when it is refused).
	roots, caCert, caKey := meshCA(t, m.CADir())
	mtlsFrom := func(addr, id string) (int, error) {
		cert := issue(t, caCert, caKey, id)
		raw, err := legacy.DialContext(ctx, "tcp", addr)
		if err != nil {
			return 0, err
		}
		defer raw.Close()
		raw.SetDeadline(time.Now().Add(5 * time.Second))
		conn := tls.Client(raw, &tls.Config{RootCAs: roots, NextProtos: []string{"istio-peer-exchange", "istio"}, InsecureSkipVerify: true, Certificates: []tls.Certificate{cert}})
		if err := conn.Handshake(); err != nil {
			return 0, err
		}
		fmt.Fprintf(conn, "GET /ip HTTP/1.1\r\nHost: httpbin.foo.svc.cluster.local\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}

	// expect sends one request and checks its outcome: a status (for 403
	// also Istio's body "RBAC: access denied"), or closed for a
	// connection the server side closed without an HTTP answer.
	const closed = -1
	outcome := func(client, method, url string, header map[string]string) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, method, url, nil)
		if err != nil {
			return 0, "", err
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := clients[client].Do(req)
		if err != nil {
			if closedByPeer(err) {
				return closed, "", nil
			}
			return 0, "", err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, strings.TrimSpace(string(b)), nil
	}
	expectH := func(client, method, url string, header map[string]string, want int) error {
		got, body, err := outcome(client, method, url, header)
		switch {
		case err != nil:
			return fmt.Errorf("%s: %s %s: %w", client, method, url, err)
		case got != want && want == closed:
			return fmt.Errorf("%s: %s %s: %d %.200q, want the connection closed", client, method, url, got, body)
		case got != want && got == closed:
			return fmt.Errorf("%s: %s %s: connection closed, want %d", client, method, url, want)
		case got != want:
			return fmt.Errorf("%s: %s %s: %d %.200q, want %d", client, method, url, got, body, want)
		case want == http.StatusForbidden && body != "RBAC: access denied":
			return fmt.Errorf("%s: %s %s: 403 %.200q, want Istio's body \"RBAC: access denied\"", client, method, url, body)
		}
		return nil
	}
	expect := func(client, method, url string, want int) error { return expectH(client, method, url, nil, want) }
	check := func(t *testing.T, err error) {
		t.Helper()
		if err != nil {
			t.Error(err)
		}
	}
	// apply writes one file of config and waits until probe holds.
	apply := func(t *testing.T, name, yaml string, probe func() error) {
		t.Helper()
		if err := m.WriteConfig(name, []byte(yaml)); err != nil {
			t.Fatal(err)
		}
		if err := poll(ctx, applyTimeout, probe); err != nil {
			t.Fatalf("%s not in force: %v", name, err)
		}
	}
	remove := func(t *testing.T, probe func() error, names ...string) {
		t.Helper()
		for _, name := range names {
			if err := os.Remove(filepath.Join(m.ConfigDir(), name)); err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
		}
		if err := poll(ctx, applyTimeout, probe); err != nil {
			t.Fatalf("%v still in force: %v", names, err)
		}
	}
	all := func(errs ...func() error) func() error {
		return func() error {
			for _, e := range errs {
				if err := e(); err != nil {
					return err
				}
			}
			return nil
		}
	}
	is := func(client, method, url string, want int) func() error {
		return func() error { return expect(client, method, url, want) }
	}

	// Every client reaches every server before any policy (PERMISSIVE).
	baseline := all(
		is("sleep.foo", "GET", httpbinFoo+"/ip", 200), is("sleep.foo", "GET", httpbinBar+"/ip", 200),
		is("sleep.bar", "GET", httpbinFoo+"/ip", 200), is("sleep.bar", "GET", httpbinBar+"/ip", 200),
		is("sleep.legacy", "GET", legacyFoo+"/ip", 200), is("sleep.legacy", "GET", legacyBar+"/ip", 200))
	if err := poll(ctx, applyTimeout, baseline); err != nil {
		t.Fatalf("before any policy: %v", err)
	}

	ctl := func(args ...string) (string, error) {
		out, err := exec.CommandContext(ctx, filepath.Join(binDir, "straitctl"), args...).CombinedOutput()
		return string(out), err
	}

	// What the tasks read to see that mTLS is on: the certificate the
	// sidecar holds (istioctl proxy-config secret), every proxy in sync
	// (istioctl proxy-status), and the X-Forwarded-Client-Cert httpbin
	// shows a sidecar client, which a plaintext client does not get.
	t.Run("straitctl and X-Forwarded-Client-Cert show the identities", func(t *testing.T) {
		out, err := ctl("proxy-config", "secret", "sleep.foo", "--straitd-addr", m.MonitoringAddr())
		if err != nil || !strings.Contains(out, "spiffe://strait.example/ns/foo/sa/sleep") {
			t.Errorf("straitctl proxy-config secret sleep.foo: %v; want spiffe://strait.example/ns/foo/sa/sleep in\n%s", err, out)
		}
		err = poll(ctx, applyTimeout, func() error {
			out, err := ctl("proxy-status", "--straitd-addr", m.MonitoringAddr())
			if err != nil {
				return fmt.Errorf("straitctl proxy-status: %w\n%s", err, out)
			}
			for _, p := range []string{"sleep.foo", "httpbin.foo", "sleep-bar.bar", "httpbin-bar.bar", "tcp-echo.foo"} {
				if !strings.Contains(out, p) {
					return fmt.Errorf("proxy-status lacks %s:\n%s", p, out)
				}
			}
			if strings.Contains(out, "STALE") || strings.Contains(out, "NOT SENT") {
				return fmt.Errorf("proxy-status has proxies not in sync:\n%s", out)
			}
			return nil
		})
		check(t, err)

		xfcc := func(client, url string) (string, error) {
			code, body, err := outcome(client, "GET", url+"/headers", nil)
			if err != nil {
				return "", fmt.Errorf("%s: GET %s/headers: %w", client, url, err)
			}
			if code != 200 {
				return "", fmt.Errorf("%s: GET %s/headers: %d, want 200", client, url, code)
			}
			var reply struct{ Headers map[string]string }
			if err := json.Unmarshal([]byte(body), &reply); err != nil {
				return "", fmt.Errorf("%s: %w: %s", client, err, body)
			}
			for k, v := range reply.Headers {
				if strings.EqualFold(k, "x-forwarded-client-cert") {
					return v, nil
				}
			}
			return "", nil
		}
		got, err := xfcc("sleep.foo", httpbinFoo)
		check(t, err)
		for _, want := range []string{"By=spiffe://strait.example/ns/foo/sa/httpbin", "URI=spiffe://strait.example/ns/foo/sa/sleep"} {
			if !strings.Contains(got, want) {
				t.Errorf("sleep.foo -> httpbin.foo: X-Forwarded-Client-Cert %q lacks %s", got, want)
			}
		}
		got, err = xfcc("sleep.legacy", legacyFoo)
		check(t, err)
		if got != "" {
			t.Errorf("sleep.legacy -> httpbin.foo (plaintext): X-Forwarded-Client-Cert %q, want none", got)
		}
	})

	t.Run("Mutual TLS Migration", func(t *testing.T) {
		apply(t, "peerauthn.yaml", `apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata:
  name: "default"
  namespace: "foo"
spec:
  mtls:
    mode: STRICT
`, is("sleep.legacy", "GET", legacyFoo+"/ip", closed))
		check(t, expect("sleep.legacy", "GET", legacyBar+"/ip", 200))
		check(t, expect("sleep.foo", "GET", httpbinFoo+"/ip", 200))
		check(t, expect("sleep.bar", "GET", httpbinFoo+"/ip", 200))

		apply(t, "peerauthn-mesh.yaml", `apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata:
  name: "default"
  namespace: "istio-system"
spec:
  mtls:
    mode: STRICT
`, is("sleep.legacy", "GET", legacyBar+"/ip", closed))
		check(t, expect("sleep.legacy", "GET", legacyFoo+"/ip", closed))
		check(t, expect("sleep.foo", "GET", httpbinBar+"/ip", 200))
		check(t, expect("sleep.bar", "GET", httpbinBar+"/ip", 200))
		remove(t, baseline, "peerauthn.yaml", "peerauthn-mesh.yaml")
	})

	t.Run("Authentication Policy", func(t *testing.T) {
		// Enable mutual TLS per workload, then a port apart.
		apply(t, "peerauthn.yaml", `apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata:
  name: "httpbin"
  namespace: "bar"
spec:
  selector:
    matchLabels:
      app: httpbin
  mtls:
    mode: STRICT
`, is("sleep.legacy", "GET", legacyBar+"/ip", closed))
		check(t, expect("sleep.legacy", "GET", legacyFoo+"/ip", 200))
		check(t, expect("sleep.foo", "GET", httpbinBar+"/ip", 200))
		apply(t, "peerauthn.yaml", `apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata:
  name: "httpbin"
  namespace: "bar"
spec:
  selector:
    matchLabels:
      app: httpbin
  mtls:
    mode: STRICT
  portLevelMtls:
    8080:
      mode: DISABLE
`, all(is("sleep.legacy", "GET", legacyBar+"/ip", 200),
			// The client sidecar's cluster turns plaintext in its own push.
			is("sleep.foo", "GET", httpbinBar+"/ip", 200)))

		// Policy precedence: the workload's PERMISSIVE beats the
		// namespace's STRICT.
		apply(t, "peerauthn.yaml", `apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata:
  name: "default"
  namespace: "foo"
spec:
  mtls:
    mode: STRICT
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata:
  name: "overwrite-example"
  namespace: "foo"
spec:
  selector:
    matchLabels:
      app: httpbin
  mtls:
    mode: PERMISSIVE
`, all(is("sleep.legacy", "GET", legacyFoo+"/ip", 200), is("sleep.legacy", "GET", legacyBar+"/ip", 200)))

		// A client sidecar told to send plaintext to a STRICT server:
		// the server closes the connection, the client answers 503.
		apply(t, "peerauthn.yaml", `apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata:
  name: "default"
  namespace: "bar"
spec:
  mtls:
    mode: STRICT
`, is("sleep.legacy", "GET", legacyBar+"/ip", closed))
		apply(t, "dr.yaml", `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata:
  name: "httpbin"
  namespace: "bar"
spec:
  host: "httpbin.bar.svc.cluster.local"
  trafficPolicy:
    tls:
      mode: DISABLE
`, is("sleep.foo", "GET", httpbinBar+"/ip", http.StatusServiceUnavailable))
		check(t, expect("sleep.foo", "GET", httpbinFoo+"/ip", 200))
		remove(t, baseline, "peerauthn.yaml", "dr.yaml")
	})

	// With auto mTLS off (enableAutoMtls: false in the mesh config) a
	// client sidecar sends plaintext unless a DestinationRule says
	// ISTIO_MUTUAL, so a STRICT server needs one.
	t.Run("enableAutoMtls false needs ISTIO_MUTUAL towards STRICT", func(t *testing.T) {
		apply(t, "peerauthn.yaml", `apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata:
  name: "default"
  namespace: "foo"
spec:
  mtls:
    mode: STRICT
`, is("sleep.legacy", "GET", legacyFoo+"/ip", closed))
		writeMesh(t, "enableAutoMtls: false\n")
		if err := poll(ctx, applyTimeout, is("sleep.bar", "GET", httpbinFoo+"/ip", http.StatusServiceUnavailable)); err != nil {
			t.Fatalf("enableAutoMtls false not in force: %v", err)
		}
		check(t, expect("sleep.bar", "GET", httpbinBar+"/ip", 200)) // PERMISSIVE takes plaintext
		apply(t, "dr.yaml", `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata:
  name: "httpbin"
  namespace: "foo"
spec:
  host: "httpbin.foo.svc.cluster.local"
  trafficPolicy:
    tls:
      mode: ISTIO_MUTUAL
`, is("sleep.bar", "GET", httpbinFoo+"/ip", 200))
		writeMesh(t, "")
		remove(t, baseline, "peerauthn.yaml", "dr.yaml")
	})

	t.Run("Authorization for TCP traffic", func(t *testing.T) {
		tcpBaseline := all(is("sleep.foo", "GET", tcpEcho("9000"), 200), is("sleep.foo", "GET", tcpEcho("9001"), 200),
			is("sleep.foo", "GET", tcpEcho("9002"), 200))
		if err := poll(ctx, applyTimeout, tcpBaseline); err != nil {
			t.Fatalf("tcp-echo before any policy: %v", err)
		}
		policy := func(action, operation string) string {
			return `apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata:
  name: tcp-policy
  namespace: foo
spec:
  selector:
    matchLabels:
      app: tcp-echo
  action: ` + action + `
  rules:
  - to:
    - operation:
` + operation
		}
		apply(t, "authz.yaml", policy("ALLOW", `        ports: ["9000", "9001"]
`), is("sleep.foo", "GET", tcpEcho("9002"), closed))
		check(t, expect("sleep.foo", "GET", tcpEcho("9000"), 200))
		check(t, expect("sleep.foo", "GET", tcpEcho("9001"), 200))

		// An HTTP-only field in an ALLOW rule: the rule matches no TCP
		// connection, and nothing else allows.
		apply(t, "authz.yaml", policy("ALLOW", `        methods: ["GET"]
        ports: ["9000"]
`), is("sleep.foo", "GET", tcpEcho("9000"), closed))
		check(t, expect("sleep.foo", "GET", tcpEcho("9001"), closed))

		// In a DENY rule the HTTP-only field is dropped: every port is
		// denied, then with a port only that one.
		apply(t, "authz.yaml", policy("DENY", `        methods: ["GET"]
`), all(is("sleep.foo", "GET", tcpEcho("9000"), closed), is("sleep.foo", "GET", tcpEcho("9001"), closed)))
		apply(t, "authz.yaml", policy("DENY", `        methods: ["GET"]
        ports: ["9000"]
`), is("sleep.foo", "GET", tcpEcho("9001"), 200))
		check(t, expect("sleep.foo", "GET", tcpEcho("9000"), closed))
		remove(t, tcpBaseline, "authz.yaml")
	})

	denyPolicy := func(rule string) string {
		return `apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata:
  name: deny-policy
  namespace: foo
spec:
  selector:
    matchLabels:
      app: httpbin
  action: DENY
  rules:
` + rule
	}
	fooBaseline := all(is("sleep.foo", "GET", httpbinFoo+"/ip", 200), is("sleep.bar", "GET", httpbinFoo+"/ip", 200),
		is("sleep.legacy", "GET", legacyFoo+"/ip", 200))

	t.Run("DENY on principals", func(t *testing.T) {
		apply(t, "authz.yaml", denyPolicy(`  - from:
    - source:
        principals: ["cluster.local/ns/bar/sa/sleep"]
`), is("sleep.bar", "GET", httpbinFoo+"/ip", 403))
		check(t, expect("sleep.foo", "GET", httpbinFoo+"/ip", 200))
		check(t, expect("sleep.legacy", "GET", legacyFoo+"/ip", 200))

		// "*" is any authenticated peer: the plaintext client has none.
		apply(t, "authz.yaml", denyPolicy(`  - from:
    - source:
        principals: ["*"]
`), is("sleep.foo", "GET", httpbinFoo+"/ip", 403))
		check(t, expect("sleep.bar", "GET", httpbinFoo+"/ip", 403))
		check(t, expect("sleep.legacy", "GET", legacyFoo+"/ip", 200))

		// notPrincipals "*": deny whoever is not authenticated (require
		// mTLS by authorization).
		apply(t, "authz.yaml", denyPolicy(`  - from:
    - source:
        notPrincipals: ["*"]
`), is("sleep.legacy", "GET", legacyFoo+"/ip", 403))
		check(t, expect("sleep.foo", "GET", httpbinFoo+"/ip", 200))

		// A principal wildcard in the namespace part.
		apply(t, "authz.yaml", denyPolicy(`  - from:
    - source:
        principals: ["*/ns/bar/sa/sleep"]
`), is("sleep.bar", "GET", httpbinFoo+"/ip", 403))
		check(t, expect("sleep.foo", "GET", httpbinFoo+"/ip", 200))
		remove(t, fooBaseline, "authz.yaml")
	})

	t.Run("DENY on notMethods and notPaths", func(t *testing.T) {
		apply(t, "authz.yaml", denyPolicy(`  - to:
    - operation:
        notMethods: ["GET"]
`), is("sleep.foo", "POST", httpbinFoo+"/post", 403))
		check(t, expect("sleep.foo", "GET", httpbinFoo+"/get", 200))
		check(t, expect("sleep.foo", "DELETE", httpbinFoo+"/delete", 403))

		apply(t, "authz.yaml", denyPolicy(`  - to:
    - operation:
        notPaths: ["/headers", "/ip*"]
`), is("sleep.foo", "GET", httpbinFoo+"/get", 403))
		check(t, expect("sleep.foo", "GET", httpbinFoo+"/headers", 200))
		check(t, expect("sleep.foo", "GET", httpbinFoo+"/ip/x", 200))
		check(t, expect("sleep.foo", "GET", httpbinFoo+"/headers/x", 403))
		remove(t, fooBaseline, "authz.yaml")
	})

	t.Run("source namespaces", func(t *testing.T) {
		apply(t, "authz.yaml", denyPolicy(`  - from:
    - source:
        namespaces: ["bar"]
`), is("sleep.bar", "GET", httpbinFoo+"/ip", 403))
		check(t, expect("sleep.foo", "GET", httpbinFoo+"/ip", 200))
		check(t, expect("sleep.legacy", "GET", legacyFoo+"/ip", 200))
		apply(t, "authz.yaml", `apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata:
  name: allow-foo
  namespace: foo
spec:
  selector:
    matchLabels:
      app: httpbin
  action: ALLOW
  rules:
  - from:
    - source:
        namespaces: ["foo"]
`, is("sleep.legacy", "GET", legacyFoo+"/ip", 403))
		check(t, expect("sleep.foo", "GET", httpbinFoo+"/ip", 200))
		check(t, expect("sleep.bar", "GET", httpbinFoo+"/ip", 403))
		remove(t, fooBaseline, "authz.yaml")
	})

	t.Run("when source.ip, destination.port, connection.sni", func(t *testing.T) {
		apply(t, "authz.yaml", denyPolicy(`  - when:
    - key: source.ip
      values: ["`+legacy.IP.String()+`"]
`), is("sleep.legacy", "GET", legacyFoo+"/ip", 403))
		check(t, expect("sleep.foo", "GET", httpbinFoo+"/ip", 200))

		// destination.port is the workload's port (8080), not the
		// service's (8000).
		apply(t, "authz.yaml", denyPolicy(`  - when:
    - key: destination.port
      values: ["8080"]
`), is("sleep.foo", "GET", httpbinFoo+"/ip", 403))
		check(t, expect("sleep.legacy", "GET", legacyFoo+"/ip", 403))
		apply(t, "authz.yaml", denyPolicy(`  - when:
    - key: destination.port
      values: ["8000"]
`), is("sleep.foo", "GET", httpbinFoo+"/ip", 200))

		// The SNI a client sidecar sends is Istio's
		// outbound_.PORT_.SUBSET_.HOST; a plaintext client sends none.
		apply(t, "authz.yaml", denyPolicy(`  - when:
    - key: connection.sni
      values: ["outbound_.8000_._.httpbin.foo.svc.cluster.local"]
`), is("sleep.foo", "GET", httpbinFoo+"/ip", 403))
		check(t, expect("sleep.legacy", "GET", legacyFoo+"/ip", 200))
		apply(t, "authz.yaml", denyPolicy(`  - when:
    - key: connection.sni
      values: ["*.bar.svc.cluster.local"]
`), is("sleep.foo", "GET", httpbinFoo+"/ip", 200))
		remove(t, fooBaseline, "authz.yaml")
	})

	// "Dry run": the annotation's value must be a boolean; anything else
	// is refused naming the annotation.
	t.Run("dry-run annotation that is not a boolean is refused by name", func(t *testing.T) {
		bad := filepath.Join(t.TempDir(), "dry-run.yaml")
		if err := os.WriteFile(bad, []byte(`apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata:
  name: deny-path-headers
  namespace: foo
  annotations:
    "istio.io/dry-run": "yes"
spec:
  selector:
    matchLabels:
      app: httpbin
  action: DENY
  rules:
  - to:
    - operation:
        paths: ["/headers"]
`), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := ctl("validate", "-f", bad)
		if err == nil || !strings.Contains(out, "metadata.annotations[istio.io/dry-run]") {
			t.Errorf("straitctl validate: %v; want the annotation named in\n%s", err, out)
		}
	})

	t.Run("Trust domain migration", func(t *testing.T) {
		// The policy of the task names the old trust domain: without an
		// alias it allows nobody here.
		apply(t, "authz.yaml", `apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata:
  name: service-httpbin.default.svc.cluster.local
  namespace: foo
spec:
  rules:
  - from:
    - source:
        principals:
        - old-td/ns/foo/sa/sleep
    to:
    - operation:
        methods:
        - GET
  selector:
    matchLabels:
      app: httpbin
`, is("sleep.foo", "GET", httpbinFoo+"/ip", 403))
		// A workload still holding a certificate of the old trust domain
		// (same root) is refused in the handshake.
		httpbinAddr := net.JoinHostPort(m.Pod("httpbin").IP, "8080")
		if code, err := mtlsFrom(httpbinAddr, "spiffe://old-td/ns/foo/sa/sleep"); err == nil {
			t.Errorf("an old-td client certificate got %d before the alias, want the handshake refused", code)
		}
		// A server still holding a certificate of the old trust domain,
		// in the legacy pod (claiming a sidecar by its tlsMode label):
		// the client sidecar checks its SPIFFE ID in the mesh's trust
		// domain and refuses it (503).
		lis, err := legacy.Listen(ctx, "tcp", ":8443")
		if err != nil {
			t.Fatal(err)
		}
		oldCert := issue(t, caCert, caKey, "spiffe://old-td/ns/legacy/sa/default")
		srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, "old-td server")
		})}
		srv.SetKeepAlivesEnabled(false) // a handshake per request
		go srv.Serve(tls.NewListener(lis, &tls.Config{ClientAuth: tls.RequireAnyClientCert, Certificates: []tls.Certificate{oldCert}}))
		defer srv.Close()
		if err := m.WriteConfig("old-server.yaml", []byte(fmt.Sprintf(`apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: old-server, namespace: legacy}
spec:
  hosts: [old-server.legacy.svc.cluster.local]
  addresses: [240.240.0.30]
  ports: [{number: 80, name: http, protocol: HTTP, targetPort: 8443}]
  location: MESH_INTERNAL
  resolution: STATIC
  workloadSelector: {labels: {app: old-server}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: old-server, namespace: legacy}
spec:
  address: %s
  labels: {app: old-server, security.istio.io/tlsMode: istio}
`, legacy.IP))); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(filepath.Join(m.ConfigDir(), "old-server.yaml"))
		const oldServer = "http://240.240.0.30"
		if err := poll(ctx, applyTimeout, is("sleep.foo", "GET", oldServer+"/", http.StatusServiceUnavailable)); err != nil {
			t.Fatalf("old-td server before the alias: %v", err)
		}

		writeMesh(t, "trustDomainAliases: [old-td]\n")
		if err := poll(ctx, applyTimeout, is("sleep.foo", "GET", httpbinFoo+"/ip", 200)); err != nil {
			t.Fatalf("trustDomainAliases [old-td] not in force: %v", err)
		}
		check(t, expect("sleep.bar", "GET", httpbinFoo+"/ip", 403))
		// With the alias the old identity is the mesh's: accepted in the
		// handshake, and the policy's principal matches it.
		err = poll(ctx, applyTimeout, func() error {
			code, err := mtlsFrom(httpbinAddr, "spiffe://old-td/ns/foo/sa/sleep")
			if err != nil {
				return fmt.Errorf("old-td/ns/foo/sa/sleep: %w; want 200", err)
			}
			if code != 200 {
				return fmt.Errorf("old-td/ns/foo/sa/sleep: %d, want 200", code)
			}
			return nil
		})
		check(t, err)
		if code, err := mtlsFrom(httpbinAddr, "spiffe://old-td/ns/bar/sa/sleep"); err != nil || code != 403 {
			t.Errorf("old-td/ns/bar/sa/sleep: %d, %v; want 403", code, err)
		}
		if code, err := mtlsFrom(httpbinAddr, "spiffe://other-td/ns/foo/sa/sleep"); err == nil {
			t.Errorf("an other-td client certificate got %d, want the handshake refused", code)
		}
		// The client sidecar accepts the old-td server now.
		check(t, poll(ctx, applyTimeout, is("sleep.foo", "GET", oldServer+"/", 200)))
		// straitctl validate loads the same mesh config.
		out, err := ctl("validate", "--mesh", meshFile, "-f", filepath.Join(m.ConfigDir(), "authz.yaml"))
		if err != nil {
			t.Errorf("straitctl validate --mesh with trustDomainAliases: %v\n%s", err, out)
		}
		writeMesh(t, "")
		remove(t, fooBaseline, "authz.yaml")
	})
}
