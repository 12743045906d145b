package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/localmesh"
)

// lbRules renders the DestinationRules of one case: echo's trafficPolicy
// and flaky's.
func lbRules(echoPolicy, flakyPolicy string) []byte {
	return fmt.Appendf(nil, `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: echo, namespace: demo}
spec:
  host: echo.demo.svc.cluster.local
  trafficPolicy:
%s
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: flaky, namespace: demo}
spec:
  host: flaky.demo.svc.cluster.local
  trafficPolicy:
%s
`, indent(echoPolicy, 4), indent(flakyPolicy, 4))
}

func indent(s string, n int) string {
	pad := strings.Repeat(" ", n)
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := range lines {
		lines[i] = pad + lines[i]
	}
	return strings.Join(lines, "\n")
}

// TestLoadBalancingThroughSidecars: one mesh, DestinationRule traffic
// policies applied in turn, each checked with real requests from the
// client pod through its sidecar and the server pods' sidecars.
func TestLoadBalancingThroughSidecars(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	m := startMesh(ctx, t, "lb", localmesh.Options{
		Workloads: []localmesh.Workload{
			{Name: "client", Namespace: "demo", ConfigIP: "10.99.0.10"},
			echoPod("echo-v1", "demo", "10.99.0.11", "v1"),
			echoPod("echo-v2", "demo", "10.99.0.12", "v2"),
			echoPod("flaky-good", "demo", "10.99.0.21", "good"),
			echoPod("flaky-bad", "demo", "10.99.0.22", "bad", "--status", "500"),
		},
	})
	client := m.Pod("client")
	hc := client.NewHTTPClient(true)
	defer hc.CloseIdleConnections()

	// apply writes the rules and waits until the client's proxy has the
	// cluster config that contains want.
	apply := func(t *testing.T, rules []byte, want ...string) {
		t.Helper()
		writeConfig(t, m, "rules.yaml", rules)
		waitDump(ctx, t, client, quote(want...)...)
	}

	t.Run("consistent hash by header", func(t *testing.T) {
		apply(t, lbRules(`loadBalancer:
  consistentHash:
    httpHeaderName: x-user
    ringHash: {minimumRingSize: 1024}`, `loadBalancer: {simple: ROUND_ROBIN}`), `"RING_HASH"`, `"x-user"`)
		seen := map[string]bool{}
		for u := range 20 {
			user := fmt.Sprintf("user-%d", u)
			var first string
			for range 8 {
				r := get(t, ctx, hc, "http://240.240.0.10/", http.Header{"X-User": {user}})
				if r.status != 200 {
					t.Fatalf("user %s: status %d", user, r.status)
				}
				if first == "" {
					first = r.version
				} else if r.version != first {
					t.Fatalf("user %s went to %s then %s: not sticky", user, first, r.version)
				}
			}
			seen[first] = true
		}
		if len(seen) != 2 {
			t.Errorf("20 users all went to %v: hashing does not spread", seen)
		}
	})

	t.Run("consistent hash by query parameter and source IP", func(t *testing.T) {
		apply(t, lbRules(`loadBalancer:
  consistentHash:
    httpQueryParameterName: id
    ringHash: {minimumRingSize: 2048}`, `loadBalancer:
  consistentHash:
    useSourceIp: true`), `"queryParameter"`, `"sourceIp"`)
		seen := map[string]bool{}
		for u := range 20 {
			var first string
			for range 5 {
				r := get(t, ctx, hc, fmt.Sprintf("http://240.240.0.10/p?x=1&id=%d", u), nil)
				if first == "" {
					first = r.version
				} else if r.version != first {
					t.Fatalf("id %d went to %s then %s: not sticky", u, first, r.version)
				}
			}
			seen[first] = true
		}
		if len(seen) != 2 {
			t.Errorf("20 ids all went to %v: hashing does not spread", seen)
		}
		// The client pod has one address: every request to flaky goes to
		// the same host (the bad one answers 500, which is also sticky).
		var first int
		for i := range 20 {
			r := get(t, ctx, hc, "http://240.240.0.20/", nil)
			if i == 0 {
				first = r.status
			} else if r.status != first {
				t.Fatalf("source IP hash: status %d then %d, so two hosts served one client", first, r.status)
			}
		}
	})

	t.Run("consistent hash by cookie with ttl", func(t *testing.T) {
		apply(t, lbRules(`loadBalancer:
  consistentHash:
    httpCookie: {name: session, path: /, ttl: 3600s}
    maglev: {tableSize: 65537}`, `loadBalancer: {simple: ROUND_ROBIN}`), `"MAGLEV"`, `"session"`)
		seen := map[string]bool{}
		for range 12 {
			// A new connection each time: the generated cookie names it.
			c := client.NewHTTPClient(false)
			r := get(t, ctx, c, "http://240.240.0.10/", nil)
			sc := r.header.Get("Set-Cookie")
			if !strings.HasPrefix(sc, `session="`) || !strings.Contains(sc, "Max-Age=3600") || !strings.Contains(sc, "Path=/") {
				t.Fatalf("Set-Cookie %q: want a generated session cookie with Max-Age=3600 and Path=/", sc)
			}
			cookie := strings.SplitN(sc, ";", 2)[0]
			for range 5 {
				r2 := get(t, ctx, c, "http://240.240.0.10/", http.Header{"Cookie": {cookie}})
				if r2.version != r.version {
					t.Fatalf("cookie %s went to %s then %s: not sticky", cookie, r.version, r2.version)
				}
				if r2.header.Get("Set-Cookie") != "" {
					t.Fatalf("a request with the cookie got another: %q", r2.header.Get("Set-Cookie"))
				}
			}
			seen[r.version] = true
			c.CloseIdleConnections()
		}
		if len(seen) != 2 {
			t.Logf("12 generated cookies all went to %v", seen) // possible by chance (2^-11), so not a failure
		}
	})

	// In this order, each policy's name is new in the client's config
	// when its rules apply (ROUND_ROBIN, the enum's zero, is not printed).
	for _, policy := range []string{"RANDOM", "LEAST_REQUEST"} {
		t.Run("spread "+policy, func(t *testing.T) {
			apply(t, lbRules(`loadBalancer: {simple: `+policy+`}`, `loadBalancer: {simple: `+policy+`}`), `"`+policy+`"`)
			s := client.SendRequests(ctx, "http://240.240.0.10/", 200)
			if s.Failures > 0 {
				t.Fatalf("%d failures: %s", s.Failures, s.FirstError)
			}
			for _, v := range []string{"v1", "v2"} {
				if p := s.Percent(v); p < 30 || p > 70 {
					t.Errorf("%s got %.0f%% of 200 requests with %s; counts %v", v, p, policy, s.Counts)
				}
			}
		})
	}

	t.Run("outlier detection ejects the host answering 500", func(t *testing.T) {
		apply(t, lbRules(`loadBalancer: {simple: ROUND_ROBIN}`, `loadBalancer: {simple: ROUND_ROBIN}
outlierDetection:
  consecutive5xxErrors: 1
  interval: 1s
  baseEjectionTime: 60s
  maxEjectionPercent: 50`), `"consecutive5xx"`)
		failed := 0
		for range 60 {
			r := get(t, ctx, hc, "http://240.240.0.20/", nil)
			switch r.status {
			case 200:
				if r.version != "good" {
					t.Fatalf("200 from %q", r.version)
				}
			case 500:
				failed++
			default:
				t.Fatalf("status %d", r.status)
			}
		}
		if failed == 0 || failed > 3 {
			t.Errorf("%d of 60 requests failed; want 1 to 3 (the bad host ejected after its first 500)", failed)
		}
		stats, err := client.Admin(ctx, "/stats")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(stats, []byte("cluster.outbound|80||flaky.demo.svc.cluster.local.outlier_detection.ejections_enforced_total: 1")) {
			t.Errorf("stats lack one enforced ejection:\n%s", grep(stats, "outlier"))
		}
	})

	t.Run("circuit breaker overflows with x-envoy-overloaded", func(t *testing.T) {
		// RANDOM marks the new rules in the config dump (the previous
		// case has none).
		apply(t, lbRules(`loadBalancer: {simple: RANDOM}
connectionPool:
  tcp: {maxConnections: 1}
  http: {http1MaxPendingRequests: 1}`, `loadBalancer: {simple: ROUND_ROBIN}`), `"RANDOM"`)
		const n = 6
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
			case r.status == 503 && r.header.Get("X-Envoy-Overloaded") == "true" &&
				strings.Contains(r.header.Get("X-Strait-Response-Flags"), "UO"):
				over++
			default:
				t.Errorf("status %d, headers %v", r.status, r.header)
			}
		}
		// One connection and one pending request: at least the first two
		// are served (the pending one after the first), and of six sent at
		// once the others overflow.
		if ok < 2 || over < 2 || ok+over != n {
			t.Errorf("%d served, %d overflowed of %d concurrent requests over maxConnections 1 + 1 pending", ok, over, n)
		}
		stats, err := client.Admin(ctx, "/stats")
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"upstream_rq_pending_overflow", "upstream_cx_overflow"} {
			line := "cluster.outbound|80||echo.demo.svc.cluster.local." + name + ": "
			if !bytes.Contains(stats, []byte(line)) || bytes.Contains(stats, []byte(line+"0\n")) {
				t.Errorf("stat %s not counted:\n%s", name, grep(stats, "overflow"))
			}
		}
	})

	t.Run("subset policy merged over the top level", func(t *testing.T) {
		const subset = "outbound|80|all|flaky.demo.svc.cluster.local"
		apply(t, []byte(subsetOutlierRules), subset, `"consecutive5xx"`)
		// The cluster comes first (CDS), its endpoints and the route to it
		// after (EDS, RDS): requests before the route would go to the
		// cluster without outlier detection.
		waitDump(ctx, t, client, `"cluster":\s*"`+regexp.QuoteMeta(subset)+`"`)
		waitFor(ctx, t, applyTimeout, "subset all's endpoints", func() error {
			n, err := endpointCount(ctx, client, subset)
			if err != nil {
				return err
			}
			if n != 2 {
				return fmt.Errorf("%d endpoints, want 2", n)
			}
			return nil
		})
		failed := 0
		for range 60 {
			r := get(t, ctx, hc, "http://240.240.0.20/", nil)
			if r.status != 200 {
				failed++
			}
		}
		if failed == 0 || failed > 3 {
			t.Errorf("%d of 60 requests to subset all failed; want 1 to 3 (its outlier detection ejecting the bad host)", failed)
		}
	})
}

// subsetOutlierRules: flaky's rule has no top-level policy; its subset
// "all" has outlier detection, which the route to that subset must get
// (the subset's policy merged over the top level's, as Istio merges).
const subsetOutlierRules = `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: flaky, namespace: demo}
spec:
  host: flaky.demo.svc.cluster.local
  trafficPolicy:
    loadBalancer: {simple: ROUND_ROBIN}
  subsets:
  - name: all
    labels: {app: flaky}
    trafficPolicy:
      outlierDetection:
        consecutive5xxErrors: 1
        interval: 1s
        baseEjectionTime: 60s
        maxEjectionPercent: 50
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: flaky, namespace: demo}
spec:
  hosts: [flaky.demo.svc.cluster.local]
  http:
  - route:
    - destination: {host: flaky.demo.svc.cluster.local, subset: all}
`

func grep(b []byte, s string) string {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
