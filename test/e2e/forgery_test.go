package e2e

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/straitmesh/strait/internal/localmesh"
)

// TestForgedRequests sends, through the client's and the echo server's
// sidecars, requests that try to pass for something they are not:
//   - JWT output headers: with a RequestAuthentication of two issuers,
//     each writing its payload and its sub claim to headers, a client's
//     own copies of those four headers never reach the application,
//     without a token, with a valid token of either issuer (the other
//     issuer's headers are removed, the token's are the verified ones);
//   - a #fragment: with an AuthorizationPolicy that DENYs the exact path
//     /admin, "/admin#x" is answered 400 rather than forwarded past the
//     rule;
//   - HTTP/1.0: answered 426 Upgrade Required (no proxy metadata HTTP10).
func TestForgedRequests(t *testing.T) {
	requireMesh(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	keyA, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	keyB, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	jwksOf := func(k *rsa.PrivateKey, kid string) string {
		b, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &k.PublicKey, KeyID: kid, Algorithm: "RS256", Use: "sig"}}})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	sign := func(k *rsa.PrivateKey, kid, iss, sub string) string {
		s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: k}, (&jose.SignerOptions{}).WithHeader("kid", kid).WithType("JWT"))
		if err != nil {
			t.Fatal(err)
		}
		pl, _ := json.Marshal(map[string]any{"iss": iss, "sub": sub, "exp": time.Now().Add(time.Hour).Unix()})
		o, err := s.Sign(pl)
		if err != nil {
			t.Fatal(err)
		}
		tok, _ := o.CompactSerialize()
		return tok
	}
	const issA, issB = "https://a.forgery.strait", "https://b.forgery.strait"
	tokA, tokB := sign(keyA, "a", issA, "alice"), sign(keyB, "b", issB, "bob")

	m := startMesh(ctx, t, "jwt", localmesh.Options{Workloads: []localmesh.Workload{
		{Name: "client", Namespace: "demo", ConfigIP: "10.99.0.10"},
		echoPod("echo-v1", "demo", "10.99.0.11", "v1"),
	}})
	client := m.Pod("client")
	hc := client.NewHTTPClient(false)
	policy := fmt.Sprintf(`apiVersion: security.istio.io/v1
kind: RequestAuthentication
metadata: {name: two-issuers, namespace: demo}
spec:
  selector: {matchLabels: {app: echo}}
  jwtRules:
  - issuer: %s
    jwks: '%s'
    outputPayloadToHeader: x-jwt-a
    outputClaimToHeaders: [{header: x-sub-a, claim: sub}]
  - issuer: %s
    jwks: '%s'
    outputPayloadToHeader: x-jwt-b
    outputClaimToHeaders: [{header: x-sub-b, claim: sub}]
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: deny-admin, namespace: demo}
spec:
  selector: {matchLabels: {app: echo}}
  action: DENY
  rules:
  - to: [{operation: {paths: ["/admin"]}}]
`, issA, jwksOf(keyA, "a"), issB, jwksOf(keyB, "b"))
	if err := m.WriteConfig("forgery.yaml", []byte(policy)); err != nil {
		t.Fatal(err)
	}

	forged := []string{"X-Jwt-A", "X-Sub-A", "X-Jwt-B", "X-Sub-B"}
	// do sends GET path with the forged headers (and a token) and returns
	// the status and the headers the application saw.
	do := func(path, token string) (int, map[string]string, error) {
		req, err := http.NewRequestWithContext(ctx, "GET", strings.TrimSuffix(localmesh.DemoURL, "/")+path, nil)
		if err != nil {
			return 0, nil, err
		}
		for _, h := range forged {
			req.Header.Set(h, "forged")
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var rep struct {
			Headers map[string]string `json:"headers"`
		}
		if resp.StatusCode == 200 {
			if err := json.Unmarshal(b, &rep); err != nil {
				return 0, nil, fmt.Errorf("app answer %q: %w", b, err)
			}
		}
		return resp.StatusCode, rep.Headers, nil
	}
	// The policies apply once alice's token gives the app her sub and
	// /admin is denied.
	if err := poll(ctx, 60*time.Second, func() error {
		code, h, err := do("/", tokA)
		if err != nil {
			return err
		}
		if code != 200 || h["X-Sub-A"] != "alice" {
			return fmt.Errorf("token of A: %d, x-sub-a %q", code, h["X-Sub-A"])
		}
		if code, _, err := do("/admin", ""); err != nil || code != 403 {
			return fmt.Errorf("/admin: %d %w", code, err)
		}
		return nil
	}); err != nil {
		t.Fatalf("policies not applied: %v", err)
	}

	t.Run("jwt output headers", func(t *testing.T) {
		for _, tc := range []struct {
			name, token string
			want        map[string]string // the output headers the app must see, with these values ("*": any)
		}{
			{"no token", "", nil},
			{"token of A", tokA, map[string]string{"X-Sub-A": "alice", "X-Jwt-A": strings.Split(tokA, ".")[1]}},
			{"token of B", tokB, map[string]string{"X-Sub-B": "bob", "X-Jwt-B": strings.Split(tokB, ".")[1]}},
		} {
			code, h, err := do("/", tc.token)
			if err != nil || code != 200 {
				t.Errorf("%s: %d %v, want 200", tc.name, code, err)
				continue
			}
			for _, n := range forged {
				got, ok := h[n]
				want, wanted := tc.want[n]
				switch {
				case !wanted && ok:
					t.Errorf("%s: the app saw %s: %q; want none", tc.name, n, got)
				case wanted && got != want:
					t.Errorf("%s: the app saw %s: %q; want %q", tc.name, n, got, want)
				}
			}
		}
	})

	// raw sends request bytes from the client pod to the echo service
	// (through both sidecars) and returns the status line of the answer.
	raw := func(t *testing.T, request string) string {
		t.Helper()
		c, err := client.DialContext(ctx, "tcp", localmesh.DemoVIP+":80")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(20 * time.Second))
		if _, err := io.WriteString(c, request); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			t.Fatalf("no answer to %q: %v", request, err)
		}
		return strings.TrimSpace(line)
	}
	const host = "Host: echo.demo.svc.cluster.local\r\n"
	t.Run("fragment", func(t *testing.T) {
		for _, tc := range []struct{ target, want string }{
			{"/admin", " 403 "},
			{"/admin#x", " 400 "},
			{"/admin#", " 400 "},
			{"/admin?q=1#x", " 400 "},
			{"/ok#x", " 400 "},
			{"/ok", " 200 "},
		} {
			if got := raw(t, "GET "+tc.target+" HTTP/1.1\r\n"+host+"Connection: close\r\n\r\n"); !strings.Contains(got+" ", tc.want) {
				t.Errorf("GET %s: %q, want%s", tc.target, got, tc.want)
			}
		}
	})
	t.Run("http/1.0", func(t *testing.T) {
		if got := raw(t, "GET / HTTP/1.0\r\n"+host+"\r\n"); !strings.Contains(got, " 426 ") {
			t.Errorf("HTTP/1.0: %q, want 426", got)
		}
	})
}
