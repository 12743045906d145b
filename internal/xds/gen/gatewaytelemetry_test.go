package gen_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	statspb "istio.io/api/envoy/extensions/stats"

	"github.com/straitmesh/strait/internal/mesh"
	"github.com/straitmesh/strait/internal/proxypush"
	"github.com/straitmesh/strait/internal/xds/gen"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// gatewayChain is what a gateway filter chain carries of Istio's
// telemetry: its kind (http, tcp), its stats ("" none, else "on" and the
// dropped metrics, "fallback" when the Host header may name the
// destination), and its metadata exchange ("" none, "upstream" an HCM's
// outbound one, "network" the TCP one).
type gatewayChain struct{ kind, stats, mx string }

func statsSummary(t *testing.T, c *statspb.PluginConfig) string {
	t.Helper()
	s := "on"
	for _, m := range c.GetMetrics() {
		if m.GetDrop() {
			s += " -" + m.GetName()
		}
	}
	if !c.GetDisableHostHeaderFallback() {
		s += " fallback"
	}
	return s
}

// gatewayChains summarizes every chain of every listener the router gets.
func gatewayChains(t *testing.T, g *gen.Generator, router *proxypush.Proxy) map[string][]gatewayChain {
	t.Helper()
	res, err := g.Generate(router, xdsapi.ListenerType, nil, &proxypush.PushRequest{Full: true})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]gatewayChain{}
	for _, r := range res {
		var l listener.Listener
		if err := r.GetResource().UnmarshalTo(&l); err != nil {
			t.Fatal(err)
		}
		for _, fc := range l.GetFilterChains() {
			var c gatewayChain
			for i, f := range fc.GetFilters() {
				switch f.GetName() {
				case "istio.metadata_exchange":
					if i != 0 {
						t.Errorf("%s: istio.metadata_exchange is filter %d, want first", l.GetName(), i)
					}
					c.mx = "network"
				case "istio.stats":
					var sc statspb.PluginConfig
					if err := f.GetTypedConfig().UnmarshalTo(&sc); err != nil {
						t.Fatal(err)
					}
					c.stats = statsSummary(t, &sc)
					if next := fc.GetFilters()[i+1].GetName(); next != "envoy.filters.network.tcp_proxy" {
						t.Errorf("%s: istio.stats is followed by %s, want the tcp_proxy", l.GetName(), next)
					}
				case "envoy.filters.network.tcp_proxy":
					c.kind = "tcp"
				case "envoy.filters.network.http_connection_manager":
					c.kind = "http"
					var h hcm.HttpConnectionManager
					if err := f.GetTypedConfig().UnmarshalTo(&h); err != nil {
						t.Fatal(err)
					}
					hf := h.GetHttpFilters()
					for j, x := range hf {
						switch x.GetName() {
						case "istio.metadata_exchange":
							if j != 0 || !strings.Contains(x.GetTypedConfig().String(), "upstream_discovery") {
								t.Errorf("%s: HCM's istio.metadata_exchange at %d (%v): want first, the outbound one", l.GetName(), j, x.GetTypedConfig())
							}
							c.mx = "upstream"
						case "istio.stats":
							var sc statspb.PluginConfig
							if err := x.GetTypedConfig().UnmarshalTo(&sc); err != nil {
								t.Fatal(err)
							}
							c.stats = statsSummary(t, &sc)
							if j != len(hf)-2 {
								t.Errorf("%s: HCM's istio.stats at %d of %d, want just before the router", l.GetName(), j, len(hf))
							}
						}
					}
				}
			}
			out[l.GetName()] = append(out[l.GetName()], c)
		}
	}
	return out
}

