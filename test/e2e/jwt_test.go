package e2e

import (
	"context"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"crypto/rand"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/straitmesh/strait/internal/localmesh"
)

const (
	jwtIssuer     = "https://issuer.e2e.strait"
	jwtDownIssuer = "https://down.e2e.strait"
)

// jwtPolicy is the RequestAuthentication on the echo workload: keys from
// jwksURI (fetched by straitd and inlined), the token in Authorization or
// ?token=, the payload to the app in x-jwt-payload; a second issuer whose
// jwksUri does not answer, so its tokens must fail closed.
func jwtPolicy(jwksURI, downURI string, forward bool) []byte {
	return []byte(fmt.Sprintf(`apiVersion: security.istio.io/v1
kind: RequestAuthentication
metadata: {name: echo-jwt, namespace: demo}
spec:
  selector:
    matchLabels: {app: echo}
  jwtRules:
  - issuer: %s
    jwksUri: %s
    fromHeaders: [{name: Authorization, prefix: "Bearer "}]
    fromParams: [token]
    outputPayloadToHeader: x-jwt-payload
    forwardOriginalToken: %v
  - issuer: %s
    jwksUri: %s
    timeout: 1s
`, jwtIssuer, jwksURI, forward, jwtDownIssuer, downURI))
}

// TestRequestAuthentication runs a RequestAuthentication through two
// sidecars (file mode): straitd fetches the JWKS from a server on the
// host (its jwksUri) and inlines it in the echo sidecar's jwt_authn
// filter; the client's requests carry tokens:
//   - a valid token gets 200, the app sees the payload header and not
//     the token (forwardOriginalToken false), nor a client's forged
//     payload header;
//   - an expired token, another issuer's token, a token signed by
//     another key and a token of an issuer whose keys could not be
//     fetched get 401 with Envoy's message;
//   - a request without a token gets 200 (no policy requires one);
//   - a token in the query parameter the rule names is read;
//   - forwardOriginalToken true lets the Authorization header through.
func TestRequestAuthentication(t *testing.T) {
	requireMesh(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	jwksJSON, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "e2e", Algorithm: "RS256", Use: "sig"}}})
	if err != nil {
		t.Fatal(err)
	}
	var jwksHits atomic.Int32
	keySrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		jwksHits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Write(jwksJSON)
	}))
	defer keySrv.Close()
	// A port with nothing listening: the second issuer's keys never come.
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	downURI := "http://" + dead.Addr().String() + "/jwks"
	dead.Close()

	m := startMesh(ctx, t, "jwt", localmesh.Options{Workloads: []localmesh.Workload{
		{Name: "client", Namespace: "demo", ConfigIP: "10.99.0.10"},
		echoPod("echo-v1", "demo", "10.99.0.11", "v1"),
	}})
	hc := m.Pod("client").NewHTTPClient(false)

	sign := func(t *testing.T, k *rsa.PrivateKey, claims map[string]any) string {
		t.Helper()
		s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: k}, (&jose.SignerOptions{}).WithHeader("kid", "e2e").WithType("JWT"))
		if err != nil {
			t.Fatal(err)
		}
		pl, _ := json.Marshal(claims)
		o, err := s.Sign(pl)
		if err != nil {
			t.Fatal(err)
		}
		tok, _ := o.CompactSerialize()
		return tok
	}
	now := time.Now()
	claims := func(iss string, exp time.Time) map[string]any {
		return map[string]any{"iss": iss, "sub": "alice", "aud": "echo", "iat": now.Unix(), "exp": exp.Unix()}
	}
	valid := sign(t, key, claims(jwtIssuer, now.Add(time.Hour)))

	type answer struct {
		code    int
		body    string
		headers map[string]string // what the app saw (200 only)
	}
	do := func(t *testing.T, path string, header map[string]string) answer {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, "GET", strings.TrimSuffix(localmesh.DemoURL, "/")+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		a := answer{code: resp.StatusCode, body: string(b)}
		if resp.StatusCode == 200 {
			var rep struct {
				Headers map[string]string `json:"headers"`
			}
			if err := json.Unmarshal(b, &rep); err != nil {
				t.Fatalf("app answer %q: %v", b, err)
			}
			a.headers = rep.Headers
		}
		return a
	}
	bearer := func(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }

	// The mesh serves the echo app before the policy exists.
	if err := poll(ctx, 30*time.Second, func() error {
		if a := do(t, "/", nil); a.code != 200 {
			return fmt.Errorf("status %d", a.code)
		}
		return nil
	}); err != nil {
		t.Fatalf("echo before the policy: %v", err)
	}
	expired := sign(t, key, claims(jwtIssuer, now.Add(-time.Hour)))
	applyPolicy := func(t *testing.T, forward bool, applied func(answer) bool) {
		t.Helper()
		if err := m.WriteConfig("jwt.yaml", jwtPolicy(keySrv.URL+"/jwks", downURI, forward)); err != nil {
			t.Fatal(err)
		}
		if err := poll(ctx, 30*time.Second, func() error {
			if a := do(t, "/", bearer(valid)); !applied(a) {
				return fmt.Errorf("not applied yet: %d %q %v", a.code, a.body, a.headers)
			}
			return nil
		}); err != nil {
			t.Fatalf("policy (forwardOriginalToken %v) not applied: %v", forward, err)
		}
	}
	applyPolicy(t, false, func(a answer) bool { return a.code == 200 && a.headers["X-Jwt-Payload"] != "" })
	if jwksHits.Load() == 0 {
		t.Error("straitd never fetched the jwksUri")
	}

	t.Run("valid token", func(t *testing.T) {
		a := do(t, "/", map[string]string{"Authorization": "Bearer " + valid, "X-Jwt-Payload": "forged"})
		if a.code != 200 {
			t.Fatalf("got %d %q, want 200", a.code, a.body)
		}
		pl, err := base64.RawURLEncoding.DecodeString(a.headers["X-Jwt-Payload"])
		if err != nil || !strings.Contains(string(pl), `"sub":"alice"`) || !strings.Contains(string(pl), `"iss":"`+jwtIssuer+`"`) {
			t.Errorf("app saw x-jwt-payload %q (%s, %v), want the token's payload", a.headers["X-Jwt-Payload"], pl, err)
		}
		if v, ok := a.headers["Authorization"]; ok {
			t.Errorf("app saw Authorization %q; forwardOriginalToken is false", v)
		}
	})
	for _, tc := range []struct {
		name, token, body string
	}{
		{"expired token", expired, "Jwt is expired"},
		{"wrong issuer", sign(t, key, claims("https://other.e2e.strait", now.Add(time.Hour))), "Jwt issuer is not configured"},
		{"signed by another key", sign(t, other, claims(jwtIssuer, now.Add(time.Hour))), "Jwt verification fails"},
		{"issuer whose keys could not be fetched", sign(t, key, claims(jwtDownIssuer, now.Add(time.Hour))), ""},
		{"not a JWT", "abc.def.ghi", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := do(t, "/", bearer(tc.token))
			if a.code != 401 || (tc.body != "" && a.body != tc.body) {
				t.Errorf("got %d %q, want 401 %q", a.code, a.body, tc.body)
			}
		})
	}
	t.Run("missing token is allowed", func(t *testing.T) {
		a := do(t, "/", nil)
		if a.code != 200 || a.headers["X-Jwt-Payload"] != "" {
			t.Errorf("got %d, payload %q; want 200 without a payload", a.code, a.headers["X-Jwt-Payload"])
		}
	})
	t.Run("token in query parameter", func(t *testing.T) {
		a := do(t, "/q?token="+valid, nil)
		if a.code != 200 || a.headers["X-Jwt-Payload"] == "" {
			t.Errorf("got %d %q, payload %q; want 200 with the payload", a.code, a.body, a.headers["X-Jwt-Payload"])
		}
		if a := do(t, "/q?token="+expired, nil); a.code != 401 || a.body != "Jwt is expired" {
			t.Errorf("expired token in query: %d %q", a.code, a.body)
		}
	})
	t.Run("forwardOriginalToken true keeps Authorization", func(t *testing.T) {
		applyPolicy(t, true, func(a answer) bool { return a.code == 200 && a.headers["Authorization"] != "" })
		a := do(t, "/", bearer(valid))
		if a.headers["Authorization"] != "Bearer "+valid || a.headers["X-Jwt-Payload"] == "" {
			t.Errorf("app saw Authorization %q payload %q", a.headers["Authorization"], a.headers["X-Jwt-Payload"])
		}
	})
	t.Run("an AuthorizationPolicy requires a request principal", func(t *testing.T) {
		// The verified token's principal (iss/sub) and claims reach the
		// RBAC filter: a request without a token, or with another
		// subject's, is denied; alice's token is allowed.
		policy := fmt.Sprintf(`apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: require-jwt, namespace: demo}
spec:
  selector:
    matchLabels: {app: echo}
  action: ALLOW
  rules:
  - from: [{source: {requestPrincipals: ["%s/*"]}}]
    when: [{key: "request.auth.claims[sub]", values: [alice]}]
`, jwtIssuer)
		if err := m.WriteConfig("require-jwt.yaml", []byte(policy)); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := os.Remove(filepath.Join(m.ConfigDir(), "require-jwt.yaml")); err != nil {
				t.Error(err)
			}
		}()
		if err := poll(ctx, 30*time.Second, func() error {
			if a := do(t, "/", nil); a.code != 403 {
				return fmt.Errorf("without a token: %d %q", a.code, a.body)
			}
			return nil
		}); err != nil {
			t.Fatalf("the policy never applied: %v", err)
		}
		if a := do(t, "/", nil); a.body != "RBAC: access denied" {
			t.Errorf("without a token: body %q, want RBAC: access denied", a.body)
		}
		if a := do(t, "/", bearer(valid)); a.code != 200 {
			t.Errorf("alice's token: %d %q, want 200", a.code, a.body)
		}
		bob := claims(jwtIssuer, now.Add(time.Hour))
		bob["sub"] = "bob"
		if a := do(t, "/", bearer(sign(t, key, bob))); a.code != 403 {
			t.Errorf("bob's token: %d %q, want 403 (the when on request.auth.claims[sub])", a.code, a.body)
		}
		if a := do(t, "/", bearer(expired)); a.code != 401 {
			t.Errorf("an expired token: %d %q, want 401 from jwt_authn before RBAC", a.code, a.body)
		}
	})
	t.Run("policy removed", func(t *testing.T) {
		if err := os.Remove(filepath.Join(m.ConfigDir(), "jwt.yaml")); err != nil {
			t.Fatal(err)
		}
		if err := poll(ctx, 30*time.Second, func() error {
			if a := do(t, "/", bearer(expired)); a.code != 200 {
				return fmt.Errorf("expired token still %d", a.code)
			}
			return nil
		}); err != nil {
			t.Error(err)
		}
	})
}
