package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/localmesh"
	"github.com/straitmesh/strait/internal/proxy/peermeta"
)

// gatewayMetricsMesh: an ingress gateway (Gateway ingress/gw: HTTP on 80,
// TCP on 9000) in front of echo, a STRICT mTLS service of namespace shop,
// with a TCP service, echo-tcp (pod raw), behind the gateway's TCP server.
// Addresses 10.99.0.x are rewritten to the pods' own.
const gatewayMetricsMesh = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: echo, namespace: shop}
spec:
  hosts: [echo.shop.svc.cluster.local]
  addresses: [240.240.0.10]
  ports:
  - {number: 80, name: http, protocol: HTTP, targetPort: 8080}
  location: MESH_INTERNAL
  resolution: STATIC
  workloadSelector: {labels: {app: echo}}
---
# An HTTP server seen as opaque TCP: tcp_proxy over mTLS, with Istio's
# TCP metadata exchange (ALPN istio-peer-exchange).
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: echo-tcp, namespace: shop}
spec:
  hosts: [echo-tcp.shop.svc.cluster.local]
  addresses: [240.240.0.11]
  ports:
  - {number: 9000, name: tcp, protocol: TCP, targetPort: 8080}
  location: MESH_INTERNAL
  resolution: STATIC
  workloadSelector: {labels: {app: raw}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: raw, namespace: shop}
spec:
  address: 10.99.0.12
  serviceAccount: raw
  labels: {app: raw, security.istio.io/tlsMode: istio}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: echo, namespace: shop}
spec:
  address: 10.99.0.11
  serviceAccount: echo
  labels: {app: echo, version: v1, security.istio.io/tlsMode: istio}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: ingressgateway, namespace: ingress}
spec:
  address: 10.99.0.30
  serviceAccount: ingressgateway
  labels: {istio: ingressgateway, app: istio-ingressgateway}
---
# The gateway's metrics are the CLIENT mode's (Istio's MetricsForClass):
# its request sizes and TCP bytes sent go, a SERVER override does not
# touch it.
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: gateway-metrics, namespace: ingress}
spec:
  selector: {matchLabels: {istio: ingressgateway}}
  metrics:
  - overrides:
    - match: {metric: REQUEST_SIZE, mode: CLIENT}
      disabled: true
    - match: {metric: TCP_SENT_BYTES, mode: CLIENT}
      disabled: true
    - match: {metric: REQUEST_COUNT, mode: SERVER}
      disabled: true
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: strict, namespace: shop}
spec:
  mtls: {mode: STRICT}
---
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: gw, namespace: ingress}
spec:
  selector: {istio: ingressgateway}
  servers:
  - port: {number: 80, name: http, protocol: HTTP}
    hosts: ["*"]
  - port: {number: 9000, name: tcp, protocol: TCP}
    hosts: ["*"]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: www, namespace: ingress}
spec:
  hosts: [www.example.com]
  gateways: [gw]
  http:
  - route:
    - destination: {host: echo.shop.svc.cluster.local, port: {number: 80}}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: raw, namespace: ingress}
spec:
  hosts: ["*"]
  gateways: [gw]
  tcp:
  - match: [{port: 9000}]
    route:
    - destination: {host: echo-tcp.shop.svc.cluster.local, port: {number: 9000}}
