package gen_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	filelog "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	statspb "istio.io/api/envoy/extensions/stats"

	"github.com/straitmesh/strait/internal/istioconfig"
	"github.com/straitmesh/strait/internal/mesh"
	"github.com/straitmesh/strait/internal/meshconfig"
	"github.com/straitmesh/strait/internal/proxypush"
	"github.com/straitmesh/strait/internal/xds/gen"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// hcmSummary is what the Telemetry API changes on one side's HCMs.
type hcmSummary struct {
	tracing string // "" none, else "PROVIDER sampling TAGS"
	logs    string // access log paths, comma separated
	stats   string // "" no istio.stats, else "on" plus dropped metrics
}

func summarize(t *testing.T, h *hcm.HttpConnectionManager) hcmSummary {
	t.Helper()
	var s hcmSummary
	if tr := h.GetTracing(); tr != nil {
		var tags []string
		for _, ct := range tr.GetCustomTags() {
			tags = append(tags, ct.GetTag())
		}
		s.tracing = fmt.Sprintf("%s %v %s", tr.GetProvider().GetName(), tr.GetRandomSampling().GetValue(), strings.Join(tags, "+"))
	}
	var paths []string
	for _, al := range h.GetAccessLog() {
		var fl filelog.FileAccessLog
		if err := al.GetTypedConfig().UnmarshalTo(&fl); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, fl.GetPath())
	}
	s.logs = strings.Join(paths, ",")
	for _, f := range h.GetHttpFilters() {
		if f.GetName() != "istio.stats" {
			continue
		}
		var c statspb.PluginConfig
		if err := f.GetTypedConfig().UnmarshalTo(&c); err != nil {
			t.Fatal(err)
		}
		s.stats = "on"
		for _, m := range c.GetMetrics() {
			if m.GetDrop() {
				s.stats += " -" + m.GetName()
			}
		}
	}
	return s
}

