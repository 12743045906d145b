package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/localmesh"
)

// echoReply is what strait-echo answers.
type echoReply struct {
	Version string            `json:"version"`
	Host    string            `json:"host"`
	Path    string            `json:"path"`
	Query   string            `json:"query"`
	Headers map[string]string `json:"headers"`
	Attempt int               `json:"attempt"`
}

// TestRouterActions drives the VirtualService route actions (timeout,
// retries, redirect, rewrite, header operations, direct response) through
// the client's and the server's sidecars, against real strait-echo pods.
func TestRouterActions(t *testing.T) {
	m := startDemoMesh(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	client := m.Pod("client")
	hc := client.HTTPClient()
	hc.Timeout = 10 * time.Second
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	base := "http://" + localmesh.DemoVIP

	do := func(t *testing.T, method, path string, h http.Header) (*http.Response, []byte, time.Duration) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(""))
		if method == http.MethodPost {
			req, err = http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(`{"order":1}`))
		}
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range h {
			req.Header[k] = v
		}
		start := time.Now()
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("%s %s: body: %v", method, path, err)
		}
		return resp, body, time.Since(start)
	}
	key := func(name string) string { return fmt.Sprintf("%s-%d", name, time.Now().UnixNano()) }

	data, err := os.ReadFile("testdata/router/virtualservice.yaml")
	if err != nil {
		t.Fatal(err)
	}
	writeConfig(t, m, localmesh.DemoVirtualServiceFile, data)
	// Applied once the direct response answers.
	waitFor(ctx, t, applyTimeout, "the router VirtualService was not applied", func() error {
		if resp, _, _ := do(t, http.MethodGet, "/direct", nil); resp.StatusCode != 418 {
			return fmt.Errorf("GET /direct: %d, want the direct response's 418", resp.StatusCode)
		}
		return nil
	})

	t.Run("route timeout answers 504 UT", func(t *testing.T) {
		resp, body, took := do(t, http.MethodGet, "/timeout", http.Header{"X-Echo-Delay": {"4s"}})
		if resp.StatusCode != 504 || resp.Header.Get("X-Strait-Response-Flags") != "UT" {
			t.Fatalf("status %d flags %q body %q, want 504 UT", resp.StatusCode, resp.Header.Get("X-Strait-Response-Flags"), body)
		}
		if took < 500*time.Millisecond || took > 3*time.Second {
			t.Errorf("504 after %v, want at least the 0.5s timeout and well below the app's 4s delay", took)
		}
	})

	t.Run("x-envoy-upstream-rq-timeout-ms honoured", func(t *testing.T) {
		resp, _, took := do(t, http.MethodGet, "/plain", http.Header{"X-Echo-Delay": {"4s"}, "X-Envoy-Upstream-Rq-Timeout-Ms": {"300"}})
		if resp.StatusCode != 504 {
			t.Fatalf("status %d, want 504 from the 300 ms header timeout", resp.StatusCode)
		}
		if took < 300*time.Millisecond || took > 3*time.Second {
			t.Errorf("504 after %v, want at least 300ms and well below 4s", took)
		}
	})

	t.Run("retries until success", func(t *testing.T) {
		k := key("retry")
		resp, body, _ := do(t, http.MethodGet, "/retry", http.Header{"X-Echo-Key": {k}, "X-Echo-Fail": {"2"}, "X-Echo-Fail-Status": {"500"}})
		if resp.StatusCode != 200 {
			t.Fatalf("status %d (%s), want 200 after two retried 500s", resp.StatusCode, body)
		}
		if n, _ := keyCount(t, ctx, hc, base, k); n != 3 {
			t.Errorf("the app saw %d attempts, want 3", n)
		}
		var rep echoReply
		if err := json.Unmarshal(body, &rep); err != nil {
			t.Fatalf("%v: %s", err, body)
		}
		if got := rep.Headers["X-Envoy-Attempt-Count"]; got != "3" {
			t.Errorf("the app saw x-envoy-attempt-count %q on the answered attempt, want 3", got)
		}
	})

	t.Run("retries exhausted: URX", func(t *testing.T) {
		k := key("exhausted")
		resp, _, _ := do(t, http.MethodGet, "/retry", http.Header{"X-Echo-Key": {k}, "X-Echo-Fail": {"10"}, "X-Echo-Fail-Status": {"500"}})
		if resp.StatusCode != 500 || resp.Header.Get("X-Strait-Response-Flags") != "URX" {
			t.Errorf("status %d flags %q, want the last 500 with URX", resp.StatusCode, resp.Header.Get("X-Strait-Response-Flags"))
		}
		if n, _ := keyCount(t, ctx, hc, base, k); n != 4 {
			t.Errorf("the app saw %d attempts, want 4 (1 + 3 retries)", n)
		}
	})

	t.Run("Istio's default retry on a single 503", func(t *testing.T) {
		k := key("default")
		resp, body, _ := do(t, http.MethodGet, "/plain", http.Header{"X-Echo-Key": {k}, "X-Echo-Fail": {"1"}})
		if resp.StatusCode != 200 {
			t.Fatalf("status %d (%s), want 200 after the default policy retried the 503", resp.StatusCode, body)
		}
		if n, _ := keyCount(t, ctx, hc, base, k); n != 2 {
			t.Errorf("the app saw %d attempts, want 2", n)
		}
	})

	t.Run("x-envoy-max-retries 0 stops the default retry", func(t *testing.T) {
		k := key("maxretries")
		resp, _, _ := do(t, http.MethodGet, "/plain", http.Header{"X-Echo-Key": {k}, "X-Echo-Fail": {"1"}, "X-Envoy-Max-Retries": {"0"}})
		if resp.StatusCode != 503 {
			t.Errorf("status %d, want the app's 503", resp.StatusCode)
		}
		if n, _ := keyCount(t, ctx, hc, base, k); n != 1 {
			t.Errorf("the app saw %d attempts, want 1", n)
		}
	})

	t.Run("no retry of a POST 503 when retryOn does not allow it", func(t *testing.T) {
		k := key("post")
		resp, _, _ := do(t, http.MethodPost, "/post", http.Header{"X-Echo-Key": {k}, "X-Echo-Fail": {"1"}})
		if resp.StatusCode != 503 {
			t.Errorf("status %d, want the app's 503 (retryOn connect-failure only)", resp.StatusCode)
		}
		if n, _ := keyCount(t, ctx, hc, base, k); n != 1 {
			t.Errorf("the app saw %d attempts, want 1", n)
		}
	})

	t.Run("redirect", func(t *testing.T) {
		resp, _, _ := do(t, http.MethodGet, "/old?x=1", nil)
		if resp.StatusCode != 301 || resp.Header.Get("Location") != "http://elsewhere.example/new?x=1" {
			t.Errorf("status %d Location %q, want 301 http://elsewhere.example/new?x=1", resp.StatusCode, resp.Header.Get("Location"))
		}
	})

	t.Run("direct response", func(t *testing.T) {
		resp, body, _ := do(t, http.MethodGet, "/direct", nil)
		if resp.StatusCode != 418 || string(body) != "teapot" {
			t.Errorf("status %d body %q, want 418 teapot", resp.StatusCode, body)
		}
	})

	t.Run("delegate VirtualService", func(t *testing.T) {
		version := func(path string) (string, string) {
			t.Helper()
			resp, body, _ := do(t, http.MethodGet, path, nil)
			var rep echoReply
			if resp.StatusCode != 200 || json.Unmarshal(body, &rep) != nil {
				t.Fatalf("GET %s: status %d (%s)", path, resp.StatusCode, body)
			}
			return rep.Version, resp.Header.Get("X-Delegate")
		}
		if v, h := version("/delegated/v2/x"); v != "v2" || h != "" {
			t.Errorf("/delegated/v2/x went to %s (x-delegate %q), want the delegate's v2 route", v, h)
		}
		if v, h := version("/delegated/other"); v != "v1" || h != "fallback" {
			t.Errorf("/delegated/other went to %s (x-delegate %q), want the delegate's fallback", v, h)
		}
		// Outside the root's /delegated the delegate's routes do not apply.
		if _, h := version("/elsewhere"); h != "" {
			t.Errorf("/elsewhere got x-delegate %q: the delegate's routes leaked out of the root's match", h)
		}
	})

	t.Run("rewrite and header operations", func(t *testing.T) {
		resp, body, _ := do(t, http.MethodGet, "/api/items?id=7", http.Header{"X-Drop": {"gone"}, "X-Set": {"client"}})
		if resp.StatusCode != 200 {
			t.Fatalf("status %d (%s)", resp.StatusCode, body)
		}
		var rep echoReply
		if err := json.Unmarshal(body, &rep); err != nil {
			t.Fatalf("%v: %s", err, body)
		}
		if rep.Path != "/v2/items" || rep.Query != "id=7" || rep.Host != "rewritten.example" {
			t.Errorf("app saw path %q query %q host %q, want /v2/items id=7 rewritten.example", rep.Path, rep.Query, rep.Host)
		}
		h := map[string]string{}
		for k, v := range rep.Headers {
			h[strings.ToLower(k)] = v
		}
		if h["x-set"] != "one" || h["x-dest"] != "v1" {
			t.Errorf("app saw x-set %q x-dest %q, want one and v1", h["x-set"], h["x-dest"])
		}
		if _, ok := h["x-drop"]; ok {
			t.Errorf("app saw x-drop, which the route removes")
		}
		if got := resp.Header.Get("X-Resp"); got != "three" {
			t.Errorf("client saw x-resp %q, want three", got)
		}
	})
}
