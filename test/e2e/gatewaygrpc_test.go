package e2e

import (
	"context"
	"crypto/tls"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/straitmesh/strait/internal/localmesh"
	"github.com/straitmesh/strait/internal/proxy/grpctest"
)

// gatewayGRPCMesh: an ingress gateway with a GRPC server (h2c, port 9090)
// and an HTTPS server (TLS with ALPN h2, port 443) in front of a gRPC
// service of the mesh under STRICT mTLS, bound by one VirtualService.
// CERTS is the directory of gatewayCerts; 10.99.0.x are rewritten to the
// pods' addresses.
const gatewayGRPCMesh = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: grpcecho, namespace: shop}
spec:
  hosts: [grpcecho.shop.svc.cluster.local]
  addresses: [240.240.0.30]
  ports:
  - {number: 7070, name: grpc-echo, targetPort: 9090}
  location: MESH_INTERNAL
  resolution: STATIC
  workloadSelector: {labels: {app: grpcecho}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: grpcecho, namespace: shop}
spec:
  address: 10.99.0.31
  serviceAccount: grpcecho
  labels: {app: grpcecho, security.istio.io/tlsMode: istio}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: ingressgateway, namespace: ingress}
spec:
  address: 10.99.0.30
  serviceAccount: ingressgateway
  labels: {istio: ingressgateway}
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
  - port: {number: 9090, name: grpc, protocol: GRPC}
    hosts: ["*"]
  - port: {number: 443, name: https, protocol: HTTPS}
    hosts: [api.example.com]
    tls: {mode: SIMPLE, serverCertificate: CERTS/api.crt, privateKey: CERTS/api.key}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: grpcecho, namespace: ingress}
spec:
  hosts: ["*"]
  gateways: [gw]
  http:
  - route:
    - destination: {host: grpcecho.shop.svc.cluster.local, port: {number: 7070}}
`

// TestGatewayGRPC calls a gRPC service of the mesh from the host through
// an ingress gateway with a real grpc-go client, every kind of call
// (grpctest.CheckAll: unary with header and trailer metadata, an error
// status with its message, the three streaming kinds, a deadline and a
// cancellation), over h2c to a GRPC server and over TLS (ALPN h2, the
// gateway's certificate verified) to an HTTPS server; the gateway speaks
// HTTP/2 over mTLS to the server's sidecar.
func TestGatewayGRPC(t *testing.T) {
	requireMesh(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	certs, pool, _ := gatewayCerts(t)
	m := startMesh(ctx, t, "", localmesh.Options{
		ConfigDir: configDir(t, map[string]string{"mesh.yaml": strings.ReplaceAll(gatewayGRPCMesh, "CERTS", certs)}),
		SecureXDS: true,
		Workloads: []localmesh.Workload{
			{Name: "ingressgateway", Namespace: "ingress", ConfigIP: "10.99.0.30", Gateway: true, ServiceAccount: "ingressgateway",
				Labels: map[string]string{"istio": "ingressgateway"}},
			{Name: "grpcecho", Namespace: "shop", ConfigIP: "10.99.0.31", ServiceAccount: "grpcecho",
				Labels: map[string]string{"app": "grpcecho", "security.istio.io/tlsMode": "istio"},
				App:    []string{self, "-grpc-serve", ":9090"}, AppPort: 9090},
		},
	})
	gw := m.Pod("ingressgateway")
	for _, tc := range []struct {
		name  string
		addr  string
		creds credentials.TransportCredentials
	}{
		{"h2c", net.JoinHostPort(gw.IP, "9090"), insecure.NewCredentials()},
		{"tls", net.JoinHostPort(gw.IP, "443"), credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: "api.example.com", MinVersion: tls.VersionTLS12})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cc, err := grpc.NewClient("passthrough:///"+tc.addr, grpc.WithTransportCredentials(tc.creds), grpc.WithAuthority("api.example.com"))
			if err != nil {
				t.Fatal(err)
			}
			defer cc.Close()
			c := grpctest.Client{CC: cc}
			waitFor(ctx, t, applyTimeout, "the gRPC service never answered through the gateway", func() error {
				callCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				_, err := c.Echo(callCtx, "ready", nil, nil)
				return err
			})
			grpctest.CheckAll(t, c, nil) //nolint:contextcheck // CheckAll gives each call its own deadline
		})
	}
	n, err := m.Pod("grpcecho").ClusterRequests(ctx, "inbound|9090||")
	if err != nil || n < 14 {
		t.Errorf("the server's sidecar counted %d requests on inbound|9090|| (%v); want both clients' calls, over mTLS from the gateway", n, err)
	}
}