`

// scrapeLine waits for a line of the Prometheus page at url (scraped
// from the host, as a Prometheus does) that starts with prefix and
// contains every one of parts, and returns it.
func scrapeLine(ctx context.Context, t *testing.T, url, prefix string, parts ...string) string {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	var last string
	var found string
	err := poll(ctx, 30*time.Second, func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			return err
		}
		last = string(body)
		for _, l := range strings.Split(last, "\n") {
			if !strings.HasPrefix(l, prefix) {
				continue
			}
			ok := true
			for _, s := range parts {
				ok = ok && strings.Contains(l, s)
			}
			if ok {
				found = l
				return nil
			}
		}
		return fmt.Errorf("no %s line with %v", prefix, parts)
	})
	if err != nil {
		var have []string
		for _, l := range strings.Split(last, "\n") {
			if strings.HasPrefix(l, prefix) {
				have = append(have, l)
			}
		}
		t.Fatalf("%s: %v; the page's %s lines:\n%s", url, err, prefix, strings.Join(have, "\n"))
	}
	return found
}

// scrapeFirst scrapes url once and returns its first series line that
// starts with prefix, "" when there is none.
func scrapeFirst(ctx context.Context, t *testing.T, url, prefix string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	for _, l := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

// TestGatewayIstioMetrics: requests through an ingress gateway to a
// service of the mesh make the gateway report Istio's standard metrics on
// its 15090 /stats/prometheus as Istio's gateways do: reporter "source",
// the gateway's own workload as source_*, the destination from the
// upstream cluster and the server's exchanged metadata (HTTP and TCP);
// a request no route takes counts with destination_service "unknown"
// (no Host header fallback on a gateway); a Telemetry selecting the
// gateway drops its CLIENT-mode metrics and not its SERVER-mode ones; and
// the servers' sidecars report the gateway as the source of their
// reporter="destination" series, also when a client outside the mesh
// sends forged exchange headers of its own.
func TestGatewayIstioMetrics(t *testing.T) {
	requireMesh(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	m := startMesh(ctx, t, "", localmesh.Options{
		ConfigDir: configDir(t, map[string]string{"mesh.yaml": gatewayMetricsMesh}),
		SecureXDS: true,
		Workloads: []localmesh.Workload{
			{Name: "ingressgateway", Namespace: "ingress", ConfigIP: "10.99.0.30", Gateway: true, ServiceAccount: "ingressgateway",
				Labels: map[string]string{"istio": "ingressgateway", "app": "istio-ingressgateway"}},
			func() localmesh.Workload {
				w := echoPod("echo", "shop", "10.99.0.11", "v1")
				w.ServiceAccount = "echo"
				w.Labels = map[string]string{"app": "echo", "version": "v1", "security.istio.io/tlsMode": "istio"}
				return w
			}(),
			func() localmesh.Workload {
				w := echoPod("raw", "shop", "10.99.0.12", "raw")
				w.ServiceAccount = "raw"
				w.Labels = map[string]string{"app": "raw", "security.istio.io/tlsMode": "istio"}
				return w
			}(),
		},
	})
	gw, echo, raw := m.Pod("ingressgateway"), m.Pod("echo"), m.Pod("raw")
	gwProm := "http://" + net.JoinHostPort(gw.IP, "15090") + "/stats/prometheus"
	echoProm := "http://" + net.JoinHostPort(echo.IP, "15090") + "/stats/prometheus"
	rawProm := "http://" + net.JoinHostPort(raw.IP, "15090") + "/stats/prometheus"

	plain := gatewayClient(net.JoinHostPort(gw.IP, "80"), nil)
	waitFor(ctx, t, 60*time.Second, "the gateway serves www.example.com", func() error {
		resp, r, err := gatewayGet(plain, "http://www.example.com/hello")
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK || r == nil {
			return fmt.Errorf("status %d, reply %+v", resp.StatusCode, r)
		}
		return nil
	})
	for range 4 {
		if resp, _, err := gatewayGet(plain, "http://www.example.com/hello"); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET through the gateway: %v %v", err, resp)
		}
	}
	// A client outside the mesh that sends Istio's exchange headers
	// itself does not name the source: the gateway's exchange replaces
	// them with its own (the server would otherwise count a forged peer).
	forged, err := peermeta.EncodeHeader(peermeta.Workload{Workload: "forged", Namespace: "forged"})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://www.example.com/forged", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(peermeta.HeaderMetadataID, "forged")
	req.Header.Set(peermeta.HeaderMetadata, forged)
	resp, err := plain.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET with forged exchange headers: %v %v", err, resp)
	}
	_ = resp.Body.Close()
	if resp, _, err := gatewayGet(plain, "http://nobody.example.com/"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("unrouted host: %v %v, want 404", err, resp)
	}

	const gwID = "spiffe://cluster.local/ns/ingress/sa/ingressgateway"
	const echoID = "spiffe://cluster.local/ns/shop/sa/echo"
	line := scrapeLine(ctx, t, gwProm, "istio_requests_total{",
		`reporter="source"`, `source_workload="ingressgateway"`, `source_workload_namespace="ingress"`,
		`source_app="istio-ingressgateway"`,
		// From the ISTIO_MUTUAL upstream connection: the gateway's own
		// certificate and the sidecar's.
		`source_principal="`+gwID+`"`, `destination_principal="`+echoID+`"`,
		`destination_workload="echo"`, `destination_workload_namespace="shop"`, `destination_app="echo"`, `destination_version="v1"`,
		`destination_service="echo.shop.svc.cluster.local"`, `destination_service_name="echo"`, `destination_service_namespace="shop"`,
		`request_protocol="http"`, `response_code="200"`, `response_flags="-"`,
		"} 6") // the first request, four more, the forged one
	t.Logf("gateway: %s", line)
	t.Logf("gateway, no route: %s", scrapeLine(ctx, t, gwProm, "istio_requests_total{",
		`reporter="source"`, `source_workload="ingressgateway"`, `destination_service="unknown"`, `response_code="404"`, `response_flags="NR"`))
	scrapeLine(ctx, t, gwProm, "istio_request_duration_milliseconds_bucket{", `reporter="source"`, `source_workload="ingressgateway"`, `le="+Inf"`)
	t.Logf("echo: %s", scrapeLine(ctx, t, echoProm, "istio_requests_total{",
		`reporter="destination"`, `source_workload="ingressgateway"`, `source_workload_namespace="ingress"`,
		`source_principal="`+gwID+`"`, `source_app="istio-ingressgateway"`,
		`destination_workload="echo"`, `destination_principal="`+echoID+`"`,
		`destination_service="echo.shop.svc.cluster.local"`, `response_code="200"`, `connection_security_policy="mutual_tls"`, "} 6"))
	if l := scrapeFirst(ctx, t, echoProm, `istio_requests_total{reporter="destination",source_workload="forged"`); l != "" {
		t.Errorf("echo counts the forged peer of a client's own exchange headers: %s", l)
	}

	// TCP: echo-tcp through the gateway's tcp_proxy on 9000; each side
	// learns the other from the TCP metadata exchange of their mTLS.
	tcp := gatewayClient(net.JoinHostPort(gw.IP, "9000"), nil)
	if resp, r, err := gatewayGet(tcp, "http://echo-tcp.shop.svc.cluster.local/tcp"); err != nil || resp.StatusCode != http.StatusOK || r == nil {
		t.Fatalf("GET over the gateway's TCP server: %v %v %+v", err, resp, r)
	}
	const rawID = "spiffe://cluster.local/ns/shop/sa/raw"
	t.Logf("gateway tcp: %s", scrapeLine(ctx, t, gwProm, "istio_tcp_connections_closed_total{",
		`reporter="source"`, `source_workload="ingressgateway"`, `source_workload_namespace="ingress"`, `source_app="istio-ingressgateway"`,
		`source_principal="`+gwID+`"`,
		`destination_workload="raw"`, `destination_workload_namespace="shop"`, `destination_principal="`+rawID+`"`,
		`destination_service="echo-tcp.shop.svc.cluster.local"`, `destination_service_name="echo-tcp"`, `request_protocol="tcp"`))
	scrapeLine(ctx, t, gwProm, "istio_tcp_received_bytes_total{", `reporter="source"`, `source_workload="ingressgateway"`, `destination_service="echo-tcp.shop.svc.cluster.local"`)
	// The Telemetry's CLIENT overrides: recorded before the lines above
	// were found, so absent for good.
	for _, gone := range []string{"istio_request_bytes", "istio_tcp_sent_bytes_total"} {
		if l := scrapeFirst(ctx, t, gwProm, gone); l != "" {
			t.Errorf("the Telemetry drops %s for the gateway (CLIENT), but its page has %s", gone, l)
		}
	}
	scrapeLine(ctx, t, gwProm, "istio_response_bytes_count{", `reporter="source"`, `source_workload="ingressgateway"`)
	scrapeLine(ctx, t, echoProm, "istio_request_bytes_count{", `reporter="destination"`, `source_workload="ingressgateway"`)
	t.Logf("raw tcp: %s", scrapeLine(ctx, t, rawProm, "istio_tcp_connections_closed_total{",
		`reporter="destination"`, `source_workload="ingressgateway"`, `source_workload_namespace="ingress"`, `source_principal="`+gwID+`"`,
		`destination_workload="raw"`, `destination_service="echo-tcp.shop.svc.cluster.local"`, `connection_security_policy="mutual_tls"`))
}
