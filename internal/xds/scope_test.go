package xds

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/straitmesh/strait/internal/registry/file"
	"github.com/straitmesh/strait/internal/xds/gen"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// scopedEnv is a server with the real generators over the file registry
// of testdata/scoped: namespaces a and b, each limited to itself by a
// Sidecar.
type scopedEnv struct {
	*testEnv
	dir string
	gen *gen.Generator
}

func newScopedEnv(t *testing.T) *scopedEnv {
	t.Helper()
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join("testdata", "scoped", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "mesh.yaml"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	reg, err := file.New(file.Options{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	g := gen.New(reg)
	env := newTestEnv(t, func(o *Options) {
		o.Generator, o.PushFilter, o.EndpointsNarrower, o.ResolveProxy = g, g, g, reg.ResolveProxy
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = reg.Run(ctx, env.server.ConfigUpdate) }()
	t.Cleanup(func() { cancel(); <-done })
	return &scopedEnv{testEnv: env, dir: dir, gen: g}
}

func (e *scopedEnv) edit(t *testing.T, file, old, new string) {
	t.Helper()
	path := filepath.Join(e.dir, file)
	b, _ := os.ReadFile(path)
	s := string(b)
	if old != "" {
		if !strings.Contains(s, old) {
			t.Fatalf("%s has no %q", file, old)
		}
		s = strings.Replace(s, old, new, 1)
	} else {
		s = new
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// syncSotW subscribes like Envoy: CDS, EDS of its outbound clusters, LDS,
// RDS "80", each ACKed; it returns the outbound cluster names.
func syncSotW(t *testing.T, c *adsClient) []string {
	t.Helper()
	c.request(xdsapi.ClusterType, nil, "", "")
	cds := c.expect(xdsapi.ClusterType)
	c.ack(cds, nil)
	var eds []string
	for _, a := range cds.Resources {
		var cl cluster.Cluster
		if err := a.UnmarshalTo(&cl); err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(cl.Name, "outbound|") {
			eds = append(eds, cl.Name)
		}
	}
	c.request(xdsapi.EndpointType, eds, "", "")
	c.ack(c.expect(xdsapi.EndpointType), eds)
	c.request(xdsapi.ListenerType, nil, "", "")
	c.ack(c.expect(xdsapi.ListenerType), nil)
	c.request(xdsapi.RouteType, []string{"80"}, "", "")
	c.ack(c.expect(xdsapi.RouteType), []string{"80"})
	return eds
}

func TestScopedPushes(t *testing.T) {
	env := newScopedEnv(t)
	pa1 := env.connect(t, "sidecar~10.0.0.1~pa1.a~a.svc.cluster.local")
	pb1 := env.connect(t, "sidecar~10.0.0.3~pb1.b~b.svc.cluster.local")
	pa2 := env.connectDelta(t, "sidecar~10.0.0.2~pa2.a~a.svc.cluster.local")

	// Sidecar scoping: a proxy sees only its namespace's services.
	pa1EDS := syncSotW(t, pa1)
	if !slices.Equal(pa1EDS, []string{"outbound|80||a1.a.svc.cluster.local", "outbound|80||a2.a.svc.cluster.local"}) {
		t.Fatalf("pa1 clusters = %q", pa1EDS)
	}
	if got := syncSotW(t, pb1); !slices.Equal(got, []string{"outbound|80||b1.b.svc.cluster.local"}) {
		t.Fatalf("pb1 clusters = %q", got)
	}
	for _, typ := range []string{xdsapi.ClusterType, xdsapi.ListenerType} {
		pa2.subscribe(typ)
		pa2.ack(pa2.expect(typ))
	}
	pa2.subscribe(xdsapi.EndpointType, "outbound|80||a1.a.svc.cluster.local", "outbound|80||a2.a.svc.cluster.local", "outbound|80||b1.b.svc.cluster.local")
	r := pa2.expect(xdsapi.EndpointType)
	if got := names(r); !slices.Equal(got, []string{"outbound|80||a1.a.svc.cluster.local", "outbound|80||a2.a.svc.cluster.local"}) {
		t.Fatalf("pa2 EDS = %q (b1 is out of scope)", got)
	}
	pa2.ack(r)
	pa2.subscribe(xdsapi.RouteType, "80")
	pa2.ack(pa2.expect(xdsapi.RouteType))
	before := env.gen.Builds()
	pushesBefore := metricValue(t, env.reg, "pilot_xds_pushes", map[string]string{"type": "eds"})

	// An endpoints change of a1: EDS only, only to a's proxies; the delta
	// proxy gets only a1's assignment.
	env.edit(t, "mesh.yaml", "{address: 10.10.1.2}", "{address: 10.10.1.3}")
	e1 := pa1.expect(xdsapi.EndpointType)
	pa1.ack(e1, pa1EDS)
	d1 := pa2.expect(xdsapi.EndpointType)
	if got := names(d1); !slices.Equal(got, []string{"outbound|80||a1.a.svc.cluster.local"}) {
		t.Fatalf("delta EDS after a1 endpoints change = %q, want only a1", got)
	}
	pa2.ack(d1)
	pb1.expectNone(quietInterval)
	pa1.expectNone(quietInterval)
	pa2.expectNone(0)
	if got := metricValue(t, env.reg, "pilot_xds_pushes", map[string]string{"type": "eds"}) - pushesBefore; got != 2 {
		t.Errorf("EDS pushes for the endpoints change = %v, want 2 (pa1 and pa2)", got)
	}
	after := env.gen.Builds()
	if d := after["eds"] - before["eds"]; d != 1 {
		t.Errorf("load assignments rebuilt = %d, want 1 (a1 only)", d)
	}
	if d := after["cluster"] - before["cluster"]; d != 0 {
		t.Errorf("clusters rebuilt = %d, want 0 (only endpoints changed)", d)
	}

	// A VirtualService for b1: RDS only, only to b's proxy. Routes are built
	// once per scope, not per proxy.
	before = env.gen.Builds()
	env.edit(t, "vs.yaml", "", `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: b1, namespace: b}
spec:
  hosts: [b1]
  http:
  - match: [{uri: {prefix: /b}}]
    route:
    - destination: {host: b1}
`)
	rds := pb1.expect(xdsapi.RouteType)
	pb1.ack(rds, []string{"80"})
	pb1.expectNone(quietInterval)
	pa1.expectNone(0)
	pa2.expectNone(0)
	after = env.gen.Builds()
	if d := after["route"] - before["route"]; d != 1 {
		t.Errorf("route configurations built = %d, want 1 (scope b's only)", d)
	}
	if d := after["cluster"] - before["cluster"]; d != 0 {
		t.Errorf("clusters rebuilt = %d, want 0", d)
	}

	// Every proxy is in sync, per /debug/syncz's data.
	eventually(t, "all synced", func() bool {
		for _, s := range env.server.SyncStatuses() {
			for _, ts := range s.Types {
				if !ts.Synced {
					return false
				}
			}
		}
		return true
	})
	mux := http.NewServeMux()
	env.server.RegisterDebugHandlers(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	var dump configDump
	getJSON(t, srv.URL+"/debug/config_dump?proxyID="+url.QueryEscape("sidecar~10.0.0.1~pa1.a~a.svc.cluster.local"), &dump)
	raw, _ := json.Marshal(dump)
	if len(dump.Configs) != 4 || !strings.Contains(string(raw), "a1.a.svc.cluster.local") || strings.Contains(string(raw), "b1.b.svc") {
		t.Errorf("config_dump = %.300s", raw)
	}
	if resp, err := http.Get(srv.URL + "/debug/config_dump?proxyID=nobody"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("config_dump of an unknown proxy: %v %v", resp.StatusCode, err)
	}

	if n := histogramCount(t, env.reg, "pilot_proxy_convergence_time"); n < 3 {
		t.Errorf("pilot_proxy_convergence_time observed %d times, want one per converged proxy and change (>= 3)", n)
	}
}

func histogramCount(t *testing.T, reg prometheus.Gatherer, name string) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) > 0 {
			return mf.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	return 0
}
