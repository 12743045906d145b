package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/localmesh"
)

// The data plane under change: constant load from the client pod through
// its sidecar and the server pods' sidecars while the config changes 100
// times, and while a server pod terminates. Not one request may fail.
// (gRPC, an h2c client and a WebSocket echo through the mesh are
// TestGRPCThroughSidecars'.)

// pushDestinationRule is the demo's DestinationRule for push i: subsets v1
// and v2 as in the demo, v1's labels alternately with and without app:
// echo (the same endpoints, a changed cluster), and a subset of its own
// (a cluster added, and the previous push's removed).
func pushDestinationRule(i int) []byte {
	extra := ""
	if i%2 == 1 {
		extra = "\n      app: echo"
	}
	return fmt.Appendf(nil, `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata:
  name: echo
  namespace: demo
spec:
  host: echo.demo.svc.cluster.local
  subsets:
  - name: v1
    labels:
      version: v1%s
  - name: v2
    labels:
      version: v2
  - name: push%d
    labels:
      app: echo
`, extra, i)
}

// allEndpointsVirtualService routes to the echo service without a subset:
// one cluster with both pods as endpoints.
const allEndpointsVirtualService = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: echo
  namespace: demo
spec:
  hosts:
  - echo.demo.svc.cluster.local
  http:
  - route:
    - destination:
        host: echo.demo.svc.cluster.local
`

// echoV2Direct is a second service that selects echo-v2 alone. It keeps
// echo-v2's own inbound configuration when echo-v2 leaves the echo
// service: in Kubernetes a terminating pod leaves its services' endpoints,
// but its sidecar keeps the inbound listeners of the services that select
// it, since its labels do not change. Here the only way to take echo-v2 out
// of echo's endpoints is to change its labels, which without this service
// would also remove its inbound cluster while requests still arrive.
const echoV2Direct = `
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata:
  name: echo-v2-direct
  namespace: demo
spec:
  hosts:
  - echo-v2-direct.demo.svc.cluster.local
  addresses:
  - 240.240.0.12
  ports:
  - number: 80
    name: http
    protocol: HTTP
    targetPort: 8080
  location: MESH_INTERNAL
  resolution: STATIC
  workloadSelector:
    labels:
      pod: echo-v2
