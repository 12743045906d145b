package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/localmesh"
)

// TestListenerLifecycle runs one mesh (echo with two ports behind its
// sidecar) and a pod without a sidecar, and checks strait-proxy's
// listener lifecycle against straitd's real config:
//   - once started, the sidecar reports Envoy's readiness stats
//     (server.state LIVE, workers_started), which Istio's pilot-agent reads;
//   - a PeerAuthentication that changes only port 9090's inbound filter
//     chains updates the inbound listener in place: a keep-alive
//     connection on port 8080's chain is not drained, and the config dump
//     shows no draining listener.
func TestListenerLifecycle(t *testing.T) {
	requireMesh(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	echo := filepath.Join(binDir, "strait-echo")
	// One server on both ports, started directly: a shell command line
	// naming the binary would need the pod's app user to reach binDir,
	// which a private checkout does not allow (local mesh apps do not
	// run as root; localmesh.AppBinary binds only the command itself).
	twoPorts := []string{echo, "--addr", ":8080,:9090", "--version", "v1"}
	m := startMesh(ctx, t, "warm", localmesh.Options{SecureXDS: true, Workloads: []localmesh.Workload{
		{Name: "echo", Namespace: "demo", ConfigIP: "10.99.0.11", App: twoPorts, AppPort: 9090},
	}})
	outsider, err := m.Network().AddPod(ctx, "warm-out")
	if err != nil {
		t.Fatal(err)
	}
	server := m.Pod("echo")
	echoAddr := net.JoinHostPort(server.IP, "8080")
	echoAlt := net.JoinHostPort(server.IP, "9090")

	t.Run("readiness stats", func(t *testing.T) {
		stats, err := server.Admin(ctx, "/stats")
		if err != nil {
			t.Fatal(err)
		}
		if !regexp.MustCompile(`(?m)^server\.state: 0$`).Match(stats) {
			t.Errorf("/stats has no server.state: 0 (LIVE)")
		}
		if got := stat(t, ctx, server, "listener_manager.workers_started"); got != 1 {
			t.Errorf("listener_manager.workers_started = %d, want 1", got)
		}
		body, err := server.Admin(ctx, "/ready")
		if err != nil || string(body) != "LIVE\n" {
			t.Errorf("/ready = %q %v, want LIVE", body, err)
		}
	})

	t.Run("a filter-chain-only update keeps the other chains' connections", func(t *testing.T) {
		raw, err := outsider.DialContext(ctx, "tcp", echoAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		r := bufio.NewReader(raw)
		ask := func() (int, bool, error) {
			raw.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := fmt.Fprintf(raw, "GET / HTTP/1.1\r\nHost: echo\r\n\r\n"); err != nil {
				return 0, false, err
			}
			resp, err := http.ReadResponse(r, nil)
			if err != nil {
				return 0, false, err
			}
			resp.Body.Close()
			return resp.StatusCode, resp.Close, nil
		}
		if code, closing, err := ask(); err != nil || code != 200 || closing {
			t.Fatalf("plaintext keep-alive request to %s: %d close=%t %v, want 200 kept alive", echoAddr, code, closing, err)
		}
		before := stat(t, ctx, server, "listener_manager.listener_in_place_updated")

		// STRICT on 9090 only: a plaintext client is closed there once
		// the update applies; 8080's chains are the same as before.
		pa := "apiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata: {name: echo, namespace: demo}\n" +
			"spec:\n  selector: {matchLabels: {app: echo}}\n  portLevelMtls:\n    9090: {mode: STRICT}\n"
		if err := m.WriteConfig("peerauthn.yaml", []byte(pa)); err != nil {
			t.Fatal(err)
		}
		plain := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: outsider.DialContext, DisableKeepAlives: true}}
		err = poll(ctx, 60*time.Second, func() error {
			resp, err := plain.Get("http://" + echoAlt + "/")
			if err == nil {
				resp.Body.Close()
				return fmt.Errorf("plaintext to %s answered %d; STRICT not applied yet", echoAlt, resp.StatusCode)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if n := stat(t, ctx, server, "listener_manager.listener_in_place_updated"); n <= before {
			t.Errorf("listener_in_place_updated = %d, was %d: the inbound listener was not updated in place", n, before)
		}
		if code, closing, err := ask(); err != nil || code != 200 || closing {
			t.Errorf("the keep-alive connection on the unchanged 8080 chain after the update: %d close=%t %v, want 200 kept alive", code, closing, err)
		}
		if names := drainingListeners(ctx, t, server); len(names) != 0 {
			t.Errorf("config dump lists draining listeners %q after an in-place update, want none", names)
		}
	})
}

// drainingListeners returns the names of the dynamic listeners a pod
// proxy's config dump shows with a draining_state.
func drainingListeners(ctx context.Context, t *testing.T, p *localmesh.Pod) []string {
	t.Helper()
	body, err := p.Admin(ctx, "/config_dump")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Configs []struct {
			DynamicListeners []struct {
				Name          string          `json:"name"`
				DrainingState json.RawMessage `json:"drainingState"`
			} `json:"dynamicListeners"`
		} `json:"configs"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("config_dump: %v", err)
	}
	var out []string
	for _, c := range doc.Configs {
		for _, l := range c.DynamicListeners {
			if l.DrainingState != nil {
				out = append(out, l.Name)
			}
		}
	}
	return out
}
