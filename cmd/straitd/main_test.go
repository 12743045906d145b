package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/straitmesh/strait/internal/proxypush"
	"github.com/straitmesh/strait/internal/xds"
	"github.com/straitmesh/strait/internal/xdsapi"
)

func TestPushSettingsFromEnv(t *testing.T) {
	tests := []struct {
		env     map[string]string
		want    func(pushSettings) bool
		wantErr string
	}{
		{env: nil, want: func(s pushSettings) bool {
			return s.DebounceAfter == 100*time.Millisecond && s.DebounceMax == 10*time.Second && s.EnableEDSDebounce && s.PushThrottle == xds.DefaultPushThrottle() && s.EDSLeadingEdge
		}},
		{env: map[string]string{"STRAIT_EDS_LEADING_EDGE": "false"}, want: func(s pushSettings) bool { return !s.EDSLeadingEdge }},
		{env: nil, want: func(s pushSettings) bool { return s.JWKSRefreshInterval == 20*time.Minute }},
		{env: map[string]string{"PILOT_JWT_PUB_KEY_REFRESH_INTERVAL": "30s", "PILOT_JWT_ENABLE_REMOTE_JWKS": "istiod"}, want: func(s pushSettings) bool { return s.JWKSRefreshInterval == 30*time.Second }},
		{env: map[string]string{"PILOT_JWT_ENABLE_REMOTE_JWKS": "false"}, want: func(s pushSettings) bool { return true }},
		{env: map[string]string{"PILOT_JWT_PUB_KEY_REFRESH_INTERVAL": "0s"}, wantErr: `PILOT_JWT_PUB_KEY_REFRESH_INTERVAL="0s" is not a positive duration`},
		{env: map[string]string{"PILOT_JWT_ENABLE_REMOTE_JWKS": "envoy"}, wantErr: `PILOT_JWT_ENABLE_REMOTE_JWKS="envoy" is not supported by Strait`},
		{env: map[string]string{"PILOT_JWT_ENABLE_REMOTE_JWKS": "true"}, wantErr: `PILOT_JWT_ENABLE_REMOTE_JWKS="true" is not supported`},
		{env: map[string]string{"STRAIT_EDS_LEADING_EDGE": "sometimes"}, wantErr: `STRAIT_EDS_LEADING_EDGE="sometimes" is not a boolean`},
		{env: map[string]string{"PILOT_DEBOUNCE_AFTER": "50ms", "PILOT_DEBOUNCE_MAX": "2s", "PILOT_ENABLE_EDS_DEBOUNCE": "false", "PILOT_PUSH_THROTTLE": "7"},
			want: func(s pushSettings) bool {
				return s.DebounceAfter == 50*time.Millisecond && s.DebounceMax == 2*time.Second && !s.EnableEDSDebounce && s.PushThrottle == 7
			}},
		{env: map[string]string{"PILOT_DEBOUNCE_AFTER": ""}, want: func(s pushSettings) bool { return s.DebounceAfter == 100*time.Millisecond }},
		{env: map[string]string{"PILOT_DEBOUNCE_AFTER": "100"}, wantErr: `PILOT_DEBOUNCE_AFTER="100" is not a positive duration`},
		{env: map[string]string{"PILOT_DEBOUNCE_MAX": "-1s"}, wantErr: `PILOT_DEBOUNCE_MAX="-1s"`},
		{env: map[string]string{"PILOT_ENABLE_EDS_DEBOUNCE": "nope"}, wantErr: `PILOT_ENABLE_EDS_DEBOUNCE="nope" is not a boolean`},
		{env: map[string]string{"PILOT_PUSH_THROTTLE": "0"}, wantErr: `PILOT_PUSH_THROTTLE="0" is not a positive integer`},
		{env: map[string]string{"PILOT_DEBOUNCE_AFTER": "2s", "PILOT_DEBOUNCE_MAX": "1s"}, wantErr: "PILOT_DEBOUNCE_MAX=1s is shorter than PILOT_DEBOUNCE_AFTER=2s"},
	}
	for _, tt := range tests {
		got, err := pushSettingsFromEnv(func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok })
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("env %v: error %v, want one containing %q", tt.env, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !tt.want(got) {
			t.Errorf("env %v: got %+v, %v", tt.env, got, err)
		}
	}
}

func TestRunRequiresConfigDir(t *testing.T) {
	err := run(context.Background(), flags{xdsAddr: "127.0.0.1:0", monitoringAddr: "127.0.0.1:0", logLevel: "info"}, func(string) (string, bool) { return "", false })
	if err == nil || !strings.Contains(err.Error(), "--config-dir is required") {
		t.Fatalf("run without --config-dir: %v", err)
	}
}

