package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/straitmesh/strait/internal/netns"
	"github.com/straitmesh/strait/internal/proxypush"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// TestDebugEndpointsAuth runs the real straitd in a network namespace of
// its own, its monitoring port on every address there, and calls it from
// the host, whose connections arrive from the bridge address (another
// host, as far as straitd can tell), and from the namespace's loopback.
// From the host, every debug page and pprof answers 401 without a token
// (also when headers claim loopback), 403 with a token of another
// namespace and 200 with a token of straitd's namespace; /metrics and
// /healthz/ready answer 200 without one. From loopback everything answers
// without a token. straitctl proxy-status works over loopback without a
// token, and from the host with --token-file only.
func TestDebugEndpointsAuth(t *testing.T) {
	requireMesh(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	network, err := netns.NewNetwork(ctx, netns.NetworkOptions{Prefix: "dbg"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := network.Close(); err != nil {
			t.Errorf("close network: %v", err)
		}
	})
	pod, err := network.AddPod(ctx, "straitd")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	caDir := filepath.Join(dir, "ca")
	logPath := filepath.Join(dir, "straitd.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	defer func() {
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("straitd log:\n%s", tail(string(b), 40))
		}
	}()
	proc, err := pod.Start(ctx, netns.ExecOptions{Stdout: logFile, Stderr: logFile}, filepath.Join(binDir, "straitd"),
		"--config-dir", examplesDir(t), "--xds-addr", ":15010", "--secure-xds-addr", ":15012", "--monitoring-addr", ":15014",
		"--ca-dir", caDir, "--cacerts-dir", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proc.Kill() })

	remote := &http.Client{Timeout: 10 * time.Second}
	loopback := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: pod.DialContext}}
	remoteBase := "http://" + net.JoinHostPort(pod.IP.String(), "15014")
	get := func(c *http.Client, u string, header http.Header) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return 0, "", err
		}
		req.Header = header
		resp, err := c.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return resp.StatusCode, string(b), err
	}
	waitFor(ctx, t, 30*time.Second, "straitd ready, asked from the host", func() error {
		code, body, err := get(remote, remoteBase+"/healthz/ready", nil)
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("status %d: %s", code, body)
		}
		return nil
	})

	// A proxy connected over xDS, so that config_dump and syncz have one.
	conn, err := grpc.NewClient(net.JoinHostPort(pod.IP.String(), "15010"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stream, err := discovery.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	nodeID := proxypush.NodeID("10.99.0.10", "client", "demo", "")
	if err := stream.Send(&discovery.DiscoveryRequest{Node: &core.Node{Id: nodeID}, TypeUrl: xdsapi.ClusterType}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&discovery.DiscoveryRequest{TypeUrl: xdsapi.ClusterType, VersionInfo: resp.VersionInfo, ResponseNonce: resp.Nonce}); err != nil {
		t.Fatal(err)
	}

	ctl := filepath.Join(binDir, "straitctl")
	token := func(ns string) string {
		t.Helper()
		out, err := exec.CommandContext(ctx, ctl, "token", "create", "--namespace", ns, "--service-account", "admin", "--ca-dir", caDir, "--ttl", "1h").Output()
		if err != nil {
			t.Fatalf("straitctl token create: %v", err)
		}
		return strings.TrimSpace(string(out))
	}
	admin, demo := token("istio-system"), token("demo")
	bearer := func(tok string) http.Header { return http.Header{"Authorization": {"Bearer " + tok}} }

	// What each debug page answers when served: a fragment of its body.
	debugPages := []struct{ path, want string }{
		{"/debug/syncz", nodeID},
		{"/debug/connections", nodeID},
		{"/debug/mesh", nodeID},
		{"/debug/config_dump?proxyID=" + url.QueryEscape(nodeID), "outbound|80||echo.demo.svc.cluster.local"},
		{"/debug/pprof/", "goroutine"},
		{"/debug/pprof/goroutine?debug=1", "goroutine profile"},
		{"/debug/pprof/heap?debug=1", "heap profile"},
		{"/debug/pprof/cmdline", "straitd"},
		{"/debug/pprof/symbol", "num_symbols"},
		{"/debug/pprof/profile?seconds=1", ""},
		{"/debug/pprof/trace?seconds=1", ""},
	}
	for _, tc := range []struct {
		name   string
		header http.Header
		want   int
	}{
		{"no token", nil, http.StatusUnauthorized},
		{"headers claiming loopback", http.Header{"X-Forwarded-For": {"127.0.0.1"}, "X-Real-Ip": {"127.0.0.1"}, "Forwarded": {"for=127.0.0.1"}}, http.StatusUnauthorized},
		{"forged token", bearer(admin[:len(admin)-4] + "AAAA"), http.StatusUnauthorized},
		{"token of another namespace", bearer(demo), http.StatusForbidden},
		{"token of straitd's namespace", bearer(admin), http.StatusOK},
	} {
		t.Run("from the host, "+tc.name, func(t *testing.T) {
			for _, p := range debugPages {
				code, body, err := get(remote, remoteBase+p.path, tc.header)
				if err != nil {
					t.Fatalf("%s: %v", p.path, err)
				}
				if code != tc.want {
					t.Errorf("%s: status %d, want %d: %.200s", p.path, code, tc.want, body)
					continue
				}
				if code == http.StatusOK && !strings.Contains(body, p.want) {
					t.Errorf("%s: body lacks %q: %.300s", p.path, p.want, body)
				}
				if code != http.StatusOK && (strings.Contains(body, nodeID) || strings.Contains(body, "goroutine")) {
					t.Errorf("%s: refused with %d, but the body has debug data: %.300s", p.path, code, body)
				}
			}
		})
	}
	t.Run("from the host, metrics and readiness are open", func(t *testing.T) {
		for _, p := range []struct{ path, want string }{{"/metrics", "pilot_xds"}, {"/healthz/ready", "ok"}} {
			code, body, err := get(remote, remoteBase+p.path, nil)
			if err != nil || code != http.StatusOK || !strings.Contains(body, p.want) {
				t.Errorf("%s: %d %v %.200s", p.path, code, err, body)
			}
		}
	})
	t.Run("from loopback, no token needed", func(t *testing.T) {
		for _, base := range []string{"http://127.0.0.1:15014", "http://[::1]:15014"} {
			for _, p := range append(debugPages[:4:4], struct{ path, want string }{"/metrics", "pilot_xds"}) {
				code, body, err := get(loopback, base+p.path, nil)
				if err != nil || code != http.StatusOK || !strings.Contains(body, p.want) {
					t.Errorf("%s%s: %d %v %.200s", base, p.path, code, err, body)
				}
			}
		}
	})

	t.Run("straitctl proxy-status", func(t *testing.T) {
		out, err := pod.Run(ctx, netns.ExecOptions{}, ctl, "proxy-status", "--straitd-addr", "127.0.0.1:15014")
		if err != nil || !strings.Contains(string(out), "client.demo") {
			t.Errorf("over loopback: %v\n%s", err, out)
		}
		hostAddr := net.JoinHostPort(pod.IP.String(), "15014")
		out, err = exec.CommandContext(ctx, ctl, "proxy-status", "--straitd-addr", hostAddr).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "401") || strings.Contains(string(out), "client.demo") {
			t.Errorf("from the host without a token: %v\n%s", err, out)
		}
		tokFile := filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(tokFile, []byte(admin+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err = exec.CommandContext(ctx, ctl, "proxy-status", "--straitd-addr", hostAddr, "--token-file", tokFile).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "client.demo") {
			t.Errorf("from the host with --token-file: %v\n%s", err, out)
		}
	})
}
