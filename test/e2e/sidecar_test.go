package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/localmesh"
)

const (
	sidecarDBAddr  = "240.240.9.1:9000"
	sidecarWebURL  = "http://240.240.9.2/"
	sidecarWebHost = "web.side.svc.cluster.local"
	sidecarAltURL  = "http://240.240.9.3/"
	sidecarAltHost = "alt.side.svc.cluster.local"
)

// egressSidecar gives the first client egress listeners with ports: 80
// for web only (alt, also on 80, is not in its routes; REGISTRY_ONLY makes
// that a 502), 8080 bound by the proxy on 127.0.0.1 (captureMode NONE),
// TCP 7000 bound on 127.0.0.2 to db, and the catch-all for the rest.
const egressSidecar = `apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: client, namespace: side}
spec:
  workloadSelector: {labels: {app: client}}
  outboundTrafficPolicy: {mode: REGISTRY_ONLY}
  egress:
  - port: {number: 80, protocol: HTTP, name: http}
    hosts: [./web.side.svc.cluster.local]
  - port: {number: 8080, protocol: HTTP, name: http-local}
    captureMode: NONE
    hosts: [./web.side.svc.cluster.local]
  - port: {number: 7000, protocol: TCP, name: tcp-local}
    bind: 127.0.0.2
    captureMode: NONE
    hosts: [./db.side.svc.cluster.local]
  - hosts: ["./*"]
`

// inboundPoolSidecar limits the web pod's inbound clusters to one
// connection and one pending request; idleTimeout 37s marks it in the
// config dump.
const inboundPoolSidecar = `apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: web, namespace: side}
spec:
  workloadSelector: {labels: {app: web}}
  inboundConnectionPool:
    tcp: {maxConnections: 1}
    http: {http1MaxPendingRequests: 1, idleTimeout: 37s}
`

// ingressSidecar gives web ingress listeners: 9080 to the app's loopback
// with a generous connection pool of its own, 9081 to the app on the
// pod's address under the Sidecar's tight inboundConnectionPool, and 9090
// (excluded from web's inbound capture) on a listener the proxy binds on
// web's address (captureMode NONE); idle timeout 41s marks it in the
// config dump.
const ingressSidecar = `apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: web, namespace: side}
spec:
  workloadSelector: {labels: {app: web}}
  inboundConnectionPool:
    tcp: {maxConnections: 1}
    http: {http1MaxPendingRequests: 1}
  ingress:
  - port: {number: 9080, protocol: HTTP, name: http}
    defaultEndpoint: 127.0.0.1:8080
    connectionPool:
      tcp: {maxConnections: 100}
      http: {http1MaxPendingRequests: 100, idleTimeout: 41s}
  - port: {number: 9081, protocol: HTTP, name: http-own}
    defaultEndpoint: 0.0.0.0:8080
  - port: {number: 9090, protocol: HTTP, name: http-direct}
    captureMode: NONE
    defaultEndpoint: 127.0.0.1:8080
`