`

// dataplaneConfig returns the demo's mesh.yaml with echo-v2 also labelled
// pod: echo-v2 and the echo-v2-direct service; inEcho false takes echo-v2
// out of the echo service (its app: echo label becomes app: leaving).
func dataplaneConfig(t *testing.T, inEcho bool) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(examplesDir(t), "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	app := "echo"
	if !inEcho {
		app = "leaving"
	}
	const v2 = "  name: echo-v2\n  namespace: demo\nspec:\n  address: 10.99.0.12\n  labels:\n    app: echo\n    version: v2\n"
	if !strings.Contains(string(data), v2) {
		t.Fatalf("examples/demo/mesh.yaml has no echo-v2 WorkloadEntry of the expected form:\n%s", v2)
	}
	s := strings.Replace(string(data), v2, "  name: echo-v2\n  namespace: demo\nspec:\n  address: 10.99.0.12\n  labels:\n    app: "+app+"\n    version: v2\n    pod: echo-v2\n", 1)
	return []byte(s + echoV2Direct)
}

func TestDataPlaneUnderChange(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	files := map[string]string{}
	for _, name := range []string{"destinationrule.yaml", localmesh.DemoVirtualServiceFile} {
		data, err := os.ReadFile(filepath.Join(examplesDir(t), name))
		if err != nil {
			t.Fatal(err)
		}
		files[name] = string(data)
	}
	files["mesh.yaml"] = string(dataplaneConfig(t, true))
	m := startMesh(ctx, t, "", localmesh.Options{ConfigDir: configDir(t, files), Workloads: localmesh.DemoWorkloads()})
	client := m.Pod("client")

	t.Run("100 config pushes under load", func(t *testing.T) {
		load := client.StartLoad(ctx, localmesh.DemoURL, 4)
		start := time.Now()
		var slowest time.Duration
		for i := range 100 {
			v1 := 10 + (i*37)%81
			if err := m.WriteConfig("destinationrule.yaml", pushDestinationRule(i)); err != nil {
				load.Stop()
				t.Fatal(err)
			}
			if err := m.WriteConfig(localmesh.DemoVirtualServiceFile, localmesh.DemoVirtualService(v1, 100-v1)); err != nil {
				load.Stop()
				t.Fatal(err)
			}
			took, err := waitPush(ctx, client, i, uint32(v1), uint32(100-v1))
			if err != nil {
				s := load.Stop()
				t.Fatalf("push %d not applied within 5s: %v (load so far: %d requests, %d failed)", i, err, s.Total, s.Failures)
			}
			slowest = max(slowest, took)
		}
		waitLoad(ctx, t, load, 20, "load on the last config")
		s := load.Stop()
		t.Logf("100 pushes in %s (slowest applied %s after its write); %d requests during them, %v", time.Since(start).Round(time.Millisecond), slowest.Round(time.Millisecond), s.Total, s.Counts)
		if s.Failures > 0 {
			t.Fatalf("%d of %d requests failed during the pushes; first: %s", s.Failures, s.Total, s.FirstError)
		}
		if s.Total < 100 {
			t.Fatalf("only %d requests ran during 100 pushes", s.Total)
		}
	})

	t.Run("server pod terminates under load", func(t *testing.T) {
		writeConfig(t, m, localmesh.DemoVirtualServiceFile, []byte(allEndpointsVirtualService))
		// Wait until requests reach both pods through the one cluster. The
		// previous subtest's weighted route reaches both pods too, through
		// the subset clusters: until the client's route has no weighted
		// clusters left, a request may still go to the v2 subset, which has
		// no endpoint once echo-v2 leaves the service (503 "no healthy
		// upstream", as in Envoy).
		waitFor(ctx, t, applyTimeout, "requests did not reach both pods", func() error {
			w, err := client.RouteWeights(ctx)
			if err != nil {
				return err
			}
			if len(w) > 0 {
				return fmt.Errorf("the client's route still has weighted clusters %v", w)
			}
			s := client.SendRequests(ctx, localmesh.DemoURL, 40)
			if s.Failures == 0 && s.Counts["v1"] > 0 && s.Counts["v2"] > 0 && s.Counts["v1"]+s.Counts["v2"] == 40 {
				return nil
			}
			return fmt.Errorf("%v (failures %d: %s)", s.Counts, s.Failures, s.FirstError)
		})
		exited, err := m.Exited("echo-v2-agent")
		if err != nil {
			t.Fatal(err)
		}
		load := client.StartLoad(ctx, localmesh.DemoURL, 4)
		// Under way, and through echo-v2, before it terminates.
		waitFor(ctx, t, applyTimeout, "load through echo-v2", func() error {
			if s := load.Seen(); s.Counts["v2"] < 10 {
				return fmt.Errorf("%d requests so far (%v), want 10 through echo-v2", s.Total, s.Counts)
			}
			return nil
		})
		// Kubernetes takes a terminating pod out of its service's
		// endpoints as the kubelet sends SIGTERM to its containers: the
		// agent drains the inbound listeners for terminationDrainDuration
		// while the clients' sidecars learn (EDS) that the endpoint is
		// gone.
		if err := m.WriteConfig("mesh.yaml", dataplaneConfig(t, false)); err != nil {
			load.Stop()
			t.Fatal(err)
		}
		if err := m.Signal("echo-v2-agent", syscall.SIGTERM); err != nil {
			load.Stop()
			t.Fatal(err)
		}
		termed := time.Now()
		// The client's sidecar stops picking echo-v2 before its proxy
		// stops: the drain outlasts the endpoint update.
		err = poll(ctx, 5*time.Second, func() error {
			n, err := endpointCount(ctx, client, "outbound|80||"+localmesh.DemoHost)
			if err != nil {
				return err
			}
			if n != 1 {
				return fmt.Errorf("%d endpoints, want 1", n)
			}
			return nil
		})
		left := time.Since(termed)
		if err != nil {
			load.Stop()
			t.Fatalf("the client's sidecar still lists echo-v2 as an endpoint 5s after it left the service: %v", err)
		}
		t.Logf("echo-v2 left the client's endpoints %s after SIGTERM", left.Round(time.Millisecond))
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			load.Stop()
			t.Fatal("echo-v2's agent did not exit within 30s of SIGTERM")
		}
		t.Logf("echo-v2's agent exited %s after SIGTERM", time.Since(termed).Round(time.Millisecond))
		waitLoad(ctx, t, load, 20, "load after echo-v2 left") // and the load goes on without it
		s := load.Stop()
		t.Logf("%d requests during the termination: %v", s.Total, s.Counts)
		if s.Failures > 0 {
			t.Fatalf("%d of %d requests failed while echo-v2 terminated; first: %s", s.Failures, s.Total, s.FirstError)
		}
		if s.Counts["v2"] == 0 {
			t.Fatal("no request reached echo-v2 during the test: its termination was not under load")
		}
		after := client.SendRequests(ctx, localmesh.DemoURL, 40)
		if after.Failures > 0 || after.Counts["v1"] != 40 {
			t.Fatalf("after echo-v2 left: %v, failures %d (%s); want all 40 on v1", after.Counts, after.Failures, after.FirstError)
		}
	})
}

// waitPush waits until the client's proxy has push i: the route weights
// v1/v2 and the subset cluster push<i>.
func waitPush(ctx context.Context, client *localmesh.Pod, i int, v1, v2 uint32) (time.Duration, error) {
	start := time.Now()
	cluster := fmt.Sprintf(`"outbound|80|push%d|%s"`, i, localmesh.DemoHost)
	err := poll(ctx, 5*time.Second, func() error {
		dump, err := client.Admin(ctx, "/config_dump")
		if err != nil {
			return err
		}
		if !strings.Contains(string(dump), cluster) {
			return fmt.Errorf("cluster %s not in the config dump", cluster)
		}
		got, err := client.RouteWeights(ctx)
		if err != nil {
			return err
		}
		if got["outbound|80|v1|"+localmesh.DemoHost] != v1 || got["outbound|80|v2|"+localmesh.DemoHost] != v2 {
			return fmt.Errorf("route weights %v, want v1 %d, v2 %d", got, v1, v2)
		}
		return nil
	})
	return time.Since(start), err
}

// endpointCount is how many endpoints the proxy's config dump lists for
// an EDS cluster.
func endpointCount(ctx context.Context, p *localmesh.Pod, cluster string) (int, error) {
	body, err := p.Admin(ctx, "/config_dump?include_eds")
	if err != nil {
		return 0, err
	}
	var doc struct {
		Configs []struct {
			DynamicEndpointConfigs []struct {
				EndpointConfig struct {
					ClusterName string `json:"clusterName"`
					Endpoints   []struct {
						LbEndpoints []json.RawMessage `json:"lbEndpoints"`
					} `json:"endpoints"`
				} `json:"endpointConfig"`
			} `json:"dynamicEndpointConfigs"`
		} `json:"configs"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return 0, fmt.Errorf("config_dump: %w", err)
	}
	for _, c := range doc.Configs {
		for _, e := range c.DynamicEndpointConfigs {
			if e.EndpointConfig.ClusterName != cluster {
				continue
			}
			n := 0
			for _, l := range e.EndpointConfig.Endpoints {
				n += len(l.LbEndpoints)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("cluster %s has no endpoints in the config dump", cluster)
}
