package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/localmesh"
	"github.com/straitmesh/strait/internal/testreq"
)

// nginxConf runs nginx unprivileged-friendly inside a pod directory,
// logging the client address of every request.
const nginxConf = `worker_processes 1;
pid {{POD_DIR}}/nginx.pid;
error_log {{POD_DIR}}/nginx-error.log;
events {}
http {
  log_format remote '$remote_addr $request';
  access_log {{POD_DIR}}/access.log remote;
  client_body_temp_path {{POD_DIR}}/tmp-body;
  proxy_temp_path {{POD_DIR}}/tmp-proxy;
  fastcgi_temp_path {{POD_DIR}}/tmp-fastcgi;
  uwsgi_temp_path {{POD_DIR}}/tmp-uwsgi;
  scgi_temp_path {{POD_DIR}}/tmp-scgi;
  server {
    listen 8080;
    location / { return 200 "nginx saw $remote_addr\n"; }
  }
}
`

// TestClientAddressSeenByApp puts nginx behind the mesh and checks its
// access log: in REDIRECT mode requests arrive from 127.0.0.6 (the inbound
// passthrough address), in TPROXY mode from the client pod itself.
func TestClientAddressSeenByApp(t *testing.T) {
	nginx := testreq.Binary(t, "nginx", "nginx-light", "/usr/sbin/nginx")
	for _, mode := range []string{"REDIRECT", "TPROXY"} {
		t.Run(mode, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			m := startMesh(ctx, t, "clientip", localmesh.Options{
				InterceptionMode: mode,
				Workloads: []localmesh.Workload{
					{Name: "client", Namespace: "demo", ConfigIP: "10.99.0.10"},
					{Name: "web", Namespace: "demo", ConfigIP: "10.99.0.21",
						App:   []string{nginx, "-c", "{{POD_DIR}}/nginx.conf", "-g", "daemon off;"},
						Files: map[string]string{"nginx.conf": nginxConf}, AppPort: 8080},
				},
			})
			client, web := m.Pod("client"), m.Pod("web")
			want := "127.0.0.6"
			if mode == "TPROXY" {
				want = client.IP
			}
			httpc := client.HTTPClient()
			defer httpc.CloseIdleConnections()
			for i := range 5 {
				resp, err := httpc.Get("http://240.240.0.20/hello")
				if err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != "nginx saw "+want {
					t.Fatalf("request %d: %d %q, want 200 %q", i, resp.StatusCode, body, "nginx saw "+want)
				}
			}
			// nginx writes the log line after sending the response: wait
			// (bounded) for the fifth.
			var lines []string
			waitFor(ctx, t, 5*time.Second, "nginx access log", func() error {
				data, err := os.ReadFile(filepath.Join(web.Dir(), "access.log"))
				if err != nil && !os.IsNotExist(err) {
					t.Fatal(err)
				}
				lines = nil
				if s := strings.TrimSpace(string(data)); s != "" {
					lines = strings.Split(s, "\n")
				}
				if len(lines) < 5 {
					return fmt.Errorf("nginx logged %d requests, want 5:\n%s", len(lines), data)
				}
				return nil
			})
			for _, line := range lines {
				if !strings.HasPrefix(line, want+" GET /hello") {
					t.Errorf("nginx access log line %q, want the client address %s", line, want)
				}
			}
		})
	}
}
