package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/localmesh"
)

// geoRule renders the DestinationRule of host (a short name in namespace
// geo) with the given trafficPolicy.
func geoRule(host, policy string) string {
	return fmt.Sprintf(`apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: %s, namespace: geo}
spec:
  host: %s.geo.svc.cluster.local
  trafficPolicy:
%s
`, host, host, indent(policy, 4))
}

// TestLocalityThroughSidecars: endpoint weights, locality priorities
// (preference for the client's zone, failover by zone then region when a
// host is ejected or gone), distribute weights and the retry circuit
// breaker, each checked with real requests from the client pod through
// its sidecar to the server pods' sidecars. One mesh; the cases change
// the rules in turn.
func TestLocalityThroughSidecars(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// The mesh runs on a copy of testdata/locality: the test rewrites
	// geo-a.yaml and mesh.yaml there.
	m := startMesh(ctx, t, "locality", localmesh.Options{
		Workloads: []localmesh.Workload{
			{Name: "client", Namespace: "geo", ConfigIP: "10.93.0.10"},
			echoPod("geo-a", "geo", "10.93.0.11", "a"),
			echoPod("geo-b", "geo", "10.93.0.12", "b"),
			echoPod("geo-c", "geo", "10.93.0.13", "c"),
			echoPod("bad-a", "geo", "10.93.0.21", "bad-a", "--status", "500"),
			echoPod("w3", "geo", "10.93.0.31", "w3"),
			echoPod("w1", "geo", "10.93.0.32", "w1"),
		},
	})
	client := m.Pod("client")
	hc := client.NewHTTPClient(true)
	defer hc.CloseIdleConnections()

	// apply writes file and waits until the client's proxy config (CDS
	// and EDS, as /config_dump shows them) matches every pattern.
	apply := func(t *testing.T, file, data string, want ...string) {
		t.Helper()
		writeConfig(t, m, file, []byte(data))
		waitDump(ctx, t, client, want...)
	}
	// only sends n requests to url and fails unless version answered all.
	only := func(t *testing.T, url, version string, n int) {
		t.Helper()
		s := client.SendRequests(ctx, url, n)
		if s.Failures > 0 || s.Counts[version] != n {
			t.Fatalf("%d requests to %s: %v, %d failures (%s); want all from %s", n, url, s.Counts, s.Failures, s.FirstError, version)
		}
	}

	t.Run("endpoint weights 3 to 1", func(t *testing.T) {
		// No rule yet: Istio's default LEAST_REQUEST, idle hosts shared by
		// weight.
		for _, c := range []struct{ url, heavy, light string }{
			{"http://240.240.9.3/", "w3", "w1"}, // WorkloadEntry weights
			{"http://240.240.9.4/", "w1", "w3"}, // ServiceEntry endpoint weights
		} {
			s := client.SendRequests(ctx, c.url, 400)
			if s.Failures > 0 || s.Counts[c.heavy] < 280 || s.Counts[c.heavy] > 320 || s.Counts[c.heavy]+s.Counts[c.light] != 400 {
				t.Errorf("LEAST_REQUEST %s: %v (%d failures: %s); want %s about 300 of 400", c.url, s.Counts, s.Failures, s.FirstError, c.heavy)
			}
		}
		// Each rule carries a marker the client's config shows once it
		// applies (ROUND_ROBIN, the enum's zero, is not printed).
		for _, c := range []struct{ policy, marker string }{
			{"RANDOM", `"RANDOM"`},
			{"ROUND_ROBIN", `"consecutive5xx":\s*7\b`},
		} {
			apply(t, "rules.yaml", geoRule("weighted", `loadBalancer: {simple: `+c.policy+`}
outlierDetection: {consecutive5xxErrors: `+map[string]string{"RANDOM": "6", "ROUND_ROBIN": "7"}[c.policy]+`}`), c.marker)
			s := client.SendRequests(ctx, "http://240.240.9.3/", 400)
			lo, hi := 280, 320
			if c.policy == "RANDOM" {
				lo, hi = 260, 340 // over 6 standard deviations
			}
			if s.Failures > 0 || s.Counts["w3"] < lo || s.Counts["w3"] > hi {
				t.Errorf("%s: %v (%d failures: %s); want w3 about 300 of 400", c.policy, s.Counts, s.Failures, s.FirstError)
			}
		}
	})

	t.Run("distribute 80/20", func(t *testing.T) {
		apply(t, "rules.yaml", geoRule("geo", `loadBalancer:
  localityLbSetting:
    distribute:
    - from: us-east/zone-a
      to: {"us-east/zone-a": 80, "eu-west/zone-c": 20}`), `"localityWeightedLbConfig"`, `"loadBalancingWeight":\s*80`)
		s := client.SendRequests(ctx, "http://240.240.9.1/", 500)
		if s.Failures > 0 || s.Counts["a"] < 370 || s.Counts["a"] > 430 || s.Counts["c"]+s.Counts["a"] != 500 {
			t.Errorf("distribute 80/20: %v (%d failures: %s); want a about 400, c about 100, b none", s.Counts, s.Failures, s.FirstError)
		}
	})

	t.Run("retryRemoteLocalities retries in another locality", func(t *testing.T) {
		// flaky's zone-a host (priority 0) answers 500 and is never
		// ejected; eu-west is priority 1. previous_priorities (updated
		// every 2 attempts, as Istio sets it) sends the third attempt
		// there; without it every attempt stays in zone-a.
		rules := func(remote bool) string {
			return geoRule("flaky", `outlierDetection: {consecutive5xxErrors: 1000}`) + fmt.Sprintf(`---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: flaky, namespace: geo}
spec:
  hosts: [flaky.geo.svc.cluster.local]
  http:
  - retries: {attempts: 2, retryOn: 5xx, retryRemoteLocalities: %v}
    route:
    - destination: {host: flaky.geo.svc.cluster.local}
`, remote)
		}
		apply(t, "rules.yaml", rules(false), `"consecutive5xx":\s*1000\b`, `"priority":\s*1`)
		waitDump(ctx, t, client, `"numRetries":\s*2\b`)
		for i := range 5 {
			if r := get(t, ctx, hc, "http://240.240.9.2/", nil); r.status != 500 || r.version != "bad-a" {
				t.Fatalf("request %d without retryRemoteLocalities: status %d from %q; want 500 from bad-a (every attempt in zone-a)", i, r.status, r.version)
			}
		}
		apply(t, "rules.yaml", rules(true), `previous_priorities`)
		for i := range 10 {
			r := get(t, ctx, hc, "http://240.240.9.2/", nil)
			if r.status != 200 || r.version != "c" {
				t.Fatalf("request %d with retryRemoteLocalities: status %d from %q; want 200 from eu-west's c on the third attempt", i, r.status, r.version)
			}
		}
	})

	t.Run("ejected host fails over to the failover region", func(t *testing.T) {
		apply(t, "rules.yaml", geoRule("flaky", `outlierDetection:
  consecutive5xxErrors: 1
  interval: 1s
  baseEjectionTime: 60s
  maxEjectionPercent: 100
loadBalancer:
  localityLbSetting:
    failover: [{from: us-east, to: eu-west}]`), `"localityWeightedLbConfig"`, `"priority":\s*1`, `"consecutive5xx":\s*1\b`)
		// The previous case's VirtualService (retries to another
		// locality) is gone with the file: until the route follows, a
		// retry would hide the 500.
		waitDumpLacks(ctx, t, client, `previous_priorities`)
		failed := 0
		for i := range 40 {
			r := get(t, ctx, hc, "http://240.240.9.2/", nil)
			switch {
			case r.status == 500 && r.version == "bad-a":
				failed++
			case r.status == 200 && r.version == "c":
			default:
				t.Fatalf("request %d: status %d from %q", i, r.status, r.version)
			}
		}
		// The zone-a host is priority 0: it takes the first request, is
		// ejected by its 500, and eu-west serves the rest.
		if failed < 1 || failed > 3 {
			t.Errorf("%d of 40 requests failed; want 1 to 3 (the zone-a host ejected after its first 500)", failed)
		}
	})

	t.Run("own zone preferred, then own region when it is gone", func(t *testing.T) {
		apply(t, "rules.yaml", geoRule("geo", `outlierDetection:
  consecutive5xxErrors: 5
  interval: 1s
  baseEjectionTime: 30s`), `"priority":\s*2`)
		// The mesh's default localityLbSetting with outlier detection:
		// zone-a is priority 0, zone-b 1, eu-west 2.
		only(t, "http://240.240.9.1/", "a", 100)
		// The zone-a pod leaves the mesh: its region's other zone serves,
		// not eu-west.
		// The load assignment keeps a priority 1 (zone-b): the wait below
		// is for the answers to change.
		writeConfig(t, m, "geo-a.yaml", []byte("# geo-a removed\n"))
		waitFor(ctx, t, applyTimeout, "zone-a pod still served after its WorkloadEntry went", func() error {
			if r := podGet(ctx, client, "http://240.240.9.1/", ""); r.err != nil || r.status != 200 || r.version == "a" {
				return fmt.Errorf("last answer %s; want 200 from another pod than geo-a", r)
			}
			return nil
		})
		only(t, "http://240.240.9.1/", "b", 100)

		// The client moves to eu-west/zone-c (its WorkloadEntry's
		// locality): its priorities follow it.
		mesh, err := os.ReadFile(filepath.Join("testdata", "locality", "mesh.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		moved := bytes.Replace(mesh, []byte("{address: 10.93.0.10, locality: us-east/zone-a,"), []byte("{address: 10.93.0.10, locality: eu-west/zone-c,"), 1)
		if bytes.Equal(moved, mesh) {
			t.Fatal("testdata/locality/mesh.yaml: the client's WorkloadEntry is not where the test expects it")
		}
		writeConfig(t, m, "mesh.yaml", moved)
		waitFor(ctx, t, applyTimeout, "the client's new locality never reached its load assignment", func() error {
			return fromVersion(podGet(ctx, client, "http://240.240.9.1/", ""), "c")
		})
		only(t, "http://240.240.9.1/", "c", 100)
	})

	t.Run("maxRetries bounds the retries in flight", func(t *testing.T) {
		apply(t, "rules.yaml", geoRule("one", `connectionPool:
  http: {maxRetries: 1}`), `"maxRetries":\s*1\b`)
		// Istio's default retry policy retries a 503 once. Request "hold"
		// fails first and its retry is slow: while that retry is in
		// flight, the only retry the cluster allows is taken.
		var wg sync.WaitGroup
		var hold reply
		wg.Go(func() {
			c := client.NewHTTPClient(false)
			defer c.CloseIdleConnections()
			hold = get(t, ctx, c, "http://240.240.9.5/", http.Header{
				"X-Echo-Key": {"hold"}, "X-Echo-Fail": {"1"}, "X-Echo-Delay": {"2s"}})
		})
		// The app counts "hold" on arrival: 2 means its retry is in flight
		// (each attempt waits 2s before answering; the client gives up at 5s).
		waitFor(ctx, t, 20*time.Second, "the retry of the held request never reached the app", func() error {
			if n, _ := keyCount(t, ctx, hc, "http://240.240.9.5", "hold"); n < 2 {
				return fmt.Errorf("the app counted %d attempts, want 2", n)
			}
			return nil
		})
		over := get(t, ctx, hc, "http://240.240.9.5/", http.Header{"X-Echo-Key": {"over"}, "X-Echo-Fail": {"1"}})
		wg.Wait()
		if hold.status != 200 {
			t.Errorf("held request: status %d, want 200 after its retry", hold.status)
		}
		if n, _ := keyCount(t, ctx, hc, "http://240.240.9.5", "over"); over.status != 503 || n != 1 {
			t.Errorf("request failing while the retry budget is taken: status %d; want its 503 without a retry", over.status)
		}
		// With no retry in flight, the same request is retried.
		if r := get(t, ctx, hc, "http://240.240.9.5/", http.Header{"X-Echo-Key": {"free"}, "X-Echo-Fail": {"1"}}); r.status != 200 {
			t.Errorf("request failing once with the budget free: status %d, want 200 after a retry", r.status)
		}
		stats, err := client.Admin(ctx, "/stats")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(stats, []byte("cluster.outbound|80||one.geo.svc.cluster.local.upstream_rq_retry_overflow: 1")) {
			t.Errorf("stats lack one retry overflow:\n%s", grep(stats, "retry"))
		}
	})
}