// TestGatewayTelemetry: a gateway's HTTP chains get the outbound metadata
// exchange and istio.stats, its TCP and TLS-passthrough chains istio.stats
// before the tcp_proxy, as Istio's ListenerClassGateway (CLIENT metrics,
// no Host header fallback); the Telemetry API's CLIENT overrides of a
// Telemetry that selects the gateway apply, SERVER ones do not.
func TestGatewayTelemetry(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "gateway", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	router, err := proxypush.ParseNodeID("router~10.92.0.10~ingressgateway.ingress~ingress.svc.cluster.local")
	if err != nil {
		t.Fatal(err)
	}
	const tel = "---\napiVersion: telemetry.istio.io/v1\nkind: Telemetry\nmetadata: {name: t, namespace: ingress}\nspec:\n  selector: {matchLabels: {istio: ingressgateway}}\n  metrics: [{overrides: [%s]}]\n"
	for _, tc := range []struct {
		name, configs string
		stats         string // every chain's
	}{
		{"no Telemetry", "", "on"},
		{"CLIENT drop", strings.Replace(tel, "%s", "{match: {metric: REQUEST_COUNT, mode: CLIENT}, disabled: true}", 1), "on -requests_total"},
		{"CLIENT_AND_SERVER drop", strings.Replace(tel, "%s", "{match: {metric: TCP_OPENED_CONNECTIONS}, disabled: true}", 1), "on -tcp_connections_opened_total"},
		{"SERVER drop does not apply", strings.Replace(tel, "%s", "{match: {metric: ALL_METRICS, mode: SERVER}, disabled: true}", 1), "on"},
		{"CLIENT all off", strings.Replace(tel, "%s", "{match: {metric: ALL_METRICS, mode: CLIENT}, disabled: true}", 1), ""},
		{"another workload's Telemetry", strings.Replace(strings.Replace(tel, "istio: ingressgateway", "istio: other", 1), "%s", "{match: {metric: ALL_METRICS}, disabled: true}", 1), "on"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap := build(t, storeOf(t, string(b)+tc.configs), mesh.BuildOptions{})
			g := gen.New(gen.SourceFunc(func() *mesh.Snapshot { return snap }))
			chains := gatewayChains(t, g, router)
			kinds := map[string]int{}
			for name, cs := range chains {
				for _, c := range cs {
					kinds[c.kind]++
					if c.stats != tc.stats {
						t.Errorf("%s %s chain: istio.stats %q, want %q", name, c.kind, c.stats, tc.stats)
					}
					want := ""
					if c.kind == "http" {
						want = "upstream"
					}
					if c.mx != want {
						t.Errorf("%s %s chain: metadata exchange %q, want %q (a gateway's TCP chain has it only for ISTIO_MUTUAL)", name, c.kind, c.mx, want)
					}
				}
			}
			if kinds["http"] == 0 || kinds["tcp"] < 2 {
				t.Fatalf("chains by kind %v: want HTTP and TCP ones (the test's mesh changed?)", kinds)
			}
		})
	}
}

// TestGatewayTelemetryIstioMutualTCP: a TCP chain of a gateway server
// that terminates ISTIO_MUTUAL starts with the TCP metadata exchange (a
// sidecar sending over mTLS may negotiate it), one that terminates SIMPLE
// does not, as Istio's includeMx.
func TestGatewayTelemetryIstioMutualTCP(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "gateway", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	const configs = `---
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: mesh-tcp, namespace: ingress}
spec:
  selector: {istio: ingressgateway}
  servers:
  - port: {number: 15443, name: tls-mesh, protocol: TLS}
    hosts: ["*"]
    tls: {mode: ISTIO_MUTUAL}
  - port: {number: 15444, name: tls-simple, protocol: TLS}
    hosts: ["*"]
    tls: {mode: SIMPLE, serverCertificate: /etc/gw/db.crt, privateKey: /etc/gw/db.key}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: db-mesh-tcp, namespace: ingress}
spec:
  hosts: ["*"]
  gateways: [mesh-tcp]
  tcp:
  - route:
    - destination: {host: db.demo.svc.cluster.local, port: {number: 5432}}
`
	router, err := proxypush.ParseNodeID("router~10.92.0.10~ingressgateway.ingress~ingress.svc.cluster.local")
	if err != nil {
		t.Fatal(err)
	}
	snap := build(t, storeOf(t, string(b)+configs), mesh.BuildOptions{})
	chains := gatewayChains(t, gen.New(gen.SourceFunc(func() *mesh.Snapshot { return snap })), router)
	for name, want := range map[string]gatewayChain{
		"0.0.0.0_15443": {kind: "tcp", stats: "on", mx: "network"},
		"0.0.0.0_15444": {kind: "tcp", stats: "on"},
	} {
		if got := chains[name]; len(got) != 1 || got[0] != want {
			t.Errorf("%s: chains %+v, want one %+v", name, got, want)
		}
	}
}