// TestSidecarThroughSidecars runs the Sidecar resource's fields and the
// tcp sourceSubnet match through real sidecars, with the config of
// testdata/sidecar: one mesh, one subtest per field.
func TestSidecarThroughSidecars(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	// web's 9090 is left out of its inbound capture: the Sidecar's
	// captureMode NONE ingress listener binds it.
	webWorkload := echoPod("web", "side", "10.93.0.31", "web")
	webWorkload.ExcludeInboundPorts = []int{9090}
	m := startMesh(ctx, t, "sidecar", localmesh.Options{
		Workloads: []localmesh.Workload{
			{Name: "client", Namespace: "side", ConfigIP: "10.93.0.10"},
			{Name: "client2", Namespace: "side", ConfigIP: "10.93.0.13"},
			{Name: "l4-a", Namespace: "side", ConfigIP: "10.93.0.21", App: []string{self, "-l4-serve", "a"}, AppPort: 9000},
			{Name: "l4-b", Namespace: "side", ConfigIP: "10.93.0.22", App: []string{self, "-l4-serve", "b"}, AppPort: 9000},
			webWorkload,
		},
	})
	client, client2, web := m.Pod("client"), m.Pod("client2"), m.Pod("web")

	// dbName dials db's VIP from p and returns the name of the L4 server
	// that answered.
	dbName := func(p *localmesh.Pod) (string, error) {
		c, err := p.DialContext(ctx, "tcp", sidecarDBAddr)
		if err != nil {
			return "", err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		return strings.TrimSpace(line), err
	}
	// applyTo writes a config file and waits until p's config dump holds
	// every want.
	applyTo := func(t *testing.T, p *localmesh.Pod, name string, data []byte, want ...string) {
		t.Helper()
		writeConfig(t, m, name, data)
		waitDump(ctx, t, p, quote(want...)...)
	}

	t.Run("tcp sourceSubnet", func(t *testing.T) {
		// The first push carries the route; wait for it on the client.
		waitFor(ctx, t, applyTimeout, "client never reached subset b", func() error {
			name, err := dbName(client)
			if err != nil {
				return err
			}
			if name != "b" {
				return fmt.Errorf("last answer %q", name)
			}
			return nil
		})
		for _, tc := range []struct {
			pod  *localmesh.Pod
			want string
		}{{client, "b"}, {client2, "a"}} {
			for range 20 {
				name, err := dbName(tc.pod)
				if err != nil || name != tc.want {
					t.Fatalf("%s (%s) reached %q, %v; want %s", tc.pod.Name, tc.pod.IP, name, err, tc.want)
				}
			}
		}
	})

	t.Run("egress port, bind and captureMode", func(t *testing.T) {
		if status, reply, err := request(ctx, client, sidecarAltURL, sidecarAltHost); err != nil || status != 200 || reply.Pod != "web" {
			t.Fatalf("alt before the Sidecar: status %d, pod %q, error %v; want 200 from web", status, reply.Pod, err)
		}
		if _, _, err := request(ctx, client, "http://127.0.0.1:8080/", sidecarWebHost+":8080"); err == nil {
			t.Fatalf("127.0.0.1:8080 answered in the client pod before the Sidecar bound it")
		}
		applyTo(t, client, "sidecar-client.yaml", []byte(egressSidecar), `"127.0.0.2"`, `"127.0.0.1_8080"`)

		// Port 80 reaches the listed host only.
		if status, reply, err := request(ctx, client, sidecarWebURL, sidecarWebHost); err != nil || status != 200 || reply.Pod != "web" {
			t.Errorf("web on the port 80 egress listener: status %d, pod %q, error %v; want 200 from web", status, reply.Pod, err)
		}
		// The listeners (LDS) above carry the markers; port 80's routes
		// (RDS) follow them.
		waitFor(ctx, t, applyTimeout, "alt, not a host of the port 80 egress listener", func() error {
			if r := podGet(ctx, client, sidecarAltURL, sidecarAltHost); r.err != nil || r.status != http.StatusBadGateway {
				return fmt.Errorf("last answer %s; want 502 (REGISTRY_ONLY)", r)
			}
			return nil
		})
		// captureMode NONE: the app calls the proxy's own listener on
		// 127.0.0.1:8080, which routes to web's port 8080.
		if status, reply, err := request(ctx, client, "http://127.0.0.1:8080/", sidecarWebHost+":8080"); err != nil || status != 200 || reply.Pod != "web" {
			t.Errorf("127.0.0.1:8080 (captureMode NONE): status %d, pod %q, error %v; want 200 from web", status, reply.Pod, err)
		}
		// bind: the TCP listener is on 127.0.0.2:7000 and goes to db's
		// only port. From a loopback source the sourceSubnet rule does
		// not match: subset a.
		c, err := client.DialContext(ctx, "tcp", "127.0.0.2:7000")
		if err != nil {
			t.Fatalf("dial 127.0.0.2:7000 (bind): %v", err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if err != nil || strings.TrimSpace(line) != "a" {
			t.Errorf("127.0.0.2:7000 answered %q, %v; want db's subset a", line, err)
		}
		// The catch-all listener still carries db on its own port.
		if name, err := dbName(client); err != nil || name != "b" {
			t.Errorf("db through the catch-all listener: %q, %v; want b", name, err)
		}
	})

	// burst sends six concurrent requests that the app answers after a
	// second, from p to url, and counts the answers: served by web,
	// overflowed (503 x-envoy-overloaded), other statuses.
	burst := func(t *testing.T, p *localmesh.Pod, url string) (ok, over int, other []string) {
		const n = 6
		var wg sync.WaitGroup
		results := make([]reply, n)
		for i := range n {
			wg.Go(func() {
				c := p.NewHTTPClient(false)
				defer c.CloseIdleConnections()
				results[i] = get(t, ctx, c, url, http.Header{"X-Echo-Delay": {"1s"}})
			})
		}
		wg.Wait()
		for _, r := range results {
			switch {
			case r.status == 200 && r.version == "web":
				ok++
			case r.status == 503 && r.header.Get("X-Envoy-Overloaded") == "true":
				over++
			default:
				other = append(other, fmt.Sprint(r.status))
			}
		}
		return ok, over, other
	}

	t.Run("inboundConnectionPool", func(t *testing.T) {
		// Without the Sidecar nothing limits the inbound side: all six
		// concurrent requests are served.
		if ok, over, other := burst(t, client, sidecarWebURL); ok != 6 {
			t.Fatalf("without inboundConnectionPool: %d served, %d overflowed, others %v; want all 6 served", ok, over, other)
		}
		applyTo(t, web, "sidecar-web.yaml", []byte(inboundPoolSidecar), `"37s"`)
		ok, over, other := burst(t, client, sidecarWebURL)
		// One connection and one pending request on web's inbound
		// cluster: at least two are served, and of six sent at once the
		// others overflow there.
		if ok < 2 || over < 2 || len(other) > 0 {
			t.Errorf("with inboundConnectionPool: %d served, %d overflowed (503 x-envoy-overloaded), others %v", ok, over, other)
		}
		stats, err := web.Admin(ctx, "/stats")
		if err != nil {
			t.Fatal(err)
		}
		line := "cluster.inbound|8080||.upstream_rq_pending_overflow: "
		if !bytes.Contains(stats, []byte(line)) || bytes.Contains(stats, []byte(line+"0\n")) {
			t.Errorf("web's inbound cluster counted no pending overflow:\n%s", grep(stats, "overflow"))
		}
	})

	t.Run("ingress listeners", func(t *testing.T) {
		// client2 has no Sidecar (ALLOW_ANY): it reaches web's address on
		// any port, where web's sidecar decides.
		ownURL := "http://" + web.IP + ":9081/"
		for _, port := range []string{"9080", "9090"} {
			if status, _, err := request(ctx, client2, "http://"+web.IP+":"+port+"/", ""); err == nil && status == 200 {
				t.Fatalf("web answered on %s before its ingress listener existed", port)
			}
		}
		applyTo(t, web, "sidecar-web.yaml", []byte(ingressSidecar), `"41s"`)
		for _, tc := range []struct {
			url, remote string
		}{
			// 127.0.0.1:8080: the app sees the proxy on loopback.
			{"http://" + web.IP + ":9080/", "127.0.0.1"},
			// 0.0.0.0:8080: the app on its own address, from 127.0.0.6.
			{ownURL, "127.0.0.6"},
			// captureMode NONE: 9090 is not captured; the proxy's own
			// listener on web's address serves it.
			{"http://" + web.IP + ":9090/", "127.0.0.1"},
		} {
			r := podGet(ctx, client2, tc.url, "")
			if r.err != nil || r.status != 200 || r.version != "web" || !strings.HasPrefix(r.remote, tc.remote+":") {
				t.Errorf("%s: %s, app saw remote %q; want 200 from web, remote %s", tc.url, r, r.remote, tc.remote)
			}
		}
		// 9080's own connectionPool replaces the Sidecar's: all six
		// served; 9081 has the Sidecar's 1 connection + 1 pending.
		if ok, over, other := burst(t, client2, "http://"+web.IP+":9080/"); ok != 6 {
			t.Errorf("9080 (ingress connectionPool 100): %d served, %d overflowed, others %v; want all 6 served", ok, over, other)
		}
		if ok, over, other := burst(t, client2, ownURL); ok < 2 || over < 2 || len(other) > 0 {
			t.Errorf("9081 (inboundConnectionPool 1 + 1): %d served, %d overflowed, others %v; want overflows", ok, over, other)
		}
	})
}
