package jwks

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// keyServer serves a JWKS it can change or break, and a discovery
// document pointing at it.
type keyServer struct {
	*httptest.Server
	mu    sync.Mutex
	jwks  string
	code  int
	hits  atomic.Int32
	paths []string
}

func newKeyServer(t *testing.T) *keyServer {
	ks := &keyServer{jwks: `{"keys":[{"kty":"oct","k":"AAAA","kid":"one"}]}`, code: 200}
	ks.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ks.hits.Add(1)
		ks.mu.Lock()
		defer ks.mu.Unlock()
		ks.paths = append(ks.paths, r.URL.Path)
		if r.URL.Path == "/.well-known/openid-configuration" {
			w.Write([]byte(`{"issuer":"` + ks.URL + `","jwks_uri":"` + ks.URL + `/keys"}`))
			return
		}
		w.WriteHeader(ks.code)
		w.Write([]byte(ks.jwks))
	}))
	t.Cleanup(ks.Close)
	return ks
}

func (ks *keyServer) set(jwks string, code int) {
	ks.mu.Lock()
	ks.jwks, ks.code = jwks, code
	ks.mu.Unlock()
}

func TestLookupCachesAndDiscovers(t *testing.T) {
	ks := newKeyServer(t)
	r := New(Options{})
	ctx := context.Background()
	s, err := r.Lookup(ctx, "iss", ks.URL+"/keys", 0)
	if err != nil || !strings.Contains(s, `"kid":"one"`) {
		t.Fatalf("Lookup = %q, %v", s, err)
	}
	if _, err := r.Lookup(ctx, "iss", ks.URL+"/keys", 0); err != nil || ks.hits.Load() != 1 {
		t.Errorf("second lookup: %v, %d fetches; want the cached one", err, ks.hits.Load())
	}
	// No jwksUri: the issuer's discovery document names it.
	s, err = r.Lookup(ctx, ks.URL, "", 0)
	if err != nil || !strings.Contains(s, `"kid":"one"`) {
		t.Fatalf("discovery Lookup = %q, %v", s, err)
	}
	if ks.paths[1] != "/.well-known/openid-configuration" || ks.paths[2] != "/keys" {
		t.Errorf("paths %v", ks.paths)
	}
}

func TestLookupFailures(t *testing.T) {
	ks := newKeyServer(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name, body string
		code       int
	}{
		{"status", `{"keys":[]}`, 500},
		{"not json", `<html>`, 200},
		{"no keys", `{"x":1}`, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ks.set(tc.body, tc.code)
			r := New(Options{})
			if s, err := r.Lookup(ctx, "iss", ks.URL+"/keys", 0); err == nil || s != "" {
				t.Errorf("Lookup = %q, %v; want an error", s, err)
			}
			// The failure is cached until a refresh: no fetch per push.
			n := ks.hits.Load()
			if _, err := r.Lookup(ctx, "iss", ks.URL+"/keys", 0); err == nil || ks.hits.Load() != n {
				t.Errorf("cached failure: %v, fetched again %v", err, ks.hits.Load() != n)
			}
		})
	}
	r := New(Options{})
	if _, err := r.Lookup(ctx, "http://127.0.0.1:1", "", 50*time.Millisecond); err == nil {
		t.Error("unreachable issuer: no error")
	}
}

// A failed key set is fetched again by Run, which asks for a push once it
// has it; a changed key set also asks for one.
func TestRunRefreshes(t *testing.T) {
	ks := newKeyServer(t)
	ks.set("", 503)
	changed := make(chan struct{}, 4)
	r := New(Options{RefreshInterval: 50 * time.Millisecond, FailureRefreshInterval: 20 * time.Millisecond, OnChange: func() { changed <- struct{}{} }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() {
		cancel()
		_ = <-done
	}()
	if _, err := r.Lookup(ctx, "iss", ks.URL+"/keys", 0); err == nil {
		t.Fatal("first lookup succeeded against a failing server")
	}
	ks.set(`{"keys":[{"kty":"oct","k":"AAAA","kid":"two"}]}`, 200)
	wait := func(what string) {
		t.Helper()
		select {
		case <-changed:
		case <-time.After(10 * time.Second):
			t.Fatalf("no push after %s", what)
		}
	}
	wait("the server recovered")
	if s, err := r.Lookup(ctx, "iss", ks.URL+"/keys", 0); err != nil || !strings.Contains(s, "two") {
		t.Fatalf("after recovery: %q, %v", s, err)
	}
	ks.set(`{"keys":[{"kty":"oct","k":"AAAA","kid":"three"}]}`, 200)
	wait("the key set changed")
	if s, _ := r.Lookup(ctx, "iss", ks.URL+"/keys", 0); !strings.Contains(s, "three") {
		t.Errorf("after change: %q", s)
	}
	// A refresh that fails keeps the last good key set.
	ks.set("", 500)
	if r.refresh(ctx) {
		t.Error("a failed refresh reported a change")
	}
	if s, err := r.Lookup(ctx, "iss", ks.URL+"/keys", 0); err != nil || !strings.Contains(s, "three") {
		t.Errorf("after failed refresh: %q, %v", s, err)
	}
}

// FailClosed is a key set the resolver itself would accept.
func TestFailClosedParses(t *testing.T) {
	if err := validate([]byte(FailClosed)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(FailClosed, `"kty":"RSA"`) {
		t.Error("not an RSA key")
	}
}
