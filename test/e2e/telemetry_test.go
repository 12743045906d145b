package e2e

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/straitmesh/strait/internal/localmesh"
	"github.com/straitmesh/strait/internal/proxy/grpctest"
	"github.com/straitmesh/strait/internal/testreq"
)

// promLine waits for a line of p's /stats/prometheus that starts with
// prefix and contains every one of parts, and returns it.
func promLine(ctx context.Context, t *testing.T, p *localmesh.Pod, prefix string, parts ...string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last []byte
	for time.Now().Before(deadline) {
		body, err := p.Admin(ctx, "/stats/prometheus")
		if err == nil {
			last = body
			for _, l := range strings.Split(string(body), "\n") {
				if !strings.HasPrefix(l, prefix) {
					continue
				}
				ok := true
				for _, s := range parts {
					if !strings.Contains(l, s) {
						ok = false
						break
					}
				}
				if ok {
					return l
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
	var istio []string
	for _, l := range strings.Split(string(last), "\n") {
		if strings.HasPrefix(l, "istio_") {
			istio = append(istio, l)
		}
	}
	t.Fatalf("%s: no %s line with %q; istio lines:\n%s", p.Name, prefix, parts, strings.Join(istio, "\n"))
	return ""
}

// TestIstioTCPMetrics: two sidecars of a local mesh with workload
// certificates; a TCP service over mTLS. The client sidecar's cluster
// and the server sidecar's inbound chain run Istio's TCP metadata
// exchange (ALPN istio-peer-exchange), so both report the connection in
// istio_tcp_* with the other's workload; the server, which terminated
// the mTLS, names both principals.
func TestIstioTCPMetrics(t *testing.T) {
	requireMesh(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	m := startMesh(ctx, t, "telemetry", localmesh.Options{SecureXDS: true, Workloads: []localmesh.Workload{
		{Name: "client", Namespace: "demo", ConfigIP: "10.99.0.10"},
		echoPod("raw", "demo", "10.99.0.12", "raw"),
	}})
	client, raw := m.Pod("client"), m.Pod("raw")
	const id = "spiffe://cluster.local/ns/demo/sa/default"
	// A connection per request: each one closes and is reported.
	waitOK(ctx, t, client.NewHTTPClient(false), "http://240.240.0.11:9000/")

	t.Logf("server: %s", promLine(ctx, t, raw, "istio_tcp_connections_closed_total{",
		`reporter="destination"`, `source_workload="client"`, `source_workload_namespace="demo"`,
		`source_principal="`+id+`"`, `destination_workload="raw"`, `destination_principal="`+id+`"`,
		`destination_service="echo-tcp.demo.svc.cluster.local"`, `destination_service_name="echo-tcp"`, `destination_service_namespace="demo"`,
		`request_protocol="tcp"`, `connection_security_policy="mutual_tls"`))
	promLine(ctx, t, raw, "istio_tcp_received_bytes_total{", `reporter="destination"`, `source_workload="client"`)
	t.Logf("client: %s", promLine(ctx, t, client, "istio_tcp_connections_closed_total{",
		`reporter="source"`, `source_workload="client"`, `destination_workload="raw"`, `destination_workload_namespace="demo"`,
		`destination_service="echo-tcp.demo.svc.cluster.local"`, `destination_service_name="echo-tcp"`,
		`destination_service_namespace="demo"`, `destination_principal="`+id+`"`, `connection_security_policy="unknown"`))
	promLine(ctx, t, client, "istio_tcp_sent_bytes_total{", `reporter="source"`, `destination_workload="raw"`)
}

// TestIstioHTTPMetrics: client sidecar -> server sidecar -> app over
// mTLS in a local mesh. The client's istio.metadata_exchange puts its
// workload in the x-envoy-peer-metadata headers, the server's reads and
// strips them and answers with its own, which the client reads and
// strips: both report istio_requests_total (and the three histograms)
// with the other's workload, and neither app sees the headers. The
// namespace is STRICT and the client's DestinationRule ISTIO_MUTUAL, the
// two workloads have service accounts of their own: both reporters name
// the client's identity as source_principal and the server's as
// destination_principal (the client's sidecar from the certificates of
// its upstream connection, the server's from its downstream one).
func TestIstioHTTPMetrics(t *testing.T) {
	requireMesh(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, file, _, _ := runtime.Caller(0)
	base, err := os.ReadFile(filepath.Join(filepath.Dir(file), "testdata", "telemetry", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(string(base), "  name: client\n  namespace: demo\nspec:\n", "  name: client\n  namespace: demo\nspec:\n  serviceAccount: client\n", 1) + `---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: strict, namespace: demo}
spec:
  mtls: {mode: STRICT}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: echo, namespace: demo}
spec:
  host: echo.demo.svc.cluster.local
  trafficPolicy: {tls: {mode: ISTIO_MUTUAL}}
`
	if !strings.Contains(cfg, "serviceAccount: client") {
		t.Fatal("testdata/telemetry/mesh.yaml's client WorkloadEntry changed: set its service account here")
	}
	m := startMesh(ctx, t, "telemetry", localmesh.Options{SecureXDS: true, ConfigDir: configDir(t, map[string]string{"mesh.yaml": cfg}),
		Workloads: []localmesh.Workload{
			{Name: "client", Namespace: "demo", ConfigIP: "10.99.0.10", ServiceAccount: "client"},
			echoPod("echo-v1", "demo", "10.99.0.11", "v1"),
		}})
	client, server := m.Pod("client"), m.Pod("echo-v1")
	const clientID, serverID = "spiffe://cluster.local/ns/demo/sa/client", "spiffe://cluster.local/ns/demo/sa/default"
	c := client.NewHTTPClient(false)
	waitOK(ctx, t, c, localmesh.DemoURL)
	r := send(ctx, c, "GET", localmesh.DemoURL, "", nil)
	if r.err != nil || r.status != 200 {
		t.Fatalf("request: %v", r)
	}
	for k := range r.header {
		if strings.HasPrefix(strings.ToLower(k), "x-envoy-peer-metadata") {
			t.Errorf("the client app got %s", k)
		}
	}
	if strings.Contains(strings.ToLower(string(r.body)), "x-envoy-peer-metadata") {
		t.Errorf("the server app saw the exchange headers: %s", r.body)
	}
	t.Logf("server: %s", promLine(ctx, t, server, "istio_requests_total{",
		`reporter="destination"`, `source_workload="client"`, `source_workload_namespace="demo"`,
		`source_principal="`+clientID+`"`, `destination_workload="echo-v1"`, `destination_workload_namespace="demo"`, `destination_principal="`+serverID+`"`,
		// The inbound cluster's istio.services metadata names the service.
		`destination_service="echo.demo.svc.cluster.local"`, `destination_service_name="echo"`, `destination_service_namespace="demo"`,
		`request_protocol="http"`, `response_code="200"`, `response_flags="-"`, `connection_security_policy="mutual_tls"`))
	t.Logf("client: %s", promLine(ctx, t, client, "istio_requests_total{",
		`reporter="source"`, `source_workload="client"`, `destination_workload="echo-v1"`,
		`source_principal="`+clientID+`"`, `destination_principal="`+serverID+`"`,
		`destination_service="echo.demo.svc.cluster.local"`, `destination_service_name="echo"`,
		`destination_service_namespace="demo"`, `response_code="200"`, `connection_security_policy="unknown"`))
	for _, p := range []*localmesh.Pod{client, server} {
		promLine(ctx, t, p, "istio_request_duration_milliseconds_bucket{", `le="+Inf"`)
		promLine(ctx, t, p, "istio_request_bytes_count{")
		promLine(ctx, t, p, "istio_response_bytes_count{")
	}
}

// TestIstioGRPCMetrics is TestIstioHTTPMetrics with HTTP/2 downstream on
// both sidecars: a grpc-go client (h2c to its sidecar), the sidecars
// over mTLS with ALPN h2 (STRICT, ISTIO_MUTUAL), a grpc-go server. Both
// reporters label the calls request_protocol "grpc" with the call's
// grpc_response_status (0 for an answer, 9 for FailedPrecondition), the
// client's identity as source_principal and the server's as
// destination_principal; an HTTP/2 request that is not gRPC (curl
// --http2-prior-knowledge, answered 415 by grpc-go) is "http".
func TestIstioGRPCMetrics(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	m := startMesh(ctx, t, "telemetrygrpc", localmesh.Options{SecureXDS: true, Workloads: []localmesh.Workload{
		{Name: "client", Namespace: "demo", ConfigIP: "10.99.0.10", ServiceAccount: "client"},
		{Name: "grpcecho", Namespace: "demo", ConfigIP: "10.99.0.31", ServiceAccount: "grpcecho",
			App: []string{self, "-grpc-serve", ":9090"}, AppPort: 9090},
	}})
	client, server := m.Pod("client"), m.Pod("grpcecho")
	cc, err := grpc.NewClient("passthrough:///240.240.0.30:7070",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return client.DialContext(ctx, "tcp", addr)
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	c := grpctest.Client{CC: cc}
	waitFor(ctx, t, applyTimeout, "the gRPC service never answered through the mesh", func() error {
		callCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := c.Echo(callCtx, "ready", nil, nil)
		return err
	})
	if _, err := c.Echo(ctx, grpctest.FailInput, nil, nil); status.Code(err) != grpctest.FailCode {
		t.Fatalf("Echo(%q) = %v, want %v", grpctest.FailInput, err, grpctest.FailCode)
	}
	curl := testreq.Binary(t, "curl", "curl")
	out, err := client.Command(ctx, curl, "-sS", "-o", "/dev/null", "--http2-prior-knowledge", "-w", "%{http_version} %{http_code}",
		"http://240.240.0.30:7070/"+grpctest.ServiceName+"/Echo").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "2 415" {
		t.Fatalf("curl --http2-prior-knowledge through the mesh = %q, %v; want \"2 415\"", out, err)
	}

	const clientID, serverID = "spiffe://cluster.local/ns/demo/sa/client", "spiffe://cluster.local/ns/demo/sa/grpcecho"
	service := []string{`destination_service="grpcecho.demo.svc.cluster.local"`, `destination_service_name="grpcecho"`, `destination_service_namespace="demo"`}
	for _, call := range []struct {
		protocol, code, grpcStatus string
	}{{"grpc", "200", "0"}, {"grpc", "200", "9"}, {"http", "415", ""}} {
		labels := append([]string{`source_workload="client"`, `source_workload_namespace="demo"`, `destination_workload="grpcecho"`,
			`destination_workload_namespace="demo"`, `source_principal="` + clientID + `"`, `destination_principal="` + serverID + `"`,
			`request_protocol="` + call.protocol + `"`, `response_code="` + call.code + `"`, `grpc_response_status="` + call.grpcStatus + `"`}, service...)
		t.Logf("server: %s", promLine(ctx, t, server, "istio_requests_total{",
			slices.Concat(labels, []string{`reporter="destination"`, `connection_security_policy="mutual_tls"`})...))
		t.Logf("client: %s", promLine(ctx, t, client, "istio_requests_total{",
			slices.Concat(labels, []string{`reporter="source"`, `connection_security_policy="unknown"`})...))
	}
}
