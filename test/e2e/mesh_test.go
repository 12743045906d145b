package e2e

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/localmesh"
)

const matchVirtualService = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: echo
  namespace: demo
spec:
  hosts:
  - echo.demo.svc.cluster.local
  http:
  - name: by-header
    match:
    - headers:
        x-version:
          exact: v2
    route:
    - destination:
        host: echo.demo.svc.cluster.local
        subset: v2
  - name: by-path
    match:
    - uri:
        prefix: /canary
    - uri:
        exact: /exact
    route:
    - destination:
        host: echo.demo.svc.cluster.local
        subset: v2
        port:
          number: 80
  - route:
    - destination:
        host: echo.demo.svc.cluster.local
        subset: v1
`

// startDemoMesh starts the mesh of examples/demo (see startMesh).
func startDemoMesh(t *testing.T) *localmesh.Mesh {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	return startMesh(ctx, t, "", localmesh.Options{ConfigDir: examplesDir(t), Workloads: localmesh.DemoWorkloads()})
}

// assertSplit checks the observed split within 10 points of the weights:
// with 400 requests that is over 4 standard deviations at 30/70, so a
// failure means wrong weights, not bad luck.
func assertSplit(t *testing.T, s localmesh.Split, v1, v2 int) {
	t.Helper()
	if s.Failures > 0 {
		t.Fatalf("%d of %d requests failed; first: %s", s.Failures, s.Total, s.FirstError)
	}
	for v, w := range map[string]int{"v1": v1, "v2": v2} {
		if d := math.Abs(s.Percent(v) - float64(w)); d > 10 {
			t.Errorf("%s: observed %.1f%%, configured %d%% (tolerance 10 points); counts %v", v, s.Percent(v), w, s.Counts)
		}
	}
}

// waitWeights waits until the client's routes weigh the demo's subsets
// v1 and v2 so, and returns how long that took.
func waitWeights(ctx context.Context, client *localmesh.Pod, v1, v2 uint32, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	want := map[string]uint32{
		"outbound|80|v1|" + localmesh.DemoHost: v1,
		"outbound|80|v2|" + localmesh.DemoHost: v2,
	}
	err := poll(ctx, timeout, func() error {
		got, err := client.RouteWeights(ctx)
		if err != nil {
			return err
		}
		for k, w := range want {
			if got[k] != w {
				return fmt.Errorf("weights %v, want %v", got, want)
			}
		}
		return nil
	})
	return time.Since(start), err
}

// TestMeshEndToEnd is the demo's checks as a test: weighted split through
// two sidecars, a live weight change with no failed request, the source
// address the app sees, the client proxy's stats, and a broken file that
// is reported and skipped.
func TestMeshEndToEnd(t *testing.T) {
	m := startDemoMesh(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	client := m.Pod("client")

	t.Run("split follows the weights", func(t *testing.T) {
		s := client.SendRequests(ctx, localmesh.DemoURL, 400)
		assertSplit(t, s, 80, 20)
		// Through the server's sidecar, the app sees the inbound passthrough address.
		for ip, n := range s.Remotes {
			if ip != "127.0.0.6" {
				t.Errorf("app saw %d requests from %s, want all from 127.0.0.6", n, ip)
			}
		}
	})

	t.Run("client proxy counts the requests", func(t *testing.T) {
		n, err := client.ClusterRequests(ctx, "outbound|80|v1|"+localmesh.DemoHost)
		if err != nil {
			t.Fatal(err)
		}
		if n < 200 {
			t.Errorf("envoy_cluster_upstream_rq_total for v1 = %d, want at least 200 after 400 requests at 80%%", n)
		}
	})

	t.Run("live weight change", func(t *testing.T) {
		load := client.StartLoad(ctx, localmesh.DemoURL, 2)
		if err := m.WriteConfig(localmesh.DemoVirtualServiceFile, localmesh.DemoVirtualService(30, 70)); err != nil {
			load.Stop()
			t.Fatal(err)
		}
		took, err := waitWeights(ctx, client, 30, 70, 2*time.Second)
		during := load.Stop()
		if err != nil {
			t.Fatalf("new weights not applied within 2s of the write: %v", err)
		}
		t.Logf("new weights applied %s after the write; %d requests during the change", took, during.Total)
		if during.Failures > 0 {
			t.Fatalf("%d of %d requests failed during the change; first: %s", during.Failures, during.Total, during.FirstError)
		}
		if during.Total == 0 {
			t.Fatal("no request ran during the change")
		}
		assertSplit(t, client.SendRequests(ctx, localmesh.DemoURL, 400), 30, 70)
	})

	t.Run("broken file is reported and skipped", func(t *testing.T) {
		broken := strings.Replace(string(localmesh.DemoVirtualService(50, 50)), "weight: 50\n", "weight: fifty\n", 1)
		writeConfig(t, m, localmesh.DemoVirtualServiceFile, []byte(broken))
		waitFor(ctx, t, applyTimeout, "straitd's report of the broken file", func() error {
			data, _ := os.ReadFile(m.LogPath("straitd"))
			if !strings.Contains(string(data), localmesh.DemoVirtualServiceFile+": document 1:") {
				return fmt.Errorf("straitd did not log %q:\n%s", localmesh.DemoVirtualServiceFile+": document 1: …", tail(string(data), 20))
			}
			return nil
		})
		// The last good config (30/70) keeps serving.
		assertSplit(t, client.SendRequests(ctx, localmesh.DemoURL, 400), 30, 70)
		if err := m.WriteConfig(localmesh.DemoVirtualServiceFile, localmesh.DemoVirtualService(50, 50)); err != nil {
			t.Fatal(err)
		}
		if _, err := waitWeights(ctx, client, 50, 50, 2*time.Second); err != nil {
			t.Fatalf("fixed file not applied: %v", err)
		}
	})

	t.Run("match on header and path prefix", func(t *testing.T) {
		writeConfig(t, m, localmesh.DemoVirtualServiceFile, []byte(matchVirtualService))
		// The catch-all route sends everything to v1; the matches send to v2.
		waitFor(ctx, t, applyTimeout, "match rules", func() error {
			if s := client.SendRequestsWithHeader(ctx, localmesh.DemoURL, http.Header{"X-Version": {"v2"}}, 20); s.Counts["v2"] != 20 {
				return fmt.Errorf("requests with x-version: v2 were not all routed to v2: %v (failures %d: %s)", s.Counts, s.Failures, s.FirstError)
			}
			return nil
		})
		if s := client.SendRequests(ctx, "http://"+localmesh.DemoVIP+"/canary/x", 20); s.Counts["v2"] != 20 {
			t.Errorf("path prefix /canary: counts %v, want all 20 on v2 (failures %d: %s)", s.Counts, s.Failures, s.FirstError)
		}
		if s := client.SendRequests(ctx, "http://"+localmesh.DemoVIP+"/exact", 20); s.Counts["v2"] != 20 {
			t.Errorf("exact path /exact: counts %v, want all 20 on v2", s.Counts)
		}
		if s := client.SendRequests(ctx, "http://"+localmesh.DemoVIP+"/exact/more", 20); s.Counts["v1"] != 20 {
			t.Errorf("path /exact/more must not match the exact rule: counts %v, want all 20 on v1", s.Counts)
		}
		if s := client.SendRequestsWithHeader(ctx, localmesh.DemoURL, http.Header{"X-Version": {"v3"}}, 20); s.Counts["v1"] != 20 {
			t.Errorf("x-version: v3 must fall through to v1: counts %v", s.Counts)
		}
		// The service's host name works as well as the VIP.
		if s := client.SendRequestsWithHeader(ctx, localmesh.DemoURL, http.Header{"X-Version": {"v2"}, "Host": {localmesh.DemoHost}}, 5); s.Counts["v2"] != 5 {
			t.Errorf("Host %s: counts %v", localmesh.DemoHost, s.Counts)
		}
	})
}
