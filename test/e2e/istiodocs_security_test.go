package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/localmesh"
)

// TestIstioDocsSecurityTasks applies the policies of istio.io's security
// tasks as the tasks print them (names and namespaces as there; only the
// jwksUri points at a server of the test, for the machine is offline) to
// sleep and httpbin sidecars with mesh certificates, and checks the
// answers the tasks document:
//   - "JWT authentication": Istio's sample issuer and keys; no token 200,
//     an invalid token 401, Istio's demo.jwt 200; require-jwt makes a
//     request without a token 403 "RBAC: access denied"; with the
//     request.auth.claims[groups] condition demo.jwt (no groups) is 403
//     and groups-scope.jwt (group1) 200;
//   - "Authorization for HTTP traffic": allow-nothing (spec {}) denies
//     everything; an ALLOW of the sleep principal for GET lets sleep's GET
//     through and denies its POST;
//   - "Authorization policies with a deny action": deny-method-get with
//     `when request.headers[x-token] notValues [admin]` denies GET unless
//     x-token is admin, and lets POST through.
func TestIstioDocsSecurityTasks(t *testing.T) {
	requireMesh(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	_, file, _, _ := runtime.Caller(0)
	samples := filepath.Join(filepath.Dir(file), "testdata", "istiodocs")
	read := func(name string) string {
		data, err := os.ReadFile(filepath.Join(samples, name))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(data))
	}
	jwks, demoJWT, groupsJWT := read("jwks.json"), read("demo.jwt"), read("groups-scope.jwt")
	keySrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, jwks)
	}))
	defer keySrv.Close()

	echo := []string{"strait-echo", "--addr", ":8080", "--version", "v1"}
	m := startMesh(ctx, t, "istiodocs", localmesh.Options{SecureXDS: true, Workloads: []localmesh.Workload{
		{Name: "sleep", Namespace: "foo", ConfigIP: "10.99.0.20", ServiceAccount: "sleep"},
		{Name: "httpbin", Namespace: "foo", ConfigIP: "10.99.0.21", ServiceAccount: "httpbin", App: echo, AppPort: 8080},
	}})
	sleep := m.Pod("sleep")
	const httpbin = "http://240.240.0.20:8000/"

	type answer struct {
		status int
		body   string
	}
	do := func(method, path string, header map[string]string) (answer, error) {
		req, err := http.NewRequestWithContext(ctx, method, httpbin+strings.TrimPrefix(path, "/"), nil)
		if err != nil {
			return answer{}, err
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := sleep.NewHTTPClient(false).Do(req)
		if err != nil {
			return answer{}, err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return answer{status: resp.StatusCode, body: strings.TrimSpace(string(b))}, nil
	}
	// expect checks one request's status (and, for 403, Istio's body).
	expect := func(method, path string, header map[string]string, status int) error {
		a, err := do(method, path, header)
		if err != nil {
			return fmt.Errorf("%s %s: %w", method, path, err)
		}
		if a.status != status || (status == 403 && a.body != "RBAC: access denied") {
			return fmt.Errorf("%s %s %v: %d %q, want %d", method, path, header, a.status, a.body, status)
		}
		return nil
	}
	// apply writes the task's policies and waits until probe holds.
	apply := func(t *testing.T, name, policies string, probe func() error) {
		t.Helper()
		if err := m.WriteConfig(name, []byte(policies)); err != nil {
			t.Fatal(err)
		}
		if err := poll(ctx, applyTimeout, probe); err != nil {
			t.Fatalf("%s not in force: %v", name, err)
		}
	}
	remove := func(t *testing.T, name string, probe func() error) {
		t.Helper()
		if err := os.Remove(filepath.Join(m.ConfigDir(), name)); err != nil {
			t.Fatal(err)
		}
		if err := poll(ctx, applyTimeout, probe); err != nil {
			t.Fatalf("%s still in force: %v", name, err)
		}
	}
	check := func(t *testing.T, err error) {
		t.Helper()
		if err != nil {
			t.Error(err)
		}
	}
	bearer := func(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }

	if err := poll(ctx, applyTimeout, func() error { return expect("GET", "/headers", nil, 200) }); err != nil {
		t.Fatalf("before any policy: %v", err)
	}

	t.Run("JWT authentication", func(t *testing.T) {
		apply(t, "jwt.yaml", `apiVersion: security.istio.io/v1
kind: RequestAuthentication
metadata:
  name: "jwt-example"
  namespace: foo
spec:
  selector:
    matchLabels:
      app: httpbin
  jwtRules:
  - issuer: "testing@secure.istio.io"
    jwksUri: "`+keySrv.URL+`/jwks.json"
`, func() error { return expect("GET", "/headers", bearer("deadbeef"), 401) })
		check(t, expect("GET", "/headers", nil, 200))
		check(t, expect("GET", "/headers", bearer(demoJWT), 200))

		apply(t, "policy.yaml", `apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata:
  name: require-jwt
  namespace: foo
spec:
  selector:
    matchLabels:
      app: httpbin
  action: ALLOW
  rules:
  - from:
    - source:
       requestPrincipals: ["testing@secure.istio.io/testing@secure.istio.io"]
`, func() error { return expect("GET", "/headers", nil, 403) })
		check(t, expect("GET", "/headers", bearer(demoJWT), 200))

		apply(t, "policy.yaml", `apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata:
  name: require-jwt
  namespace: foo
spec:
  selector:
    matchLabels:
      app: httpbin
  action: ALLOW
  rules:
  - from:
    - source:
       requestPrincipals: ["testing@secure.istio.io/testing@secure.istio.io"]
    when:
    - key: request.auth.claims[groups]
      values: ["group1"]
`, func() error { return expect("GET", "/headers", bearer(demoJWT), 403) })
		check(t, expect("GET", "/headers", bearer(groupsJWT), 200))
		check(t, expect("GET", "/headers", nil, 403))

		remove(t, "policy.yaml", func() error { return expect("GET", "/headers", nil, 200) })
		remove(t, "jwt.yaml", func() error { return expect("GET", "/headers", bearer("deadbeef"), 200) })
	})

	t.Run("Authorization for HTTP traffic", func(t *testing.T) {
		apply(t, "policy.yaml", `apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata:
  name: allow-nothing
  namespace: foo
spec:
  {}
`, func() error { return expect("GET", "/headers", nil, 403) })
		check(t, expect("POST", "/post", nil, 403))

		apply(t, "policy.yaml", `apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata:
  name: allow-nothing
  namespace: foo
spec:
  {}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata:
  name: "httpbin-viewer"
  namespace: foo
spec:
  selector:
    matchLabels:
      app: httpbin
  action: ALLOW
  rules:
  - from:
    - source:
        principals: ["cluster.local/ns/foo/sa/sleep"]
    to:
    - operation:
        methods: ["GET"]
`, func() error { return expect("GET", "/headers", nil, 200) })
		check(t, expect("POST", "/post", nil, 403))
		remove(t, "policy.yaml", func() error { return expect("POST", "/post", nil, 200) })
	})

	t.Run("Authorization policies with a deny action", func(t *testing.T) {
		apply(t, "policy.yaml", `apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata:
  name: deny-method-get
  namespace: foo
spec:
  selector:
    matchLabels:
      app: httpbin
  action: DENY
  rules:
  - to:
    - operation:
        methods: ["GET"]
    when:
    - key: request.headers[x-token]
      notValues: ["admin"]
`, func() error { return expect("GET", "/get", nil, 403) })
		check(t, expect("GET", "/get", map[string]string{"x-token": "admin"}, 200))
		check(t, expect("GET", "/get", map[string]string{"x-token": "guest"}, 403))
		check(t, expect("POST", "/post", nil, 200))
		remove(t, "policy.yaml", func() error { return expect("GET", "/get", nil, 200) })
	})
}
