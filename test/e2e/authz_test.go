package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/localmesh"
)

// TestAuthorizationPolicy runs real sidecars over mTLS (file mode, SPIFFE
// identities from straitd's CA) and applies AuthorizationPolicies one set
// at a time (policy.yaml, rewritten per subtest; each waits until the new
// policy shows in the answers):
//   - ALLOW from a principal: the client's service account gets 200, the
//     intruder's (same namespace, other service account) 403 "RBAC:
//     access denied";
//   - DENY by path beats ALLOW;
//   - ipBlocks (the peer's address);
//   - a `when` on a request header;
//   - path templates: {*} matches one segment (/api/{*}/info allows
//     /api/x/info, denies /api/x/y/info), {**} any number;
//   - DENY on a TCP service closes the intruder's connection, the client's
//     goes through;
//   - a dry-run DENY lets requests through and counts them as shadow
//     denials.
func TestAuthorizationPolicy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	m := startMesh(ctx, t, "authz", localmesh.Options{SecureXDS: true, Workloads: []localmesh.Workload{
		{Name: "client", Namespace: "demo", ConfigIP: "10.99.0.10", ServiceAccount: "client"},
		{Name: "intruder", Namespace: "demo", ConfigIP: "10.99.0.13", ServiceAccount: "intruder"},
		echoPod("echo-v1", "demo", "10.99.0.11", "v1"),
		echoPod("raw", "demo", "10.99.0.12", "v1"),
	}})
	client, intruder, server := m.Pod("client"), m.Pod("intruder"), m.Pod("echo-v1")
	const echoURL, tcpURL = "http://240.240.0.10/", "http://240.240.0.11:9000/"

	// answer is one request's outcome: the status and body, or the
	// transport error.
	type answer struct {
		status int
		body   string
		err    error
	}
	do := func(p *localmesh.Pod, u string, header map[string]string) answer {
		req, err := http.NewRequestWithContext(ctx, "GET", u, nil)
		if err != nil {
			return answer{err: err}
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := p.NewHTTPClient(false).Do(req)
		if err != nil {
			return answer{err: err}
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return answer{status: resp.StatusCode, body: string(b)}
	}
	isOK := func(a answer) error {
		if a.err != nil {
			return fmt.Errorf("want 200: %w", a.err)
		}
		if a.status != 200 {
			return fmt.Errorf("got %d %q, want 200", a.status, a.body)
		}
		return nil
	}
	isDenied := func(a answer) error {
		if a.err != nil {
			return fmt.Errorf("want 403: %w", a.err)
		}
		if a.status != 403 || a.body != "RBAC: access denied" {
			return fmt.Errorf("got %d %q, want 403 \"RBAC: access denied\"", a.status, a.body)
		}
		return nil
	}
	isClosed := func(a answer) error {
		if a.err == nil {
			return fmt.Errorf("got %d %q, want the connection closed", a.status, a.body)
		}
		return nil
	}
	// apply writes the policies and waits until probe holds (the new
	// policies are in force).
	apply := func(t *testing.T, policies string, probe func() error) {
		t.Helper()
		writeConfig(t, m, "policy.yaml", []byte(policies))
		waitFor(ctx, t, applyTimeout, "policies not in force", probe)
	}
	want := func(t *testing.T, name string, a answer, check func(answer) error) {
		t.Helper()
		if err := check(a); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}

	// Before any policy everything is allowed.
	waitFor(ctx, t, applyTimeout, "without policies", func() error { return isOK(do(intruder, echoURL, nil)) })

	const allowClient = `apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: echo-allow, namespace: demo}
spec:
  selector: {matchLabels: {app: echo}}
  rules:
  - from: [{source: {principals: [cluster.local/ns/demo/sa/client]}}]
`
	t.Run("allowed principal 200, other service account 403", func(t *testing.T) {
		apply(t, allowClient, func() error { return isDenied(do(intruder, echoURL, nil)) })
		want(t, "client", do(client, echoURL, nil), isOK)
		want(t, "intruder", do(intruder, echoURL, nil), isDenied)
	})

	t.Run("DENY by path beats ALLOW", func(t *testing.T) {
		apply(t, allowClient+`---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: echo-deny-admin, namespace: demo}
spec:
  selector: {matchLabels: {app: echo}}
  action: DENY
  rules:
  - to: [{operation: {paths: ["/admin*"]}}]
`, func() error { return isDenied(do(client, echoURL+"admin/users", nil)) })
		want(t, "client /admin/users", do(client, echoURL+"admin/users", nil), isDenied)
		want(t, "client /ok", do(client, echoURL+"ok", nil), isOK)
	})

	t.Run("ipBlocks", func(t *testing.T) {
		// Only the intruder's address: the reverse of the cases above.
		apply(t, fmt.Sprintf(`apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: echo-allow, namespace: demo}
spec:
  selector: {matchLabels: {app: echo}}
  rules:
  - from: [{source: {ipBlocks: [%s/32]}}]
`, intruder.IP), func() error { return isOK(do(intruder, echoURL, nil)) })
		want(t, "intruder", do(intruder, echoURL, nil), isOK)
		want(t, "client", do(client, echoURL, nil), isDenied)
	})

	t.Run("when on a request header", func(t *testing.T) {
		token := map[string]string{"x-token": "letmein"}
		apply(t, `apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: echo-allow, namespace: demo}
spec:
  selector: {matchLabels: {app: echo}}
  rules:
  - when: [{key: "request.headers[x-token]", values: [letmein]}]
`, func() error { return isOK(do(client, echoURL, token)) })
		want(t, "client with the header", do(client, echoURL, token), isOK)
		want(t, "client without it", do(client, echoURL, nil), isDenied)
		want(t, "client with another value", do(client, echoURL, map[string]string{"x-token": "guess"}), isDenied)
	})

	t.Run("path templates", func(t *testing.T) {
		apply(t, `apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: echo-allow, namespace: demo}
spec:
  selector: {matchLabels: {app: echo}}
  rules:
  - to: [{operation: {paths: ["/api/{*}/info", "/files/{**}"]}}]
`, func() error {
			// The previous policy denies both paths; this one allows the first.
			if err := isOK(do(client, echoURL+"api/x/info", nil)); err != nil {
				return err
			}
			return isDenied(do(client, echoURL+"api/x/y/info", nil))
		})
		a := do(client, echoURL+"api/x/info", nil)
		want(t, "/api/x/info", a, isOK)
		if a.err == nil && !strings.Contains(a.body, `"path":"/api/x/info"`) {
			t.Errorf("the echo app did not answer /api/x/info: %q", a.body)
		}
		want(t, "/api/x/y/info", do(client, echoURL+"api/x/y/info", nil), isDenied)
		want(t, "/api/info", do(client, echoURL+"api/info", nil), isDenied)
		want(t, "/api/x/info?q=1 (the query is not part of the path)", do(client, echoURL+"api/x/info?q=1", nil), isOK)
		want(t, "/files/a/b/c", do(client, echoURL+"files/a/b/c", nil), isOK)
		want(t, "/filesx", do(client, echoURL+"filesx", nil), isDenied)
	})

	t.Run("TCP deny closes the connection", func(t *testing.T) {
		apply(t, `apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: raw-deny, namespace: demo}
spec:
  selector: {matchLabels: {app: raw}}
  action: DENY
  rules:
  - from: [{source: {principals: [cluster.local/ns/demo/sa/intruder]}}]
`, func() error { return isClosed(do(intruder, tcpURL, nil)) })
		want(t, "intruder", do(intruder, tcpURL, nil), isClosed)
		want(t, "client", do(client, tcpURL, nil), isOK)
		if n := stat(t, ctx, m.Pod("raw"), "tcp.rbac.denied"); n < 1 {
			t.Errorf("raw proxy tcp.rbac.denied = %d, want >= 1", n)
		}
	})

	t.Run("dry-run lets the request through", func(t *testing.T) {
		const shadow = "http.inbound_0.0.0.0_8080.rbac.istio_dry_run_deny_shadow_denied"
		before := stat(t, ctx, server, shadow)
		apply(t, `apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata:
  name: echo-deny-all
  namespace: demo
  annotations: {istio.io/dry-run: "true"}
spec:
  selector: {matchLabels: {app: echo}}
  action: DENY
  rules: [{}]
`, func() error {
			if err := isOK(do(intruder, echoURL, nil)); err != nil {
				return err
			}
			if n := stat(t, ctx, server, shadow); n <= before {
				return fmt.Errorf("%s = %d, not above %d", shadow, n, before)
			}
			return nil
		})
		const denied = "http.inbound_0.0.0.0_8080.rbac.denied"
		enforced, shadowed := stat(t, ctx, server, denied), stat(t, ctx, server, shadow)
		for range 3 {
			a := do(client, echoURL, nil)
			want(t, "client", a, isOK)
			if !strings.Contains(a.body, `"path":"/"`) {
				t.Errorf("the echo app did not answer: %q", a.body)
			}
		}
		if n := stat(t, ctx, server, shadow); n != shadowed+3 {
			t.Errorf("%s = %d, want %d", shadow, n, shadowed+3)
		}
		if n := stat(t, ctx, server, denied); n != enforced {
			t.Errorf("%s went %d -> %d under a dry-run policy", denied, enforced, n)
		}
	})
}
