package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/localmesh"
	"github.com/straitmesh/strait/internal/testreq"
)

// TestDestinationRuleMiscThroughSidecars: DestinationRule traffic-policy
// fields (retryBudget, proxyProtocol) checked with real requests from the client pod
// through its sidecar and the server's.
func TestDestinationRuleMiscThroughSidecars(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	workloads := []localmesh.Workload{}
	nginx := nginxBinary()
	if nginx != "" {
		workloads = append(workloads, localmesh.Workload{Name: "pp", Namespace: "demo", ConfigIP: "10.99.0.30",
			App: []string{nginx, "-p", "{{POD_DIR}}", "-c", "{{POD_DIR}}/nginx.conf"}, AppPort: 8081,
			ExcludeInboundPorts: []int{8081},
			Files: map[string]string{"nginx.conf": `daemon off;
master_process off;
worker_processes 1;
pid {{POD_DIR}}/nginx.pid;
error_log {{POD_DIR}}/error.log info;
events { worker_connections 64; }
http {
	access_log off;
	client_body_temp_path {{POD_DIR}}/nginx-body;
	proxy_temp_path {{POD_DIR}}/nginx-proxy;
	fastcgi_temp_path {{POD_DIR}}/nginx-fastcgi;
	uwsgi_temp_path {{POD_DIR}}/nginx-uwsgi;
	scgi_temp_path {{POD_DIR}}/nginx-scgi;
	server {
		listen 8081 proxy_protocol;
		location / { return 200 "$proxy_protocol_addr $proxy_protocol_server_addr $proxy_protocol_server_port"; }
	}
}
`}})
	}
	m := startMesh(ctx, t, "drmisc", localmesh.Options{
		Workloads: append(workloads, []localmesh.Workload{
			{Name: "client", Namespace: "demo", ConfigIP: "10.99.0.10"},
			echoPod("echo-v1", "demo", "10.99.0.11", "v1"),
		}...),
	})
	client := m.Pod("client")
	hc := client.NewHTTPClient(true)
	defer hc.CloseIdleConnections()

	// apply writes a DestinationRule for echo with policy and waits until
	// the client's proxy has a cluster config that contains want.
	applyFor := func(t *testing.T, host, policy string, want string) {
		t.Helper()
		rule := fmt.Appendf(nil, `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: %[1]s, namespace: demo}
spec:
  host: %[1]s.demo.svc.cluster.local
  trafficPolicy:
%[2]s
`, host, indent(policy, 4))
		writeConfig(t, m, host+"-rules.yaml", rule)
		waitDump(ctx, t, client, quote(want)...)
	}
	apply := func(t *testing.T, policy string, want string) {
		t.Helper()
		applyFor(t, "echo", policy, want)
	}
	retryOverflow := func(t *testing.T) int {
		t.Helper()
		stats, err := client.Admin(ctx, "/stats")
		if err != nil {
			t.Fatal(err)
		}
		mt := regexp.MustCompile(`cluster\.outbound\|80\|\|echo\.demo\.svc\.cluster\.local\.upstream_rq_retry_overflow: (\d+)`).FindSubmatch(stats)
		if mt == nil {
			return 0
		}
		n, _ := strconv.Atoi(string(mt[1]))
		return n
	}
	// burst sends n concurrent requests that each fail once (503) and
	// take delay per answer, so that their retries overlap, and returns
	// how many ended 200.
	burst := func(t *testing.T, n int, delay string) int {
		t.Helper()
		var wg sync.WaitGroup
		ok := make([]bool, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := get(t, ctx, hc, "http://240.240.0.10/", http.Header{
					"X-Echo-Fail": {"1"}, "X-Echo-Key": {fmt.Sprintf("%s-%d", t.Name(), i)}, "X-Echo-Delay": {delay}})
				ok[i] = r.status == 200
			}()
		}
		wg.Wait()
		good := 0
		for _, g := range ok {
			if g {
				good++
			}
		}
		return good
	}

	t.Run("without a retry budget every request is retried", func(t *testing.T) {
		apply(t, `loadBalancer: {simple: RANDOM}`, `"RANDOM"`)
		if good := burst(t, 6, "500ms"); good != 6 {
			t.Errorf("%d of 6 requests that fail once succeeded, want 6 (max_retries is unlimited)", good)
		}
	})

	t.Run("retry budget bounds concurrent retries", func(t *testing.T) {
		before := retryOverflow(t)
		// 1 % of 6 active requests is 0: the minimum, one retry at a
		// time.
		apply(t, `retryBudget: {percent: 1, minRetryConcurrency: 1}`, `"retryBudget"`)
		good := burst(t, 6, "1s")
		if good < 1 || good > 2 {
			t.Errorf("%d of 6 requests that fail once succeeded, want 1 (one retry in flight at a time; 2 if the first retry ended before a late first answer)", good)
		}
		if over := retryOverflow(t) - before; over < 4 {
			t.Errorf("upstream_rq_retry_overflow grew by %d, want at least 4", over)
		}
	})

	t.Run("proxy protocol announces the client to the upstream", func(t *testing.T) {
		if nginx == "" {
			testreq.Missing(t, "nginx not installed (apt-get install nginx-light)")
		}
		// tls DISABLE: the PROXY header goes to nginx itself, on a port
		// the pod's sidecar does not capture, in plaintext.
		applyFor(t, "pp", `tls: {mode: DISABLE}
proxyProtocol: {version: V1}`, `ProxyProtocolUpstreamTransport`)
		for _, v := range []string{"V1", "V2"} {
			if v == "V2" {
				applyFor(t, "pp", `tls: {mode: DISABLE}
proxyProtocol: {version: V2}`, `"V2"`)
			}
			r := send(ctx, hc, http.MethodGet, "http://240.240.0.30/", "", nil)
			if r.err != nil {
				t.Fatalf("%s: %v", v, r.err)
			}
			want := client.IP + " 240.240.0.30 80"
			if r.status != 200 || string(r.body) != want {
				t.Errorf("%s: %d %q, want nginx to have read %q from the PROXY header", v, r.status, r.body, want)
			}
		}
	})
}

// nginxBinary is nginx's path, or "" when it is not installed.
func nginxBinary() string {
	if _, err := os.Stat("/usr/sbin/nginx"); err == nil {
		return "/usr/sbin/nginx"
	}
	p, _ := exec.LookPath("nginx")
	return p
}