// TestServe runs straitd on loopback with the demo config, connects a real
// ADS client as the demo's client workload, and checks the wiring: CDS from
// the file registry through the generators, a push after a file change, and
// the monitoring endpoints.
func TestServe(t *testing.T) {
	dir := t.TempDir()
	mesh, err := os.ReadFile(filepath.Join("..", "..", "examples", "demo", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "mesh.yaml"), mesh, 0o644); err != nil {
		t.Fatal(err)
	}
	xdsLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	monLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	push := pushSettings{DebounceAfter: 20 * time.Millisecond, DebounceMax: time.Second, EnableEDSDebounce: true, PushThrottle: 10}
	logger := slog.New(slog.DiscardHandler)
	go func() {
		served <- serve(ctx, flags{configDir: dir, domain: "cluster.local"}, push, logger, xdsLis, monLis)
	}()
	mon := "http://" + monLis.Addr().String()
	waitHTTP(t, mon+"/healthz/ready", "ok")

	conn, err := grpc.NewClient(xdsLis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sctx, scancel := context.WithCancel(ctx)
	defer scancel()
	stream, err := discovery.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(sctx)
	if err != nil {
		t.Fatal(err)
	}
	node := &core.Node{Id: proxypush.NodeID("10.99.0.10", "client", "demo", "")}
	if err := stream.Send(&discovery.DiscoveryRequest{Node: node, TypeUrl: xdsapi.ClusterType}); err != nil {
		t.Fatal(err)
	}
	resp := recvWithin(t, stream)
	if !hasCluster(t, resp, "outbound|80||echo.demo.svc.cluster.local") {
		t.Fatalf("CDS has no outbound|80||echo.demo.svc.cluster.local")
	}
	if err := stream.Send(&discovery.DiscoveryRequest{TypeUrl: xdsapi.ClusterType, VersionInfo: resp.VersionInfo, ResponseNonce: resp.Nonce}); err != nil {
		t.Fatal(err)
	}

	// A DestinationRule with subsets adds subset clusters: pushed.
	dr := `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata:
  name: echo
  namespace: demo
spec:
  host: echo.demo.svc.cluster.local
  subsets:
  - name: v1
    labels:
      version: v1
`
	if err := os.WriteFile(filepath.Join(dir, "dr.yaml"), []byte(dr), 0o644); err != nil {
		t.Fatal(err)
	}
	pushed := recvWithin(t, stream)
	if pushed.TypeUrl != xdsapi.ClusterType || pushed.VersionInfo == resp.VersionInfo || !hasCluster(t, pushed, "outbound|80|v1|echo.demo.svc.cluster.local") {
		t.Fatalf("push after the DestinationRule: %s version %s", pushed.TypeUrl, pushed.VersionInfo)
	}

	waitHTTP(t, mon+"/metrics", "pilot_xds 1")
	waitHTTP(t, mon+"/debug/connections", `"proxy_id": "sidecar~10.99.0.10~client.demo~demo.svc.cluster.local"`)
	waitHTTP(t, mon+"/debug/syncz", `"type": "cds"`)

	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("serve returned %v after cancel, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not return after cancel")
	}
}

func recvWithin(t *testing.T, stream discovery.AggregatedDiscoveryService_StreamAggregatedResourcesClient) *discovery.DiscoveryResponse {
	t.Helper()
	type result struct {
		r   *discovery.DiscoveryResponse
		err error
	}
	ch := make(chan result, 1)
	go func() {
		r, err := stream.Recv()
		ch <- result{r, err}
	}()
	select {
	case res := <-ch:
		if res.err != nil {
			t.Fatalf("recv: %v", res.err)
		}
		return res.r
	case <-time.After(10 * time.Second):
		t.Fatal("no response within 10s")
		return nil
	}
}

func hasCluster(t *testing.T, resp *discovery.DiscoveryResponse, name string) bool {
	t.Helper()
	for _, a := range resp.Resources {
		var c cluster.Cluster
		if err := a.UnmarshalTo(&c); err != nil {
			t.Fatal(err)
		}
		if c.Name == name {
			return true
		}
	}
	return false
}

// waitHTTP polls url until it answers 200 with a body containing want.
func waitHTTP(t *testing.T, url, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		resp, err := http.Get(url)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			last = resp.Status + " " + string(b)
			if resp.StatusCode == http.StatusOK && strings.Contains(string(b), want) {
				return
			}
		} else {
			last = err.Error()
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("GET %s: no 200 containing %q within 10s; last: %.500s", url, want, last)
}

// TestServeRefusesUnsupportedMeshConfig: a --mesh file with a field Strait
// does not implement stops the start, naming the file and the field.
func TestServeRefusesUnsupportedMeshConfig(t *testing.T) {
	dir := t.TempDir()
	meshFile := filepath.Join(t.TempDir(), "mesh")
	if err := os.WriteFile(meshFile, []byte("outboundTrafficPolicy:\n  mode: REGISTRY_ONLY\nenableEnvoyAccessLogService: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	xdsLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer xdsLis.Close()
	monLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer monLis.Close()
	err = serve(context.Background(), flags{configDir: dir, domain: "cluster.local", meshFile: meshFile}, pushSettings{PushThrottle: 1}, slog.New(slog.DiscardHandler), xdsLis, monLis)
	if err == nil || !strings.Contains(err.Error(), "--mesh: "+meshFile+": mesh config: enableEnvoyAccessLogService: not supported by Strait yet") {
		t.Fatalf("serve with an unsupported mesh field: %v", err)
	}
}
