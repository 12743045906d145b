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
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/localmesh"
)

// TestAccessLog runs a client and an echo server with sidecars under a
// mesh config with accessLogFile (a path relative to each sidecar, so
// each pod has its own file) and finds, for each request (by its
// x-request-id), the line Istio's default text format gives: 200 via the
// upstream on both sidecars, and the client sidecar's own answers with
// their response flags: NR (no route), UH (no endpoint), URX (retries
// exhausted) over the server sidecar's UF (nothing listens). Then the mesh config switches to JSON and a line parses as
// Istio's JSON format.
func TestAccessLog(t *testing.T) {
	requireMesh(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	meshFile := filepath.Join(t.TempDir(), "mesh.yaml")
	writeMesh := func(t *testing.T, content string) { replaceFile(t, meshFile, content) }
	writeMesh(t, "accessLogFile: ./access.log\n")
	m := startMesh(ctx, t, "accesslog", localmesh.Options{StraitdArgs: []string{"--mesh", meshFile},
		Workloads: []localmesh.Workload{
			{Name: "client", Namespace: "log", ConfigIP: "10.92.0.10"},
			echoPod("echo", "log", "10.92.0.11", "v1"),
		}})
	client, echo := m.Pod("client"), m.Pod("echo")
	hc := client.HTTPClient()
	send := func(t *testing.T, url, id string) int {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Request-Id", id)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	// lineFor waits (the file is flushed every second) for the line of
	// request id in pod's access log.
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
				if strings.Contains(sc.Text(), `"`+id+`"`) {
					line = sc.Text()
					return nil
				}
			}
			return fmt.Errorf("no line with request id %s in %s's access log", id, pod.Name)
		})
		if err != nil {
			t.Fatal(err)
		}
		return line
	}

	for _, tc := range []struct {
		name, url, id string
		code          int
		// want matches the client sidecar's line (Istio's default text
		// format: method, path, protocol, code, flags, details, then the
		// upstream host, cluster and local address: "-" when no upstream
		// connection was made).
		want string
	}{
		{"200 through both sidecars", "http://240.240.10.1/ok", "log-ok", 200,
			`^\[[0-9T:.-]+Z\] "GET /ok HTTP/1\.1" 200 - via_upstream - "-" 0 \d+ \d+ - "-" "Go-http-client/1\.1" "log-ok" "240\.240\.10\.1" "[0-9.]+:8080" outbound\|80\|\|echo\.log\.svc\.cluster\.local [0-9.]+:\d+ 240\.240\.10\.1:80 [0-9.]+:\d+ - `},
		{"NR: no route", "http://240.240.10.1/nope", "log-nr", 404,
			`"GET /nope HTTP/1\.1" 404 NR route_not_found - "-" 0 0 \d+ - .* "-" - - 240\.240\.10\.1:80 `},
		{"UH: no endpoint", "http://240.240.10.2/", "log-uh", 503,
			`"GET / HTTP/1\.1" 503 UH no_healthy_upstream - "-" 0 19 \d+ - .* "-" outbound\|80\|\|empty\.log\.svc\.cluster\.local `},
		// The server sidecar answers 503 UF (below); the client's retries
		// (Istio's default policy retries a 503) run out: URX.
		{"URX: retries exhausted on a 503", "http://240.240.10.3/", "log-uf", 503,
			`"GET / HTTP/1\.1" 503 URX via_upstream - "-" 0 91 \d+ - .* "[0-9.]+:9999" outbound\|80\|\|dead\.log\.svc\.cluster\.local `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if code := send(t, tc.url, tc.id); code != tc.code {
				t.Fatalf("status %d, want %d", code, tc.code)
			}
			line := lineFor(t, client, tc.id)
			if !regexp.MustCompile(tc.want).MatchString(line) {
				t.Errorf("client sidecar's line\n  %s\ndoes not match\n  %s", line, tc.want)
			}
		})
	}

	t.Run("the server sidecar logs the inbound request", func(t *testing.T) {
		line := lineFor(t, echo, "log-ok")
		want := `"GET /ok HTTP/1\.1" 200 - via_upstream .* "log-ok" .* inbound\|8080\|\| `
		if !regexp.MustCompile(want).MatchString(line) {
			t.Errorf("server sidecar's line\n  %s\ndoes not match\n  %s", line, want)
		}
	})

	t.Run("UF: the server sidecar finds nothing listening", func(t *testing.T) {
		line := lineFor(t, echo, "log-uf")
		want := `"GET / HTTP/1\.1" 503 UF upstream_reset_before_response_started\{connection_failure\} - "-" 0 91 \d+ - .* "log-uf" .* inbound\|9999\|\| `
		if !regexp.MustCompile(want).MatchString(line) {
			t.Errorf("server sidecar's line\n  %s\ndoes not match\n  %s", line, want)
		}
	})

	t.Run("JSON encoding", func(t *testing.T) {
		writeMesh(t, "accessLogFile: ./access.log\naccessLogEncoding: JSON\n")
		// The new format applies when the listeners are pushed: send until
		// a line is JSON.
		var got map[string]any
		err := poll(ctx, 30*time.Second, func() error {
			id := fmt.Sprintf("log-json-%d", time.Now().UnixNano())
			send(t, "http://240.240.10.2/", id)
			line := lineFor(t, client, id)
			got = nil
			return json.Unmarshal([]byte(line), &got)
		})
		if err != nil {
			t.Fatalf("no JSON line: %v", err)
		}
		if got["response_code"] != 503.0 || got["response_flags"] != "UH" || got["upstream_cluster"] != "outbound|80||empty.log.svc.cluster.local" ||
			got["method"] != "GET" || got["protocol"] != "HTTP/1.1" || got["requested_server_name"] != nil {
			t.Errorf("JSON line %v", got)
		}
	})
}
