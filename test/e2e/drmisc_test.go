package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/localmesh"
	"github.com/straitmesh/strait/internal/netns"
	"github.com/straitmesh/strait/internal/testreq"
)

// drmiscMesh: service echo with one pod, its VirtualService retrying 5xx
// once, and a client.
const drmiscMesh = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: echo, namespace: demo}
spec:
  hosts: [echo.demo.svc.cluster.local]
  addresses: [240.240.0.10]
  ports: [{number: 80, name: http, protocol: HTTP, targetPort: 8080}]
  location: MESH_INTERNAL
  resolution: STATIC
  workloadSelector: {labels: {app: echo}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: echo-v1, namespace: demo}
spec: {address: 10.99.0.11, labels: {app: echo, version: v1}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: client, namespace: demo}
spec: {address: 10.99.0.10, labels: {app: client}}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: echo, namespace: demo}
spec:
  hosts: [echo.demo.svc.cluster.local]
  http:
  - route:
    - destination: {host: echo.demo.svc.cluster.local}
    retries: {attempts: 1, retryOn: 5xx}
`

// TestDestinationRuleMiscThroughSidecars: DestinationRule traffic-policy
// fields (retryBudget) checked with real requests from the client pod
// through its sidecar and the server's.
func TestDestinationRuleMiscThroughSidecars(t *testing.T) {
	if err := netns.Available(); err != nil {
		testreq.Missing(t, "network namespaces unavailable: %v", err)
	}
	if binDir == "" {
		testreq.Missing(t, "no binaries: run as root or set STRAIT_BIN_DIR")
	}
	cfgDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(cfgDir, "mesh.yaml"), []byte(drmiscMesh), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	m, err := localmesh.Start(ctx, localmesh.Options{
		BinDir: binDir, ConfigDir: cfgDir,
		Workloads: []localmesh.Workload{
			{Name: "client", Namespace: "demo", ConfigIP: "10.99.0.10"},
			{Name: "echo-v1", Namespace: "demo", ConfigIP: "10.99.0.11", App: []string{"strait-echo", "--addr", ":8080", "--version", "v1"}, AppPort: 8080},
		},
	})
	if err != nil {
		t.Fatalf("start mesh: %v", err)
	}
	defer func() {
		if t.Failed() {
			for _, name := range []string{"straitd", "client-agent"} {
				if data, err := os.ReadFile(m.LogPath(name)); err == nil {
					t.Logf("--- %s ---\n%s", name, tail(string(data), 40))
				}
			}
		}
		if err := m.Close(); err != nil {
			t.Errorf("close mesh: %v", err)
		}
	}()
	client := m.Pod("client")
	hc := client.NewHTTPClient(true)
	defer hc.CloseIdleConnections()

	// apply writes a DestinationRule for echo with policy and waits until
	// the client's proxy has a cluster config that contains want.
	apply := func(t *testing.T, policy string, want string) {
		t.Helper()
		rule := fmt.Appendf(nil, `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: echo, namespace: demo}
spec:
  host: echo.demo.svc.cluster.local
  trafficPolicy:
%s
`, indent(policy, 4))
		if err := m.WriteConfig("rules.yaml", rule); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			dump, err := client.Admin(ctx, "/config_dump")
			if err == nil && bytes.Contains(dump, []byte(want)) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("config with %q never reached the client's proxy (last error %v)", want, err)
			}
		}
	}
	retryOverflow := func(t *testing.T) int {
		t.Helper()
		stats, err := client.Admin(ctx, "/stats")
		if err != nil {
			t.Fatal(err)
		}
		mt := regexp.MustCompile(`cluster\.outbound\|80\|\|echo\.demo\.svc\.cluster\.local\.upstream_rq_retry_overflow: (\d+)`).FindSubmatch(stats)
		if mt == nil {
			return 0
		}
		n, _ := strconv.Atoi(string(mt[1]))
		return n
	}
	// burst sends n concurrent requests that each fail once (503) and
	// take delay per answer, so that their retries overlap, and returns
	// how many ended 200.
	burst := func(t *testing.T, n int, delay string) int {
		t.Helper()
		var wg sync.WaitGroup
		ok := make([]bool, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := get(t, ctx, hc, "http://240.240.0.10/", http.Header{
					"X-Echo-Fail": {"1"}, "X-Echo-Key": {fmt.Sprintf("%s-%d", t.Name(), i)}, "X-Echo-Delay": {delay}})
				ok[i] = r.status == 200
			}()
		}
		wg.Wait()
		good := 0
		for _, g := range ok {
			if g {
				good++
			}
		}
		return good
	}

	t.Run("without a retry budget every request is retried", func(t *testing.T) {
		apply(t, `loadBalancer: {simple: RANDOM}`, `"RANDOM"`)
		if good := burst(t, 6, "500ms"); good != 6 {
			t.Errorf("%d of 6 requests that fail once succeeded, want 6 (max_retries is unlimited)", good)
		}
	})

	t.Run("retry budget bounds concurrent retries", func(t *testing.T) {
		before := retryOverflow(t)
		// 1 % of 6 active requests is 0: the minimum, one retry at a
		// time.
		apply(t, `retryBudget: {percent: 1, minRetryConcurrency: 1}`, `"retryBudget"`)
		good := burst(t, 6, "1s")
		if good < 1 || good > 2 {
			t.Errorf("%d of 6 requests that fail once succeeded, want 1 (one retry in flight at a time; 2 if the first retry ended before a late first answer)", good)
		}
		if over := retryOverflow(t) - before; over < 4 {
			t.Errorf("upstream_rq_retry_overflow grew by %d, want at least 4", over)
		}
	})
}
