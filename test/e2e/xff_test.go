package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/localmesh"
)

// TestClientAddressThroughSidecars sends requests carrying an
// x-forwarded-for from the client pod through both sidecars (mTLS
// between them) to strait-echo. The sidecars run as Istio configures
// them (use_remote_address false, no trusted hops), so:
//   - x-forwarded-for reaches the app as the client sent it, and a
//     client's x-envoy-internal does not;
//   - an AuthorizationPolicy's remoteIpBlocks matches the last
//     x-forwarded-for address, not the peer;
//   - each sidecar's access log prints that address (port 0) as
//     %DOWNSTREAM_REMOTE_ADDRESS%, and its peer as the direct address.
func TestClientAddressThroughSidecars(t *testing.T) {
	requireMesh(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	meshFile := filepath.Join(t.TempDir(), "mesh.yaml")
	if err := os.WriteFile(meshFile, []byte("accessLogFile: ./access.log\n"+
		`accessLogFormat: "%REQ(X-REQUEST-ID)% remote=%DOWNSTREAM_REMOTE_ADDRESS% direct=%DOWNSTREAM_DIRECT_REMOTE_ADDRESS_WITHOUT_PORT%\n"`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := startMesh(ctx, t, "xff", localmesh.Options{SecureXDS: true, StraitdArgs: []string{"--mesh", meshFile},
		Workloads: []localmesh.Workload{
			{Name: "client", Namespace: "demo", ConfigIP: "10.97.0.10", ServiceAccount: "client"},
			echoPod("echo-v1", "demo", "10.97.0.11", "v1"),
		}})
	client, echo := m.Pod("client"), m.Pod("echo-v1")
	const echoURL = "http://240.240.97.10/"

	type answer struct {
		status  int
		headers map[string]string // what strait-echo saw
		err     error
	}
	do := func(id string, header map[string]string) answer {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, echoURL, nil)
		if err != nil {
			return answer{err: err}
		}
		req.Header.Set("X-Request-Id", id)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := client.NewHTTPClient(false).Do(req)
		if err != nil {
			return answer{err: err}
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		a := answer{status: resp.StatusCode}
		if resp.StatusCode == 200 {
			var rep struct {
				Headers map[string]string `json:"headers"`
			}
			if err := json.Unmarshal(b, &rep); err != nil {
				return answer{err: fmt.Errorf("not strait-echo's answer %q: %w", b, err)}
			}
			a.headers = rep.Headers
		}
		return a
	}
	lineFor := func(t *testing.T, pod *localmesh.Pod, id string) string {
		t.Helper()
		var line string
		err := poll(ctx, 15*time.Second, func() error {
			f, err := os.Open(filepath.Join(pod.Dir(), "access.log"))
			if err != nil {
				return err
			}
			defer f.Close()
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), id+" ") {
					line = strings.TrimPrefix(sc.Text(), id+" ")
					return nil
				}
			}
			return fmt.Errorf("no line for %s in %s's access log", id, pod.Name)
		})
		if err != nil {
			t.Fatal(err)
		}
		return line
	}

	t.Run("x-forwarded-for passes unchanged, x-envoy-internal does not", func(t *testing.T) {
		var a answer
		waitFor(ctx, t, applyTimeout, "echo reachable", func() error {
			a = do("xff-pass", map[string]string{"X-Forwarded-For": "198.51.100.1, 203.0.113.9", "X-Envoy-Internal": "true"})
			if a.err != nil {
				return fmt.Errorf("want 200: %w", a.err)
			}
			if a.status != 200 {
				return fmt.Errorf("got %d, want 200", a.status)
			}
			return nil
		})
		if got := a.headers["X-Forwarded-For"]; got != "198.51.100.1, 203.0.113.9" {
			t.Errorf("the app saw x-forwarded-for %q, want the client's", got)
		}
		if got, ok := a.headers["X-Envoy-Internal"]; ok {
			t.Errorf("the app saw x-envoy-internal %q, want none", got)
		}
		// The client sidecar's peer is the client itself; the server
		// sidecar's is the client pod (its sidecar connects from there).
		for _, pod := range []*localmesh.Pod{client, echo} {
			want := "remote=203.0.113.9:0 direct=" + client.IP
			if got := lineFor(t, pod, "xff-pass"); got != want {
				t.Errorf("%s's access log %q, want %q", pod.Name, got, want)
			}
		}
	})

	t.Run("remoteIpBlocks matches the last x-forwarded-for address", func(t *testing.T) {
		writeConfig(t, m, "policy.yaml", []byte(`apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: echo-allow, namespace: demo}
spec:
  selector: {matchLabels: {app: echo}}
  rules:
  - from: [{source: {remoteIpBlocks: [203.0.113.0/24]}}]
`))
		waitFor(ctx, t, applyTimeout, "policy in force", func() error {
			a := do("xff-probe", nil)
			if a.err != nil {
				return fmt.Errorf("no x-forwarded-for: want 403: %w", a.err)
			}
			if a.status != 403 {
				return fmt.Errorf("no x-forwarded-for: got %d, want 403", a.status)
			}
			return nil
		})
		for _, tc := range []struct {
			xff  string
			want int
		}{
			{"198.51.100.1, 203.0.113.9", 200},
			{"203.0.113.9, 198.51.100.1", 403},
			{"203.0.113.77", 200},
			{"not-an-address", 403},
		} {
			if a := do("xff-authz", map[string]string{"X-Forwarded-For": tc.xff}); a.err != nil || a.status != tc.want {
				t.Errorf("x-forwarded-for %q: got %d %v, want %d", tc.xff, a.status, a.err, tc.want)
			}
		}
	})
}
