package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/straitmesh/strait/internal/localmesh"
)

// matchRules sends every match kind to v2 and the rest to v1. The rules
// whose conditions the client never satisfies (sourceLabels of another
// app, sourceNamespace other, scheme https on a plaintext hop) come first
// on purpose: were a condition lost, its rule would become a catch-all and
// every request below would reach v2.
const matchRules = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: echo
  namespace: demo
spec:
  hosts:
  - echo.demo.svc.cluster.local
  http:
  - name: other-app
    match:
    - sourceLabels: {app: nobody}
    route:
    - destination: {host: echo.demo.svc.cluster.local, subset: v2}
  - name: other-namespace
    match:
    - sourceNamespace: other
    route:
    - destination: {host: echo.demo.svc.cluster.local, subset: v2}
  - name: other-gateway
    match:
    - gateways: [istio-system/ingress]
    route:
    - destination: {host: echo.demo.svc.cluster.local, subset: v2}
  - name: https-only
    match:
    - scheme: {exact: https}
    route:
    - destination: {host: echo.demo.svc.cluster.local, subset: v2}
  - name: query
    match:
    - queryParams: {version: {exact: v2}}
    - queryParams: {beta: {}}
    route:
    - destination: {host: echo.demo.svc.cluster.local, subset: v2}
  - name: without
    match:
    - uri: {prefix: /without}
      withoutHeaders: {x-skip: {exact: "yes"}}
    route:
    - destination: {host: echo.demo.svc.cluster.local, subset: v2}
  - name: presence
    match:
    - headers: {x-debug: {}}
    route:
    - destination: {host: echo.demo.svc.cluster.local, subset: v2}
  - name: method
    match:
    - method: {exact: POST}
    route:
    - destination: {host: echo.demo.svc.cluster.local, subset: v2}
  - name: authority
    match:
    - authority: {prefix: echo.demo.svc}
    route:
    - destination: {host: echo.demo.svc.cluster.local, subset: v2}
  - name: scheme-http
    match:
    - scheme: {exact: http}
      uri: {prefix: /scheme}
    route:
    - destination: {host: echo.demo.svc.cluster.local, subset: v2}
  - name: my-app
    match:
    - sourceLabels: {app: client}
      sourceNamespace: demo
      uri: {prefix: /source}
    route:
    - destination: {host: echo.demo.svc.cluster.local, subset: v2}
  - name: case
    match:
    - uri: {exact: /CaseLess}
      ignoreUriCase: true
    route:
    - destination: {host: echo.demo.svc.cluster.local, subset: v2}
  - name: regex
    match:
    - uri: {regex: "/items/[0-9]+"}
    route:
    - destination: {host: echo.demo.svc.cluster.local, subset: v2}
  - name: rest
    route:
    - destination: {host: echo.demo.svc.cluster.local, subset: v1}
`

// TestMatch routes requests through two sidecars (client → echo-v1 or
// echo-v2) with a VirtualService that uses every HTTPMatchRequest field:
// each kind of match reaches v2 when the request satisfies it, and a rule
// whose condition does not hold never catches other traffic.
func TestMatch(t *testing.T) {
	m := startDemoMesh(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	client := m.Pod("client")
	h1 := client.HTTPClient()
	defer h1.CloseIdleConnections()
	// HTTP/2 without TLS (prior knowledge) through the same capture.
	h2 := &http.Client{Timeout: 5 * time.Second, Transport: &http2.Transport{
		AllowHTTP: true,
		DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			return client.DialContext(ctx, network, addr)
		},
	}}
	defer h2.CloseIdleConnections()

	writeConfig(t, m, localmesh.DemoVirtualServiceFile, []byte(matchRules))
	// Applied once the regex rule and the rest answer as configured 20
	// times in a row each: under the demo's 80/20 split the old config
	// would do that with a chance of 0.2^20 × 0.8^20.
	waitFor(ctx, t, applyTimeout, "match rules not applied", func() error {
		for range 20 {
			if v := ask(ctx, h1, "GET", "/items/7", nil); v != "v2" {
				return errors.New("GET /items/7 → " + v)
			}
			if v := ask(ctx, h1, "GET", "/", nil); v != "v1" {
				return errors.New("GET / → " + v)
			}
		}
		return nil
	})

	for _, tc := range []struct {
		name   string
		method string
		target string
		header http.Header
		want   string
	}{
		{"nothing matches: the rest", "GET", "/", nil, "v1"},
		{"query exact", "GET", "/?version=v2", nil, "v2"},
		{"query other value", "GET", "/?version=v3", nil, "v1"},
		{"query first value counts", "GET", "/?version=v3&version=v2", nil, "v1"},
		{"query present", "GET", "/?beta", nil, "v2"},
		{"query absent", "GET", "/?betamax=1", nil, "v1"},
		{"withoutHeaders, header absent", "GET", "/without", nil, "v2"},
		{"withoutHeaders, other value", "GET", "/without", http.Header{"X-Skip": {"no"}}, "v2"},
		{"withoutHeaders, excluded value", "GET", "/without", http.Header{"X-Skip": {"yes"}}, "v1"},
		{"header present", "GET", "/", http.Header{"X-Debug": {"1"}}, "v2"},
		{"method POST", "POST", "/", nil, "v2"},
		{"method PUT", "PUT", "/", nil, "v1"},
		{"authority", "GET", "/", http.Header{"Host": {localmesh.DemoHost}}, "v2"},
		{"authority VIP", "GET", "/", http.Header{"Host": {localmesh.DemoVIP}}, "v1"},
		{"scheme http", "GET", "/scheme", nil, "v2"},
		{"sourceLabels and sourceNamespace of the client", "GET", "/source", nil, "v2"},
		{"ignoreUriCase", "GET", "/caseless", nil, "v2"},
		{"ignoreUriCase exact", "GET", "/caseless/x", nil, "v1"},
		{"regex full match", "GET", "/items/42", nil, "v2"},
		{"regex not a prefix", "GET", "/items/42/x", nil, "v1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ask(ctx, h1, tc.method, tc.target, tc.header); got != tc.want {
				t.Errorf("HTTP/1.1 %s %s %v → %s, want %s", tc.method, tc.target, tc.header, got, tc.want)
			}
			if got := ask(ctx, h2, tc.method, tc.target, tc.header); got != tc.want {
				t.Errorf("HTTP/2 %s %s %v → %s, want %s", tc.method, tc.target, tc.header, got, tc.want)
			}
		})
	}
}

// ask sends one request to the demo service from the client pod and
// returns the version of strait-echo that answered, or what went wrong.
func ask(ctx context.Context, c *http.Client, method, target string, header http.Header) string {
	req, err := http.NewRequestWithContext(ctx, method, "http://"+localmesh.DemoVIP+target, nil)
	if err != nil {
		return err.Error()
	}
	for k, vs := range header {
		if k == "Host" {
			req.Host = vs[0]
			continue
		}
		req.Header[k] = vs
	}
	resp, err := c.Do(req)
	if err != nil {
		return "error: " + err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Sprintf("status %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
	}
	var rep localmesh.EchoReply
	if err := json.Unmarshal(body, &rep); err != nil {
		return "not strait-echo's JSON: " + string(body)
	}
	return rep.Version
}
