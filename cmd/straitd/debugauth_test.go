package main

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	caserver "github.com/straitmesh/strait/internal/ca/server"
	"github.com/straitmesh/strait/internal/ca/token"
)

// TestDebugGuard: which peer addresses count as loopback (the connection's
// address, whatever the headers say; IPv4-mapped loopback included), and
// what a remote caller gets with no, a bad, another namespace's and the
// control plane's token. The real thing, over sockets in a network
// namespace, is test/e2e's TestDebugEndpointsAuth.
func TestDebugGuard(t *testing.T) {
	key, err := token.LoadOrCreateKey(filepath.Join(t.TempDir(), token.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	issue := func(ns string, ttl time.Duration) string {
		now := time.Now()
		tok, err := key.Issue(token.Claims{Namespace: ns, ServiceAccount: "admin", IssuedAt: now.Add(-2 * time.Hour).Unix(), Expiry: now.Add(ttl).Unix()})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	admin, demo, expired := issue("istio-system", time.Hour), issue("demo", time.Hour), issue("istio-system", -time.Hour)
	next := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("secret data")) })
	guard := &debugGuard{next: next, authn: []caserver.Authenticator{caserver.FileTokens{Key: key}}, namespace: "istio-system", log: slog.New(slog.DiscardHandler)}
	loopbackOnly := &debugGuard{next: next, namespace: "istio-system", log: slog.New(slog.DiscardHandler)}

	for _, tc := range []struct {
		name   string
		guard  *debugGuard
		path   string
		remote string
		header map[string]string
		want   int
	}{
		{"loopback v4", guard, "/debug/syncz", "127.0.0.1:40000", nil, 200},
		{"loopback 127/8", guard, "/debug/syncz", "127.1.2.3:40000", nil, 200},
		{"loopback v6", guard, "/debug/pprof/", "[::1]:40000", nil, 200},
		{"loopback v4-mapped", guard, "/debug/config_dump", "[::ffff:127.0.0.1]:40000", nil, 200},
		{"loopback without authenticators", loopbackOnly, "/debug/syncz", "127.0.0.1:1", nil, 200},
		{"remote, no token", guard, "/debug/syncz", "10.0.0.2:40000", nil, 401},
		{"remote v6, no token", guard, "/debug/syncz", "[fd00::2]:40000", nil, 401},
		{"remote v4-mapped, no token", guard, "/debug/syncz", "[::ffff:10.0.0.2]:40000", nil, 401},
		{"remote claiming loopback in headers", guard, "/debug/syncz", "10.0.0.2:40000",
			map[string]string{"X-Forwarded-For": "127.0.0.1", "X-Real-Ip": "127.0.0.1", "Forwarded": "for=127.0.0.1"}, 401},
		{"unparsable peer", guard, "/debug/syncz", "localhost", nil, 401},
		{"remote, control plane token", guard, "/debug/syncz", "10.0.0.2:40000", map[string]string{"Authorization": "Bearer " + admin}, 200},
		{"remote, lower-case scheme", guard, "/debug/pprof/heap", "10.0.0.2:40000", map[string]string{"Authorization": "bearer " + admin}, 200},
		{"remote, other namespace's token", guard, "/debug/syncz", "10.0.0.2:40000", map[string]string{"Authorization": "Bearer " + demo}, 403},
		{"remote, expired token", guard, "/debug/syncz", "10.0.0.2:40000", map[string]string{"Authorization": "Bearer " + expired}, 401},
		{"remote, forged token", guard, "/debug/syncz", "10.0.0.2:40000", map[string]string{"Authorization": "Bearer " + admin[:len(admin)-2] + "AA"}, 401},
		{"remote, not bearer", guard, "/debug/syncz", "10.0.0.2:40000", map[string]string{"Authorization": "Basic " + admin}, 401},
		{"remote, token but no authenticators", loopbackOnly, "/debug/syncz", "10.0.0.2:40000", map[string]string{"Authorization": "Bearer " + admin}, 401},
		{"remote, unknown path", guard, "/debug/anything", "10.0.0.2:40000", nil, 401},
		{"remote, path not cleaned", guard, "//metrics", "10.0.0.2:40000", nil, 401},
		{"remote, metrics", guard, "/metrics", "10.0.0.2:40000", nil, 200},
		{"remote, ready", guard, "/healthz/ready", "10.0.0.2:40000", nil, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "http://straitd:15014"+tc.path, nil)
			req.RemoteAddr = tc.remote
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			tc.guard.ServeHTTP(rec, req)
			if rec.Code != tc.want {
				t.Fatalf("status %d, want %d (body %q)", rec.Code, tc.want, rec.Body.String())
			}
			if tc.want != 200 && rec.Body.String() == "secret data" {
				t.Fatal("refused, but the data was served")
			}
		})
	}
}