// TestTelemetryAPI: what each honoured Telemetry field changes in the
// server sidecar's inbound (SERVER) and outbound (CLIENT) HCMs, with
// Istio's merge of the root namespace's, the namespace's and the
// workload's Telemetry.
func TestTelemetryAPI(t *testing.T) {
	svc, err := os.ReadFile(filepath.Join("testdata", "tracing", "services.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	const meshYAML = `extensionProviders:
- name: zipkin
  zipkin: {service: zipkin.istio-system.svc.cluster.local, port: 9411}
- name: otel
  opentelemetry: {service: otel-collector.observability.svc.cluster.local, port: 4317}
- name: json-log
  envoyFileAccessLog: {path: /tmp/access.json, logFormat: {labels: {code: "%RESPONSE_CODE%"}}}
defaultProviders: {tracing: [zipkin]}
accessLogFile: /var/log/mesh.log
defaultConfig:
  tracing: {sampling: 10, customTags: {mesh: {literal: {value: m}}}}
`
	tel := func(ns, name, spec string) string {
		return fmt.Sprintf("---\napiVersion: telemetry.istio.io/v1\nkind: Telemetry\nmetadata: {name: %s, namespace: %s}\nspec:\n%s", name, ns, spec)
	}
	const stats, meshLog = "on", "/var/log/mesh.log"
	for _, tc := range []struct {
		name, configs     string
		inbound, outbound hcmSummary
	}{
		{name: "no Telemetry: the mesh's tracing, no logs, every metric",
			inbound: hcmSummary{tracing: "envoy.tracers.zipkin 10 mesh", stats: stats, logs: meshLog}, outbound: hcmSummary{tracing: "envoy.tracers.zipkin 10 mesh", stats: stats, logs: meshLog}},
		{name: "namespace sampling and tags",
			configs: tel("app", "t", "  tracing: [{randomSamplingPercentage: 50, customTags: {user: {header: {name: x-user}}, pod: {environment: {name: POD_NAME}}}}]\n"),
			inbound: hcmSummary{tracing: "envoy.tracers.zipkin 50 pod+user", stats: stats, logs: meshLog}, outbound: hcmSummary{tracing: "envoy.tracers.zipkin 50 pod+user", stats: stats, logs: meshLog}},
		{name: "span reporting disabled",
			configs: tel("app", "t", "  tracing: [{disableSpanReporting: true}]\n"),
			inbound: hcmSummary{stats: stats, logs: meshLog}, outbound: hcmSummary{stats: stats, logs: meshLog}},
		{name: "root enables, namespace disables, workload re-enables server side with otel",
			configs: tel("istio-system", "mesh", "  tracing: [{randomSamplingPercentage: 1}]\n") +
				tel("app", "ns", "  tracing: [{disableSpanReporting: true}]\n") +
				tel("app", "web", "  selector: {matchLabels: {app: web}}\n  tracing: [{match: {mode: SERVER}, providers: [{name: otel}], disableSpanReporting: false}]\n"),
			inbound: hcmSummary{tracing: "envoy.tracers.opentelemetry 1 mesh", stats: stats, logs: meshLog}, outbound: hcmSummary{stats: stats, logs: meshLog}},
		{name: "another namespace's workload Telemetry does not apply",
			configs: tel("other", "web", "  selector: {matchLabels: {app: web}}\n  tracing: [{disableSpanReporting: true}]\n"),
			inbound: hcmSummary{tracing: "envoy.tracers.zipkin 10 mesh", stats: stats, logs: meshLog}, outbound: hcmSummary{tracing: "envoy.tracers.zipkin 10 mesh", stats: stats, logs: meshLog}},
		{name: "an unknown tracing provider turns tracing off",
			configs: tel("app", "t", "  tracing: [{providers: [{name: nowhere}]}]\n"),
			inbound: hcmSummary{stats: stats, logs: meshLog}, outbound: hcmSummary{stats: stats, logs: meshLog}},
		{name: "access logs: envoy on the client side, json-log on both",
			configs:  tel("istio-system", "mesh", "  accessLogging: [{providers: [{name: envoy}], match: {mode: CLIENT}}, {providers: [{name: json-log}]}]\n"),
			inbound:  hcmSummary{tracing: "envoy.tracers.zipkin 10 mesh", logs: "/tmp/access.json", stats: stats},
			outbound: hcmSummary{tracing: "envoy.tracers.zipkin 10 mesh", logs: "/dev/stdout,/tmp/access.json", stats: stats}},
		{name: "access logs disabled in the namespace",
			configs: tel("istio-system", "mesh", "  accessLogging: [{providers: [{name: envoy}]}]\n") + tel("app", "ns", "  accessLogging: [{disabled: true}]\n"),
			inbound: hcmSummary{tracing: "envoy.tracers.zipkin 10 mesh", stats: stats}, outbound: hcmSummary{tracing: "envoy.tracers.zipkin 10 mesh", stats: stats}},
		{name: "a mode without a provider keeps the mesh's log",
			configs: tel("istio-system", "mesh", "  accessLogging: [{providers: [{name: envoy}], match: {mode: CLIENT}}]\n"),
			inbound: hcmSummary{tracing: "envoy.tracers.zipkin 10 mesh", stats: stats, logs: meshLog}, outbound: hcmSummary{tracing: "envoy.tracers.zipkin 10 mesh", stats: stats, logs: "/dev/stdout"}},
		{name: "an unknown access log provider keeps the mesh's log",
			configs: tel("app", "t", "  accessLogging: [{providers: [{name: nowhere}]}]\n"),
			inbound: hcmSummary{tracing: "envoy.tracers.zipkin 10 mesh", stats: stats, logs: meshLog}, outbound: hcmSummary{tracing: "envoy.tracers.zipkin 10 mesh", stats: stats, logs: meshLog}},
		{name: "metric disabled on the server side",
			configs: tel("app", "t", "  metrics: [{overrides: [{match: {metric: REQUEST_COUNT, mode: SERVER}, disabled: true}]}]\n"),
			inbound: hcmSummary{tracing: "envoy.tracers.zipkin 10 mesh", stats: "on -requests_total", logs: meshLog}, outbound: hcmSummary{tracing: "envoy.tracers.zipkin 10 mesh", stats: stats, logs: meshLog}},
		{name: "all metrics disabled on the client side, re-enabled for the workload",
			configs: tel("app", "t", "  metrics: [{overrides: [{match: {mode: CLIENT}, disabled: true}]}]\n") +
				tel("app", "web", "  selector: {matchLabels: {app: web}}\n  metrics: [{overrides: [{match: {metric: REQUEST_SIZE, mode: CLIENT}, disabled: true}]}]\n"),
			inbound: hcmSummary{tracing: "envoy.tracers.zipkin 10 mesh", stats: stats, logs: meshLog}, outbound: hcmSummary{tracing: "envoy.tracers.zipkin 10 mesh", stats: "on -request_bytes", logs: meshLog}},
		{name: "metrics to a provider that is not prometheus",
			configs: tel("app", "t", "  metrics: [{providers: [{name: json-log}]}]\n"),
			inbound: hcmSummary{tracing: "envoy.tracers.zipkin 10 mesh", logs: meshLog}, outbound: hcmSummary{tracing: "envoy.tracers.zipkin 10 mesh", logs: meshLog}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkSummaries(t, meshYAML, string(svc)+tc.configs, tc.inbound, tc.outbound)
		})
	}
}

// checkSummaries generates the listeners of the web sidecar of
// testdata/tracing under meshYAML and configs, and checks that every
// inbound and outbound HCM summarizes as want.
func checkSummaries(t *testing.T, meshYAML, configs string, inbound, outbound hcmSummary) {
	t.Helper()
	mc, err := meshconfig.Parse([]byte(meshYAML))
	if err != nil {
		t.Fatal(err)
	}
	snap := build(t, storeOf(t, configs), mesh.BuildOptions{Mesh: mc})
	g := gen.New(gen.SourceFunc(func() *mesh.Snapshot { return snap }))
	proxy, _ := proxypush.ParseNodeID("sidecar~10.91.0.11~web.app~app.svc.cluster.local")
	res, err := g.Generate(proxy, xdsapi.ListenerType, nil, &proxypush.PushRequest{Full: true})
	if err != nil {
		t.Fatal(err)
	}
	var in, out []hcmSummary
	for _, r := range res {
		var l listener.Listener
		if err := r.GetResource().UnmarshalTo(&l); err != nil {
			t.Fatal(err)
		}
		for _, fc := range l.GetFilterChains() {
			for _, f := range fc.GetFilters() {
				if f.GetName() != "envoy.filters.network.http_connection_manager" {
					continue
				}
				var h hcm.HttpConnectionManager
				if err := f.GetTypedConfig().UnmarshalTo(&h); err != nil {
					t.Fatal(err)
				}
				if l.GetTrafficDirection().String() == "INBOUND" {
					in = append(in, summarize(t, &h))
				} else {
					out = append(out, summarize(t, &h))
				}
			}
		}
	}
	if len(in) == 0 || len(out) == 0 {
		t.Fatalf("%d inbound and %d outbound HCMs; the scenario has both", len(in), len(out))
	}
	for _, side := range []struct {
		name string
		got  []hcmSummary
		want hcmSummary
	}{{"inbound", in, inbound}, {"outbound", out, outbound}} {
		for _, s := range slices.Compact(side.got) {
			if s != side.want {
				t.Errorf("%s HCM: %+v\nwant %+v", side.name, s, side.want)
			}
		}
	}
}

// TestDefaultAccessLogProviders: defaultProviders.accessLogging gives
// proxies without Telemetry access logging its providers' logs instead
// of accessLogFile, and is what a Telemetry entry without providers
// inherits (Istio's mergeLogs).
func TestDefaultAccessLogProviders(t *testing.T) {
	svc, err := os.ReadFile(filepath.Join("testdata", "tracing", "services.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	const meshYAML = `extensionProviders:
- name: json-log
  envoyFileAccessLog: {path: /tmp/access.json, logFormat: {labels: {code: "%RESPONSE_CODE%"}}}
defaultProviders: {accessLogging: [envoy]}
accessLogFile: /var/log/mesh.log
`
	tel := func(spec string) string {
		return "---\napiVersion: telemetry.istio.io/v1\nkind: Telemetry\nmetadata: {name: t, namespace: app}\nspec:\n" + spec
	}
	for _, tc := range []struct {
		name, configs     string
		inbound, outbound hcmSummary
	}{
		{name: "no Telemetry: the default provider", inbound: hcmSummary{logs: "/dev/stdout", stats: "on"}, outbound: hcmSummary{logs: "/dev/stdout", stats: "on"}},
		// The entry matches no CLIENT listener, so Istio's mergeLogs
		// leaves that mode without providers and setHTTPAccessLog falls
		// back to accessLogFile there.
		{name: "disabled without providers: the default's", configs: tel("  accessLogging: [{disabled: true, match: {mode: SERVER}}]\n"),
			inbound: hcmSummary{stats: "on"}, outbound: hcmSummary{logs: "/var/log/mesh.log", stats: "on"}},
		{name: "a Telemetry's provider replaces it", configs: tel("  accessLogging: [{providers: [{name: json-log}]}]\n"),
			inbound: hcmSummary{logs: "/tmp/access.json", stats: "on"}, outbound: hcmSummary{logs: "/tmp/access.json", stats: "on"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkSummaries(t, meshYAML, string(svc)+tc.configs, tc.inbound, tc.outbound)
		})
	}
}

// TestTelemetryAPIGateway: a gateway's HCMs get the tracing of the
// Telemetries that apply to it, CLIENT mode as Istio's gateway class
// (without one, the mesh's).
func TestTelemetryAPIGateway(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "gateway", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	const collector = `---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: zipkin, namespace: istio-system}
spec:
  hosts: [zipkin.istio-system.svc.cluster.local]
  ports: [{number: 9411, name: http}]
  location: MESH_EXTERNAL
  resolution: STATIC
  endpoints: [{address: 10.0.0.9}]
`
	mc, err := meshconfig.Parse([]byte("extensionProviders:\n- name: zipkin\n  zipkin: {service: zipkin.istio-system.svc.cluster.local, port: 9411}\ndefaultProviders: {tracing: [zipkin]}\ndefaultConfig: {tracing: {sampling: 10}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	router, err := proxypush.ParseNodeID("router~10.92.0.10~ingressgateway.ingress~ingress.svc.cluster.local")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, configs string
		want          string
	}{
		{"the mesh's", "", "10"},
		{"the namespace's sampling", "---\napiVersion: telemetry.istio.io/v1\nkind: Telemetry\nmetadata: {name: t, namespace: ingress}\nspec: {tracing: [{match: {mode: CLIENT}, randomSamplingPercentage: 7}]}\n", "7"},
		{"a SERVER-only Telemetry does not apply", "---\napiVersion: telemetry.istio.io/v1\nkind: Telemetry\nmetadata: {name: t, namespace: ingress}\nspec: {tracing: [{match: {mode: SERVER}, disableSpanReporting: true}]}\n", "10"},
		{"disabled", "---\napiVersion: telemetry.istio.io/v1\nkind: Telemetry\nmetadata: {name: t, namespace: ingress}\nspec: {tracing: [{disableSpanReporting: true}]}\n", "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap := build(t, storeOf(t, string(b)+collector+tc.configs), mesh.BuildOptions{Mesh: mc})
			g := gen.New(gen.SourceFunc(func() *mesh.Snapshot { return snap }))
			res, err := g.Generate(router, xdsapi.ListenerType, nil, &proxypush.PushRequest{Full: true})
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, r := range res {
				var l listener.Listener
				if err := r.GetResource().UnmarshalTo(&l); err != nil {
					t.Fatal(err)
				}
				for _, fc := range l.GetFilterChains() {
					for _, f := range fc.GetFilters() {
						var h hcm.HttpConnectionManager
						if f.GetName() != "envoy.filters.network.http_connection_manager" || f.GetTypedConfig().UnmarshalTo(&h) != nil {
							continue
						}
						n++
						got := "none"
						if h.GetTracing() != nil {
							got = fmt.Sprint(h.GetTracing().GetRandomSampling().GetValue())
						}
						if got != tc.want {
							t.Errorf("%s: sampling %s, want %s", l.GetName(), got, tc.want)
						}
					}
				}
			}
			if n == 0 {
				t.Fatal("the gateway has no HCM")
			}
		})
	}
}

// BenchmarkTelemetryListeners is one LDS response of a sidecar (the
// scope's listeners cached, its inbound ones built) without Telemetry
// and with a root, a namespace and a workload Telemetry setting tracing,
// access logs and a metric drop: what merging them costs a push.
func BenchmarkTelemetryListeners(b *testing.B) {
	svc, err := os.ReadFile(filepath.Join("testdata", "tracing", "services.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	mc, err := meshconfig.Parse([]byte("extensionProviders:\n- name: zipkin\n  zipkin: {service: zipkin.istio-system.svc.cluster.local, port: 9411}\ndefaultProviders: {tracing: [zipkin]}\n"))
	if err != nil {
		b.Fatal(err)
	}
	const tels = `---
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: mesh, namespace: istio-system}
spec: {accessLogging: [{providers: [{name: envoy}]}], tracing: [{randomSamplingPercentage: 5}]}
---
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: ns, namespace: app}
spec: {metrics: [{overrides: [{match: {metric: REQUEST_COUNT, mode: SERVER}, disabled: true}]}]}
---
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: web, namespace: app}
spec:
  selector: {matchLabels: {app: web}}
  tracing: [{customTags: {team: {literal: {value: t}}}}]
`
	proxy, _ := proxypush.ParseNodeID("sidecar~10.91.0.11~web.app~app.svc.cluster.local")
	for _, bc := range []struct{ name, configs string }{{"none", ""}, {"three", tels}} {
		b.Run(bc.name, func(b *testing.B) {
			store := istioconfig.NewStore()
			res := istioconfig.ParseFile("b.yaml", []byte(string(svc)+bc.configs))
			if res.Err != nil {
				b.Fatal(res.Err)
			}
			for _, c := range res.Configs {
				if err := store.Add(c); err != nil {
					b.Fatal(err)
				}
			}
			snap, errs := mesh.Build(store, mesh.BuildOptions{Mesh: mc})
			if len(errs) > 0 {
				b.Fatal(errs)
			}
			g := gen.New(gen.SourceFunc(func() *mesh.Snapshot { return snap }))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := g.Generate(proxy, xdsapi.ListenerType, nil, &proxypush.PushRequest{Full: true}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
