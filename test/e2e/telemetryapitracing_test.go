package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/localmesh"
	"github.com/straitmesh/strait/internal/proxy/tracing"
)

// collectorEntry is the mesh service of the Zipkin collector that a test
// runs on the host (addr), so that an extension provider can name it.
func collectorEntry(addr *net.TCPAddr) string {
	return fmt.Sprintf(`apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: zipkin, namespace: istio-system}
spec:
  hosts: [zipkin.istio-system.svc.cluster.local]
  addresses: [240.240.20.9]
  ports: [{number: %d, name: http-zipkin, protocol: HTTP}]
  location: MESH_EXTERNAL
  resolution: STATIC
  endpoints: [{address: %s}]
`, addr.Port, addr.IP)
}

// TestTelemetryAPITracing: the Telemetry API changes what a real Zipkin
// collector receives from the client → front → back chain of TestTracing
// (the mesh's default provider, an extension provider naming the
// collector's service, samples 100 %):
//   - a root-namespace Telemetry adds a custom tag to every span;
//   - a namespace Telemetry with randomSamplingPercentage 0 stops the
//     traces nobody asked for, while a request with x-client-trace-id is
//     still traced (client_sampling), with the root's tag;
//   - a workload Telemetry (selector app: back) with
//     disableSpanReporting leaves back's span out of the trace.
func TestTelemetryAPITracing(t *testing.T) {
	requireMesh(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	meshFile := filepath.Join(t.TempDir(), "mesh.yaml")
	replaceFile(t, meshFile, "trustDomain: cluster.local\n")
	m := startMesh(ctx, t, "tracing", localmesh.Options{StraitdArgs: []string{"--mesh", meshFile},
		Workloads: []localmesh.Workload{
			{Name: "client", Namespace: "trace", ConfigIP: "10.89.0.10"},
			echoPod("front", "trace", "10.89.0.11", "v1", "--next", "http://240.240.20.2/"),
			echoPod("back", "trace", "10.89.0.12", "v1"),
		}})
	ln, err := net.Listen("tcp", net.JoinHostPort(m.HostIP().String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	z := &zipkinReceiver{}
	srv := &http.Server{Handler: z, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	addr := ln.Addr().(*net.TCPAddr)
	if err := m.WriteConfig("collector.yaml", []byte(collectorEntry(addr))); err != nil {
		t.Fatal(err)
	}
	if err := m.WriteConfig("telemetry-root.yaml", []byte(`apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: mesh-default, namespace: istio-system}
spec:
  tracing:
  - customTags: {team: {literal: {value: payments}}}
`)); err != nil {
		t.Fatal(err)
	}
	replaceFile(t, meshFile, fmt.Sprintf(`extensionProviders:
- name: zipkin
  zipkin: {service: zipkin.istio-system.svc.cluster.local, port: %d}
defaultProviders: {tracing: [zipkin]}
defaultConfig:
  tracing: {sampling: 100}
`, addr.Port))

	c := m.Pod("client").NewHTTPClient(false)
	get := func(h http.Header) error {
		r := send(ctx, c, http.MethodGet, "http://240.240.20.1/", "", h)
		if r.err != nil {
			return r.err
		}
		if r.status != http.StatusOK {
			return fmt.Errorf("status %d: %s", r.status, r.body)
		}
		return nil
	}
	// traceOf is the trace whose root carries x-client-trace-id id.
	traceOf := func(id string) []tracing.ZipkinSpan {
		for _, spans := range z.traces() {
			for _, s := range spans {
				if s.Tags["guid:x-client-trace-id"] == id {
					return spans
				}
			}
		}
		return nil
	}
	services := func(spans []tracing.ZipkinSpan) map[string]int {
		out := map[string]int{}
		for _, s := range spans {
			if s.LocalEndpoint != nil {
				out[s.Kind+" "+s.LocalEndpoint.ServiceName]++
			}
		}
		return out
	}

	// 1. The root Telemetry's tag is on every span of a sampled trace.
	err = poll(ctx, 90*time.Second, func() error {
		if err := get(nil); err != nil {
			return err
		}
		for _, spans := range z.traces() {
			tagged := 0
			for _, s := range spans {
				if s.Tags["team"] == "payments" {
					tagged++
				}
			}
			if len(spans) == 4 && tagged == 4 {
				return nil
			}
		}
		return fmt.Errorf("no trace of 4 spans tagged team=payments yet (%d traces)", len(z.traces()))
	})
	if err != nil {
		t.Fatal(err)
	}

	// 2. Sampling 0 in the namespace: plain requests are not traced. A
	// traced request (x-client-trace-id) after them is the barrier: its
	// spans leave each sidecar after those of the requests before it.
	if err := m.WriteConfig("telemetry-ns.yaml", []byte(`apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: sampling, namespace: trace}
spec:
  tracing:
  - randomSamplingPercentage: 0
`)); err != nil {
		t.Fatal(err)
	}
	round := 0
	err = poll(ctx, 90*time.Second, func() error {
		round++
		before := len(z.traces())
		for range 5 {
			if err := get(nil); err != nil {
				return err
			}
		}
		id := fmt.Sprintf("sampling-%d", round)
		if err := get(http.Header{"X-Client-Trace-Id": {id}}); err != nil {
			return err
		}
		if err := poll(ctx, 20*time.Second, func() error {
			if n := len(traceOf(id)); n != 4 {
				return fmt.Errorf("traced request %s: %d spans", id, n)
			}
			return nil
		}); err != nil {
			return err
		}
		for _, s := range traceOf(id) {
			if s.Tags["team"] != "payments" {
				t.Errorf("span without the root Telemetry's tag: %+v", s)
			}
		}
		if extra := len(z.traces()) - before - 1; extra != 0 {
			return fmt.Errorf("round %d: %d of 5 plain requests still traced", round, extra)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("sampling 0 applied after %d round(s)", round)

	// 3. back's Telemetry disables its spans: a traced request's trace
	// has the client's and front's three. The next traced request, sent
	// after two of back's flush intervals (1 s), is the barrier.
	if err := m.WriteConfig("telemetry-back.yaml", []byte(`apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: back-quiet, namespace: trace}
spec:
  selector: {matchLabels: {app: back}}
  tracing:
  - disableSpanReporting: true
`)); err != nil {
		t.Fatal(err)
	}
	round = 0
	var last map[string]int
	err = poll(ctx, 90*time.Second, func() error {
		round++
		first, second := fmt.Sprintf("quiet-%d-a", round), fmt.Sprintf("quiet-%d-b", round)
		if err := get(http.Header{"X-Client-Trace-Id": {first}}); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
		if err := get(http.Header{"X-Client-Trace-Id": {second}}); err != nil {
			return err
		}
		if err := poll(ctx, 20*time.Second, func() error {
			if n := len(traceOf(second)); n < 3 {
				return fmt.Errorf("traced request %s: %d spans", second, n)
			}
			return nil
		}); err != nil {
			return err
		}
		last = services(traceOf(first))
		want := map[string]int{"CLIENT client.trace": 1, "SERVER front.trace": 1, "CLIENT front.trace": 1}
		if fmt.Sprint(last) != fmt.Sprint(want) {
			return fmt.Errorf("round %d: trace has %v, want %v", round, last, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("back's spans off after %d round(s): %v", round, last)
}
