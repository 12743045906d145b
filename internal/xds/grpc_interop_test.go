package xds

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	grpcxds "google.golang.org/grpc/xds"

	"github.com/straitmesh/strait/internal/registry/file"
	"github.com/straitmesh/strait/internal/xds/gen"
)

// TestProxylessGRPCInterop runs grpc-go's own xDS client (proxyless gRPC)
// against the server with the real generators: it resolves
// xds:///echo.demo.svc.cluster.local:7070 through LDS (an API listener
// named host:port), RDS, CDS and EDS, and round-robins across two grpc-go
// servers.
func TestProxylessGRPCInterop(t *testing.T) {
	var backends []string
	for range 2 {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s := grpc.NewServer()
		healthpb.RegisterHealthServer(s, health.NewServer())
		go func() { _ = s.Serve(lis) }()
		t.Cleanup(s.Stop)
		backends = append(backends, lis.Addr().String())
	}
	_, p1, _ := net.SplitHostPort(backends[0])
	_, p2, _ := net.SplitHostPort(backends[1])

	dir := t.TempDir()
	mesh := fmt.Sprintf(`apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: echo, namespace: demo}
spec:
  hosts: [echo.demo.svc.cluster.local]
  ports: [{number: 7070, name: grpc}]
  resolution: STATIC
  endpoints:
  - {address: 127.0.0.1, ports: {grpc: %s}}
  - {address: 127.0.0.1, ports: {grpc: %s}}
---
# The proxyless client is a workload too: the file registry resolves a
# proxy by the IP in its node id.
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: client, namespace: demo}
spec: {address: 10.50.0.1, labels: {app: client}}
`, p1, p2)
	if err := os.WriteFile(filepath.Join(dir, "mesh.yaml"), []byte(mesh), 0o644); err != nil {
		t.Fatal(err)
	}
	reg, err := file.New(file.Options{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	g := gen.New(reg)
	env := newTCPTestEnv(t, func(o *Options) {
		o.Generator, o.PushFilter, o.EndpointsNarrower, o.ResolveProxy = g, g, g, reg.ResolveProxy
	})

	// Istio's proxyless bootstrap: a sidecar-style node id and
	// GENERATOR=grpc in the node metadata.
	bootstrap := fmt.Sprintf(`{
  "xds_servers": [{"server_uri": %q, "channel_creds": [{"type": "insecure"}], "server_features": ["xds_v3"]}],
  "node": {"id": "sidecar~10.50.0.1~client.demo~demo.svc.cluster.local", "metadata": {"GENERATOR": "grpc"}}
}`, env.addr)
	resolver, err := grpcxds.NewXDSResolverWithConfigForTesting([]byte(bootstrap))
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient("xds:///echo.demo.svc.cluster.local:7070",
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithResolvers(resolver))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client := healthpb.NewHealthClient(cc)
	call := func(i int) string {
		t.Helper()
		var p peer.Peer
		if _, err := client.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Peer(&p), grpc.WaitForReady(true)); err != nil {
			t.Fatalf("call %d through xds: %v (syncz: %+v)", i, err, env.server.SyncStatuses())
		}
		return p.Addr.String()
	}
	// Round robin picks among the backends whose connection is ready, and
	// the second may become ready only after the first calls went out:
	// call until both answered (bounded by ctx), then check that calls
	// alternate between them.
	seen := map[string]int{}
	for i := 0; len(seen) < 2; i++ {
		seen[call(i)]++
	}
	if seen[backends[0]] == 0 || seen[backends[1]] == 0 {
		t.Fatalf("calls per backend = %v, want only %v", seen, backends)
	}
	clear(seen)
	for i := range 20 {
		seen[call(i)]++
	}
	if seen[backends[0]] != 10 || seen[backends[1]] != 10 {
		t.Fatalf("calls per backend = %v, want 10 to each of %v (round robin)", seen, backends)
	}
	// The client ACKed every type: LDS, RDS, CDS, EDS.
	eventually(t, "proxyless client synced", func() bool {
		sz := env.server.SyncStatuses()
		if len(sz) != 1 || len(sz[0].Types) != 4 {
			return false
		}
		for _, ts := range sz[0].Types {
			if !ts.Synced {
				return false
			}
		}
		return true
	})
}
