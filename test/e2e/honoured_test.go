package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/localmesh"
)

// TestHonouredFieldsThroughSidecars: fields docs/istio-fields.md lists
// as honoured that no other e2e test sent a request through (picked at
// random from the table), each checked through the client's sidecar and
// the servers' sidecars, in one mesh with the rules rewritten per case.
func TestHonouredFieldsThroughSidecars(t *testing.T) {
	requireMesh(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	echo := func(version string, extra ...string) []string {
		return append([]string{"strait-echo", "--addr", ":8080", "--version", version}, extra...)
	}
	m := startMesh(ctx, t, "honoured", localmesh.Options{
		Workloads: []localmesh.Workload{
			{Name: "client", Namespace: "demo", ConfigIP: "10.99.0.10"},
			{Name: "echo-v1", Namespace: "demo", ConfigIP: "10.99.0.11", App: echo("v1"), AppPort: 8080},
			{Name: "echo-v2", Namespace: "demo", ConfigIP: "10.99.0.12", App: echo("v2"), AppPort: 8080},
			{Name: "flaky-good", Namespace: "demo", ConfigIP: "10.99.0.21", App: echo("good"), AppPort: 8080},
			{Name: "flaky-bad", Namespace: "demo", ConfigIP: "10.99.0.22", App: echo("bad", "--status", "500"), AppPort: 8080},
			{Name: "shadow", Namespace: "demo", ConfigIP: "10.99.0.31", App: echo("shadow"), AppPort: 8080},
		},
	})
	client := m.Pod("client")
	hc := client.NewHTTPClient(true)
	defer hc.CloseIdleConnections()

	// apply writes the rules and waits until the client's proxy has the
	// config that matches every regular expression of want (matched
	// against the config dump without white space).
	apply := func(t *testing.T, rules string, want ...string) {
		t.Helper()
		if err := m.WriteConfig("rules.yaml", []byte(rules)); err != nil {
			t.Fatal(err)
		}
		waitFor(ctx, t, applyTimeout, "config never reached the client's proxy", func() error {
			dump, err := client.Admin(ctx, "/config_dump?include_eds")
			if err != nil {
				return err
			}
			compact := bytes.Join(bytes.Fields(dump), nil)
			for _, w := range want {
				if !regexp.MustCompile(w).Match(compact) {
					return fmt.Errorf("config dump lacks %q", w)
				}
			}
			return nil
		})
	}
	do := func(t *testing.T, c *http.Client, method, url string, h http.Header) reply {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range h {
			req.Header[k] = v
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, url, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var e localmesh.EchoReply
		_ = json.Unmarshal(body, &e)
		return reply{status: resp.StatusCode, version: e.Version, header: resp.Header}
	}

	// http.match.method.prefix, http.match.method.regex and
	// http.match.headers.prefix: only exact method matches had a request
	// test.
	t.Run("method prefix and regex, header prefix", func(t *testing.T) {
		apply(t, `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: echo, namespace: demo}
spec:
  hosts: [echo.demo.svc.cluster.local]
  http:
  - name: writes
    match:
    - method: {prefix: PO}
    - method: {regex: "P(U|AT)[A-Z]*"}
    - headers:
        x-team: {prefix: blue}
    route:
    - destination: {host: echo.demo.svc.cluster.local, subset: v2}
  - route:
    - destination: {host: echo.demo.svc.cluster.local, subset: v1}
`, regexp.QuoteMeta(`"P(U|AT)[A-Z]*"`))
		for _, tc := range []struct {
			method, team, want string
		}{
			{"GET", "", "v1"}, {"POST", "", "v2"}, {"PUT", "", "v2"}, {"PATCH", "", "v2"},
			{"DELETE", "", "v1"}, {"OPTIONS", "", "v1"}, {"HEAD", "", "v1"},
			{"GET", "blue-sky", "v2"}, {"GET", "sky-blue", "v1"},
		} {
			h := http.Header{}
			if tc.team != "" {
				h.Set("X-Team", tc.team)
			}
			r := do(t, hc, tc.method, "http://240.240.0.10/", h)
			if tc.method == "HEAD" {
				// No body to name the version: a 200 from v1's route is
				// all HEAD can show.
				if r.status != 200 {
					t.Errorf("HEAD: status %d", r.status)
				}
				continue
			}
			if r.status != 200 || r.version != tc.want {
				t.Errorf("%s with x-team %q: status %d from %q, want 200 from %s", tc.method, tc.team, r.status, r.version, tc.want)
			}
		}
	})

	// Weights are relative, as in Istio: 3 and 1 split 3:1 though they do
	// not add up to 100.
	t.Run("relative weights", func(t *testing.T) {
		apply(t, `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: echo, namespace: demo}
spec:
  hosts: [echo.demo.svc.cluster.local]
  http:
  - route:
    - destination: {host: echo.demo.svc.cluster.local, subset: v1}
      weight: 3
    - destination: {host: echo.demo.svc.cluster.local, subset: v2}
      weight: 1
`, `"weight":3[,}]`)
		s := client.SendRequests(ctx, "http://240.240.0.10/", 200)
		if s.Failures > 0 {
			t.Fatalf("%d failures: %s", s.Failures, s.FirstError)
		}
		// 150 expected of 200, standard deviation about 6.
		if p := s.Percent("v1"); p < 60 || p > 90 {
			t.Errorf("v1 got %.0f%% with weights 3:1, want about 75%%; counts %v", p, s.Counts)
		}
	})

	// http.mirrorPercent, the deprecated integer Istio still reads: 100
	// mirrors every request, 0 none.
	t.Run("mirrorPercent", func(t *testing.T) {
		apply(t, `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: echo, namespace: demo}
spec:
  hosts: [echo.demo.svc.cluster.local]
  http:
  - name: none
    match: [{headers: {x-case: {exact: none}}}]
    route:
    - destination: {host: echo.demo.svc.cluster.local, subset: v1}
    mirror: {host: shadow.demo.svc.cluster.local}
    mirrorPercent: 0
  - name: all
    route:
    - destination: {host: echo.demo.svc.cluster.local, subset: v1}
    mirror: {host: shadow.demo.svc.cluster.local}
    mirrorPercent: 100
`, regexp.QuoteMeta("outbound|80||shadow.demo.svc.cluster.local"), `"x-case"`)
		const n = 10
		for i := range 2 * n {
			key, tcase := "honoured-mirror-none", "none"
			if i >= n {
				key, tcase = "honoured-mirror-all", "all"
			}
			if r := do(t, hc, "GET", "http://240.240.0.10/", http.Header{"X-Echo-Key": {key}, "X-Case": {tcase}}); r.status != 200 || r.version != "v1" {
				t.Fatalf("request %d: status %d from %q", i, r.status, r.version)
			}
		}
		count := func(key string) (int, string) {
			var kc struct {
				Count int    `json:"count"`
				Host  string `json:"host"`
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://240.240.0.30/_echo/count?key="+key, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if err := json.NewDecoder(resp.Body).Decode(&kc); err != nil {
				t.Fatal(err)
			}
			return kc.Count, kc.Host
		}
		// Mirrors are sent beside the main requests: wait for the last
		// ones; the rule with 0 % has sent none by then.
		deadline := time.Now().Add(10 * time.Second)
		for {
			got, host := count("honoured-mirror-all")
			if got == n {
				if !strings.HasSuffix(host, "-shadow") && !strings.Contains(host, "-shadow:") {
					t.Errorf("mirrored Host %q, want the -shadow suffix", host)
				}
				break
			}
			if got > n || time.Now().After(deadline) {
				t.Fatalf("shadow saw %d of %d requests mirrored with mirrorPercent 100", got, n)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if got, _ := count("honoured-mirror-none"); got != 0 {
			t.Errorf("shadow saw %d requests mirrored with mirrorPercent 0", got)
		}
	})

	// trafficPolicy.connectionPool.http.http2MaxRequests: Envoy's
	// max_requests circuit breaker, for HTTP/1.1 too.
	t.Run("http2MaxRequests overflows", func(t *testing.T) {
		apply(t, `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: echo-pool, namespace: demo}
spec:
  # A second rule for the host: merged with mesh.yaml's (which has the
  # subsets and no traffic policy), as Istio merges them.
  host: echo.demo.svc.cluster.local
  trafficPolicy:
    connectionPool:
      tcp: {maxConnections: 100}
      http: {http1MaxPendingRequests: 100, http2MaxRequests: 1}
`, `"maxRequests":1[,}]`)
		const n = 5
		var wg sync.WaitGroup
		results := make([]reply, n)
		for i := range n {
			wg.Go(func() {
				c := client.NewHTTPClient(false)
				defer c.CloseIdleConnections()
				results[i] = get(t, ctx, c, "http://240.240.0.10/", http.Header{"X-Echo-Delay": {"1s"}})
			})
		}
		wg.Wait()
		ok, over := 0, 0
		for _, r := range results {
			switch {
			case r.status == 200:
				ok++
			case r.status == 503 && r.header.Get("X-Envoy-Overloaded") == "true":
				over++
			default:
				t.Errorf("status %d, headers %v", r.status, r.header)
			}
		}
		// One request at a time to the cluster: of five sent at once, one
		// is served and the others overflow (a late one may find the slot
		// free again).
		if ok < 1 || over < 2 || ok+over != n {
			t.Errorf("%d served, %d overflowed of %d concurrent requests with http2MaxRequests 1", ok, over, n)
		}
	})

	// trafficPolicy.outlierDetection.minHealthPercent: Envoy's healthy
	// panic threshold. With the bad host of two ejected, half the hosts
	// are healthy: below 60 % the balancer panics and sends to both again;
	// at 0 % (Istio's default) it never does.
	t.Run("minHealthPercent", func(t *testing.T) {
		flaky := func(minHealth int) string {
			return fmt.Sprintf(`apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: flaky, namespace: demo}
spec:
  host: flaky.demo.svc.cluster.local
  trafficPolicy:
    outlierDetection:
      consecutive5xxErrors: 1
      interval: 1s
      baseEjectionTime: 60s
      maxEjectionPercent: 100
      minHealthPercent: %d
`, minHealth)
		}
		failures := func(t *testing.T) int {
			t.Helper()
			failed := 0
			for range 60 {
				switch r := get(t, ctx, hc, "http://240.240.0.20/", nil); r.status {
				case 200:
				case 500:
					failed++
				default:
					t.Fatalf("status %d", r.status)
				}
			}
			return failed
		}
		apply(t, flaky(60), `"healthyPanicThreshold":\{"value":60[,}]`)
		if failed := failures(t); failed < 10 {
			t.Errorf("minHealthPercent 60: %d of 60 requests failed; want many (the panicking balancer sends to the ejected host too)", failed)
		}
		stats, err := client.Admin(ctx, "/stats")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(stats, []byte("cluster.outbound|80||flaky.demo.svc.cluster.local.outlier_detection.ejections_enforced_total: ")) ||
			bytes.Contains(stats, []byte("cluster.outbound|80||flaky.demo.svc.cluster.local.outlier_detection.ejections_enforced_total: 0\n")) {
			t.Errorf("no ejection enforced: the failures above are not panic mode's\n%s", grep(stats, "outlier"))
		}
		// Percent 0 prints as {}.
		apply(t, flaky(0), `"healthyPanicThreshold":\{\}`)
		if failed := failures(t); failed > 3 {
			t.Errorf("minHealthPercent 0: %d of 60 requests failed; want at most 3 (the bad host ejected after its first 500, for good)", failed)
		}
	})
}
