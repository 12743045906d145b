package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/localmesh"
)

// TestTelemetryAPIAccessLog: with no accessLogFile in the mesh config, a
// namespace Telemetry naming an envoyFileAccessLog extension provider
// (JSON labels, a path relative to each sidecar) with match mode SERVER
// makes the server sidecar log each request there and the client sidecar
// not; switching the Telemetry to CLIENT is pushed and swaps them.
func TestTelemetryAPIAccessLog(t *testing.T) {
	requireMesh(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	meshFile := filepath.Join(t.TempDir(), "mesh.yaml")
	replaceFile(t, meshFile, `extensionProviders:
- name: json-file
  envoyFileAccessLog:
    path: ./telemetry.log
    logFormat: {labels: {id: "%REQ(X-REQUEST-ID)%", code: "%RESPONSE_CODE%"}}
`)
	m := startMesh(ctx, t, "accesslog", localmesh.Options{StraitdArgs: []string{"--mesh", meshFile},
		Workloads: []localmesh.Workload{
			{Name: "client", Namespace: "log", ConfigIP: "10.92.0.10"},
			echoPod("echo", "log", "10.92.0.11", "v1"),
		}})
	client, echo := m.Pod("client"), m.Pod("echo")
	hc := client.HTTPClient()
	get := func(id string) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://240.240.10.1/ok", nil)
		if err != nil {
			return err
		}
		req.Header.Set("X-Request-Id", id)
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
	// logged reports whether pod's telemetry.log has request id's line,
	// checking that it is the provider's JSON.
	logged := func(pod *localmesh.Pod, id string) (bool, error) {
		f, err := os.Open(filepath.Join(pod.Dir(), "telemetry.log"))
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var rec map[string]any
			if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
				return false, fmt.Errorf("%s's line %q is not JSON: %w", pod.Name, sc.Text(), err)
			}
			if rec["id"] == id {
				if rec["code"] != float64(200) && rec["code"] != "200" {
					return false, fmt.Errorf("%s's line %q: code %v", pod.Name, sc.Text(), rec["code"])
				}
				return true, nil
			}
		}
		return false, sc.Err()
	}
	writeTelemetry := func(mode string) {
		t.Helper()
		if err := m.WriteConfig("telemetry.yaml", fmt.Appendf(nil, `apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: logs, namespace: log}
spec:
  accessLogging:
  - providers: [{name: json-file}]
    match: {mode: %s}
`, mode)); err != nil {
			t.Fatal(err)
		}
	}
	// expect waits until a request is logged by on and not by off: the
	// request after it, sent two flush intervals (1 s) later and logged
	// by on, is the barrier for off's line.
	expect := func(on, off *localmesh.Pod) {
		t.Helper()
		round := 0
		err := poll(ctx, 60*time.Second, func() error {
			round++
			first, second := fmt.Sprintf("%s-%d-a", on.Name, round), fmt.Sprintf("%s-%d-b", on.Name, round)
			if err := get(first); err != nil {
				return err
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(2 * time.Second):
			}
			if err := get(second); err != nil {
				return err
			}
			if err := poll(ctx, 10*time.Second, func() error {
				for _, id := range []string{first, second} {
					ok, err := logged(on, id)
					if err != nil {
						return err
					}
					if !ok {
						return fmt.Errorf("%s has not logged %s", on.Name, id)
					}
				}
				return nil
			}); err != nil {
				return err
			}
			ok, err := logged(off, first)
			if err != nil {
				return err
			}
			if ok {
				return fmt.Errorf("round %d: %s logged %s too", round, off.Name, first)
			}
			t.Logf("%s logs, %s does not, after %d round(s)", on.Name, off.Name, round)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	writeTelemetry("SERVER")
	expect(echo, client)
	writeTelemetry("CLIENT")
	expect(client, echo)
}
