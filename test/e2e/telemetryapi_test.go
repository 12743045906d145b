package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/localmesh"
)

// TestTelemetryAPIMetrics: a namespace Telemetry that disables
// REQUEST_COUNT on the SERVER side keeps istio_requests_total out of the
// server sidecar's /stats/prometheus while requests go on and its other
// metrics are recorded; the client side still counts. Removing the
// Telemetry is pushed: the server counts requests again.
func TestTelemetryAPIMetrics(t *testing.T) {
	requireMesh(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	m := startMesh(ctx, t, "telemetryapi", localmesh.Options{SecureXDS: true, Workloads: []localmesh.Workload{
		{Name: "client", Namespace: "demo", ConfigIP: "10.99.0.10"},
		echoPod("echo-v1", "demo", "10.99.0.11", "v1"),
	}})
	client, server := m.Pod("client"), m.Pod("echo-v1")
	c := client.NewHTTPClient(false)
	waitOK(ctx, t, c, localmesh.DemoURL)
	for range 5 {
		if r := send(ctx, c, "GET", localmesh.DemoURL, "", nil); r.err != nil || r.status != 200 {
			t.Fatalf("request: %v", r)
		}
	}
	promLine(ctx, t, server, "istio_request_duration_milliseconds_count{", `reporter="destination"`)
	promLine(ctx, t, client, "istio_requests_total{", `reporter="source"`)
	body, err := server.Admin(ctx, "/stats/prometheus")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(body), "istio_requests_total") {
		t.Fatalf("the server recorded the disabled istio_requests_total:\n%s", body)
	}

	if err := m.WriteConfig("telemetry.yaml", []byte("# no Telemetry\n")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if r := send(ctx, c, "GET", localmesh.DemoURL, "", nil); r.err != nil || r.status != 200 {
			t.Fatalf("request after the change: %v", r)
		}
		body, err := server.Admin(ctx, "/stats/prometheus")
		if err == nil && strings.Contains(string(body), `istio_requests_total{reporter="destination"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server still counts no requests 60 s after the Telemetry was removed:\n%s", body)
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// TestTelemetryAPITCPMetrics: the same Telemetry disables
// TCP_CLOSED_CONNECTIONS on the SERVER side: the server sidecar reports
// a closed connection's bytes (recorded in the same report as the close)
// but no istio_tcp_connections_closed_total; the client still does.
func TestTelemetryAPITCPMetrics(t *testing.T) {
	requireMesh(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	m := startMesh(ctx, t, "telemetryapi", localmesh.Options{SecureXDS: true, Workloads: []localmesh.Workload{
		{Name: "client", Namespace: "demo", ConfigIP: "10.99.0.10"},
		echoPod("raw", "demo", "10.99.0.12", "raw"),
	}})
	client, raw := m.Pod("client"), m.Pod("raw")
	waitOK(ctx, t, client.NewHTTPClient(false), "http://240.240.0.11:9000/")
	promLine(ctx, t, raw, "istio_tcp_received_bytes_total{", `reporter="destination"`, `source_workload="client"`)
	promLine(ctx, t, raw, "istio_tcp_connections_opened_total{", `reporter="destination"`)
	promLine(ctx, t, client, "istio_tcp_connections_closed_total{", `reporter="source"`, `destination_workload="raw"`)
	body, err := raw.Admin(ctx, "/stats/prometheus")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(body), "istio_tcp_connections_closed_total") {
		t.Errorf("the server recorded the disabled istio_tcp_connections_closed_total:\n%s", body)
	}
}
