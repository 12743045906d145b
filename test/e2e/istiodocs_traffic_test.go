package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"sigs.k8s.io/yaml"

	"github.com/straitmesh/strait/internal/localmesh"
	"github.com/straitmesh/strait/internal/testreq"
)

// TestIstioDocsTrafficTasks applies the YAML of istio.io's
// traffic-management tasks as the tasks print it (testdata/
// istiodocs-traffic/tasks: short host names, no namespace, so default) to
// the services the tasks use, each pod a strait-echo behind a sidecar, and
// checks from sleep's sidecar what the tasks document: request routing,
// fault injection, traffic shifting, TCP traffic shifting, request
// timeouts (over the chain sleep → reviews → ratings), circuit breaking,
// mirroring, egress TLS origination, the Sidecar reference's mesh-wide
// default, and straitctl proxy-status. Locality failover and distribute,
// and the egress policies, are TestLocalityThroughSidecars' and
// TestEgressThroughSidecars'; the tasks' files of those only go through
// straitctl validate (TestIstioDocsTrafficTasksValidate).
func TestIstioDocsTrafficTasks(t *testing.T) {
	requireMesh(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	_, file, _, _ := runtime.Caller(0)
	tasks := filepath.Join(filepath.Dir(file), "testdata", "istiodocs-traffic", "tasks")

	m := startMesh(ctx, t, "istiodocs-traffic", localmesh.Options{Workloads: []localmesh.Workload{
		{Name: "sleep", Namespace: "default", ConfigIP: "10.99.0.10"},
		echoPod("reviews-v1", "default", "10.99.0.11", "v1"),
		echoPod("reviews-v2", "default", "10.99.0.12", "v2"),
		echoPod("reviews-v3", "default", "10.99.0.13", "v3"),
		echoPod("ratings-v1", "default", "10.99.0.14", "v1"),
		echoPod("httpbin-v1", "default", "10.99.0.21", "v1"),
		echoPod("httpbin-v2", "default", "10.99.0.22", "v2"),
		echoPod("tcp-echo-v1", "default", "10.99.0.31", "v1"),
		echoPod("tcp-echo-v2", "default", "10.99.0.32", "v2"),
	}})
	sleep := m.Pod("sleep")
	const (
		reviews = "http://240.240.1.1:9080/"
		ratings = "http://240.240.1.2:9080/"
		httpbin = "http://240.240.1.3:8000/"
		tcpEcho = "http://240.240.1.4:9000/"
	)

	// apply does what `kubectl apply -f TASKFILE` does: every document of
	// the task's file replaces the object of its kind and name (one file
	// per object in the config directory).
	apply := func(t *testing.T, task string) {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(tasks, task))
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range strings.Split(string(data), "\n---\n") {
			var obj struct {
				Kind     string
				Metadata struct{ Name, Namespace string }
			}
			if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
				t.Fatalf("%s: %v", task, err)
			}
			if obj.Kind == "" {
				continue
			}
			name := strings.ToLower(obj.Kind) + "-" + obj.Metadata.Name + ".yaml"
			if err := m.WriteConfig(name, []byte(doc+"\n")); err != nil {
				t.Fatal(err)
			}
		}
	}
	// until polls probe until it holds.
	until := func(t *testing.T, what string, probe func() error) {
		t.Helper()
		waitFor(ctx, t, applyTimeout, what, probe)
	}
	hc := sleep.NewHTTPClient(false)
	defer hc.CloseIdleConnections()
	call := func(url, host string, h http.Header) reply {
		return send(ctx, hc, http.MethodGet, url, host, h)
	}
	jason := http.Header{"End-User": {"jason"}}
	// versions sends n requests and counts the versions that answered 200.
	versions := func(url, host string, h http.Header, n int) (map[string]int, error) {
		seen := map[string]int{}
		for range n {
			r := call(url, host, h)
			if r.err != nil || r.status != 200 {
				return seen, fmt.Errorf("%s: %s", host, r)
			}
			seen[r.version]++
		}
		return seen, nil
	}
	only := func(url, host string, h http.Header, version string) func() error {
		return func() error {
			seen, err := versions(url, host, h, 10)
			if err != nil {
				return err
			}
			if seen[version] != 10 {
				return fmt.Errorf("%s %v: versions %v, want only %s", host, h, seen, version)
			}
			return nil
		}
	}

	t.Run("request routing", func(t *testing.T) {
		apply(t, "01-destination-rule-all.yaml")
		apply(t, "02-virtual-service-all-v1.yaml")
		until(t, "reviews all v1", only(reviews, "reviews:9080", nil, "v1"))
		until(t, "reviews all v1 for jason", only(reviews, "reviews", jason, "v1"))
		apply(t, "03-reviews-test-v2.yaml")
		until(t, "jason to v2", only(reviews, "reviews:9080", jason, "v2"))
		until(t, "others to v1", only(reviews, "reviews.default.svc.cluster.local:9080", nil, "v1"))
	})

	t.Run("fault injection", func(t *testing.T) {
		apply(t, "05-ratings-test-abort.yaml")
		until(t, "jason aborted with 500", func() error {
			r := call(ratings, "ratings:9080", jason)
			if r.status != 500 || r.version != "" || string(r.body) != "fault filter abort" {
				return fmt.Errorf("jason: %s, want 500 \"fault filter abort\" from the sidecar", r)
			}
			return nil
		})
		if r := call(ratings, "ratings:9080", nil); r.status != 200 || r.version != "v1" {
			t.Errorf("without end-user: %s, want 200 from v1", r)
		}
		// As the task shows it: jason's page (reviews v2, by the request
		// routing task's rule) gets the 500 from its call to ratings, which
		// passes the end-user header on; others' calls are answered.
		for _, tc := range []struct {
			h                 http.Header
			version           string
			callStatus        int
			callVersion, user string
		}{
			{http.Header{"End-User": {"jason"}, "X-Echo-Call": {ratings}}, "v2", 500, "", "jason"},
			{http.Header{"X-Echo-Call": {ratings}}, "v1", 200, "v1", ""},
		} {
			r := call(reviews, "reviews:9080", tc.h)
			var c struct {
				Call struct {
					Status  int
					Version string
				}
			}
			if r.status != 200 || r.version != tc.version || json.Unmarshal(r.body, &c) != nil || c.Call.Status != tc.callStatus || c.Call.Version != tc.callVersion {
				t.Errorf("reviews for %q: %s %s, want %s whose call to ratings got %d", tc.user, r, r.body, tc.version, tc.callStatus)
			}
		}
		// Istio: an abort without percentage aborts no request.
		apply(t, "18-abort-nopct.yaml")
		waitDump(ctx, t, sleep, `"httpStatus":\s*418`)
		if r := call(ratings, "ratings:9080", nil); r.status != 200 || r.version != "v1" {
			t.Errorf("abort without percentage: %s, want 200 from v1", r)
		}
		apply(t, "04-ratings-test-delay.yaml")
		waitDump(ctx, t, sleep, `"fixedDelay":\s*"7s"`)
		if r := call(ratings, "ratings:9080", nil); r.status != 200 || r.version != "v1" {
			t.Errorf("without end-user: %s, want 200 from v1", r)
		}
		slow := sleep.NewHTTPClient(false)
		slow.Timeout = 20 * time.Second
		start := time.Now()
		r := send(ctx, slow, http.MethodGet, ratings, "ratings:9080", jason)
		if took := time.Since(start); r.status != 200 || r.version != "v1" || took < 7*time.Second {
			t.Errorf("jason: %s after %v, want 200 from v1 after the 7s delay", r, took)
		}
	})

	t.Run("traffic shifting", func(t *testing.T) {
		apply(t, "06-reviews-50-v3.yaml")
		until(t, "v1 and v3 only", func() error {
			seen, err := versions(reviews, "reviews:9080", nil, 200)
			if err != nil {
				return err
			}
			if seen["v2"] > 0 || seen["v1"] < 70 || seen["v3"] < 70 {
				return fmt.Errorf("versions %v of 200, want about 100 each of v1 and v3", seen)
			}
			return nil
		})
	})

	t.Run("tcp traffic shifting", func(t *testing.T) {
		apply(t, "07-tcp-echo-all-v1.yaml")
		c := sleep.NewHTTPClient(false)
		defer c.CloseIdleConnections()
		seen := map[string]int{}
		for range 100 {
			r := send(ctx, c, http.MethodGet, tcpEcho, "", nil)
			if r.err != nil || r.status != 200 {
				t.Fatalf("tcp-echo: %s", r)
			}
			seen[r.version]++
		}
		// The task's first VirtualService is bound to its gateway only:
		// sleep's sidecar keeps balancing over both versions.
		if seen["v1"] < 20 || seen["v2"] < 20 {
			t.Errorf("with the gateway-bound VirtualService: versions %v of 100, want both", seen)
		}
		apply(t, "08-tcp-echo-20-v2-mesh.yaml")
		until(t, "80/20", func() error {
			seen := map[string]int{}
			for range 200 {
				r := send(ctx, c, http.MethodGet, tcpEcho, "", nil)
				if r.err != nil || r.status != 200 {
					return fmt.Errorf("tcp-echo: %s", r)
				}
				seen[r.version]++
			}
			if seen["v2"] < 20 || seen["v2"] > 65 {
				return fmt.Errorf("versions %v of 200, want about 160 v1 and 40 v2", seen)
			}
			return nil
		})
	})

	t.Run("request timeouts", func(t *testing.T) {
		slow := sleep.NewHTTPClient(false)
		slow.Timeout = 20 * time.Second
		// The task's chain: sleep calls reviews v2, whose app calls
		// ratings (strait-echo's x-echo-call stands in for bookinfo's
		// code), through reviews' own sidecar.
		chain := http.Header{"X-Echo-Call": {ratings}}
		type chained struct {
			Call struct {
				Status  int
				Version string
				Error   string
			}
		}
		apply(t, "09a-reviews-v2.yaml")
		until(t, "reviews v2 calls ratings", func() error {
			r := send(ctx, slow, http.MethodGet, reviews, "reviews:9080", chain)
			var c chained
			if r.status != 200 || r.version != "v2" || json.Unmarshal(r.body, &c) != nil || c.Call.Status != 200 || c.Call.Version != "v1" {
				return fmt.Errorf("reviews: %s %s, want v2 whose call to ratings v1 answered 200", r, r.body)
			}
			return nil
		})
		// ratings delayed by 2s: the page is slow but whole.
		apply(t, "09b-ratings-delay-2s.yaml")
		until(t, "ratings delayed", func() error {
			start := time.Now()
			r := send(ctx, slow, http.MethodGet, reviews, "reviews:9080", chain)
			var c chained
			if took := time.Since(start); r.status != 200 || json.Unmarshal(r.body, &c) != nil || c.Call.Status != 200 || took < 2*time.Second {
				return fmt.Errorf("reviews: %s after %v, want 200 after ratings' 2s delay", r, took)
			}
			return nil
		})
		// The 0.5s timeout on reviews: sleep's sidecar gives up on reviews
		// while reviews waits for ratings.
		apply(t, "09c-reviews-timeout.yaml")
		until(t, "reviews times out", func() error {
			r := send(ctx, slow, http.MethodGet, reviews, "reviews:9080", chain)
			if r.status != 504 || string(r.body) != "upstream request timeout" {
				return fmt.Errorf("reviews: %s %q, want 504 upstream request timeout (the 0.5s timeout, not ratings' 2s)", r, r.body)
			}
			return nil
		})
		// A delay and a timeout on one rule: Envoy's router starts the
		// route's timeout when the fault filter lets the request through,
		// so the delay does not count against it.
		apply(t, "17-delay-timeout.yaml")
		until(t, "3s delay", func() error {
			start := time.Now()
			r := send(ctx, slow, http.MethodGet, ratings, "ratings:9080", nil)
			if took := time.Since(start); r.status != 200 || took < 3*time.Second {
				return fmt.Errorf("ratings: %s after %v, want 200 after the 3s delay past the 1s timeout", r, took)
			}
			return nil
		})
	})

	t.Run("circuit breaking", func(t *testing.T) {
		apply(t, "10-circuit-breaker.yaml")
		waitDump(ctx, t, sleep, `"maxConnections":\s*1[,\s}]`)
		const n = 20
		var wg sync.WaitGroup
		results := make([]reply, n)
		for i := range n {
			wg.Go(func() {
				c := sleep.NewHTTPClient(false)
				defer c.CloseIdleConnections()
				results[i] = send(ctx, c, http.MethodGet, httpbin, "httpbin:8000", http.Header{"X-Echo-Delay": {"300ms"}})
			})
		}
		wg.Wait()
		ok, over := 0, 0
		for _, r := range results {
			switch {
			case r.status == 200:
				ok++
			case r.status == 503 && r.header.Get("X-Envoy-Overloaded") == "true":
				over++
			default:
				t.Errorf("%s, headers %v", r, r.header)
			}
		}
		// One connection and one pending request: of twenty sent at once,
		// the one in flight and the one waiting are served (a late one may
		// find a slot free again), the rest overflow.
		if ok < 2 || over < 10 || ok+over != n {
			t.Errorf("%d served, %d overflowed with x-envoy-overloaded of %d concurrent requests", ok, over, n)
		}
		// The task reads the overflow in the client proxy's stats.
		stats, err := sleep.Admin(ctx, "/stats")
		if err != nil {
			t.Fatal(err)
		}
		overflow := fmt.Sprintf("cluster.outbound|8000||httpbin.default.svc.cluster.local.upstream_rq_pending_overflow: %d\n", over)
		if !bytes.Contains(stats, []byte(overflow)) {
			t.Errorf("stats lack %q:\n%s", overflow, grep(stats, "httpbin.default.svc.cluster.local.upstream_rq_pending"))
		}
		// The overflows are the client proxy's own answers, not the
		// host's: outlier detection (consecutive5xxErrors 1) must not eject
		// the hosts for them.
		seen, err := versions(httpbin, "httpbin:8000", nil, 10)
		if err != nil || seen["v1"] == 0 || seen["v2"] == 0 {
			t.Errorf("after the overflows: %v %v, want 200 from both hosts", seen, err)
		}
	})

	t.Run("mirroring", func(t *testing.T) {
		apply(t, "11-mirror.yaml")
		until(t, "v1 answers, v2 sees a copy", func() error {
			key := fmt.Sprintf("mirror-%d", time.Now().UnixNano())
			r := call(httpbin, "httpbin:8000", http.Header{"X-Echo-Key": {key}})
			if r.status != 200 || r.version != "v1" {
				return fmt.Errorf("httpbin: %s", r)
			}
			n, host := keyCount(t, ctx, hc, "http://"+m.Pod("httpbin-v2").IP+":8080", key)
			if n != 1 {
				return fmt.Errorf("v2 saw %d copies", n)
			}
			if host != "httpbin-shadow:8000" {
				return fmt.Errorf("mirrored with Host %q, want httpbin-shadow:8000", host)
			}
			return nil
		})
	})

	// "Egress TLS Origination": the application calls
	// http://edition.cnn.com; the ServiceEntry maps port 80 to targetPort
	// 443 and the DestinationRule originates TLS there. An HTTPS server
	// outside the mesh (no sidecar) stands in for edition.cnn.com, a DNS
	// server in sleep's pod (on the host's first nameserver address, which
	// the proxy asks) resolves the name to it, and the task's rule gets
	// caCertificates (the test's CA is not in the host's trust bundle).
	t.Run("egress TLS origination", func(t *testing.T) {
		nameserver := "127.0.0.1"
		if rc, err := dns.ClientConfigFromFile("/etc/resolv.conf"); err == nil && len(rc.Servers) > 0 {
			nameserver = rc.Servers[0]
		}
		if ip, err := netip.ParseAddr(nameserver); err != nil || !ip.Is4() {
			testreq.Missing(t, "the first nameserver of /etc/resolv.conf, %q, is not an IPv4 address", nameserver)
		}
		ca := newTestCA(t, "cnn CA")
		cert := ca.issue(t, "edition.cnn.com", []string{"edition.cnn.com"}, x509.ExtKeyUsageServerAuth)
		caFile := filepath.Join(sleep.Dir(), "cnn-ca.pem")
		if err := os.WriteFile(caFile, ca.certPEM, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(caFile, sleep.ProxyUID(), sleep.ProxyUID()); err != nil { // the agent reads it as the proxy's user
			t.Fatal(err)
		}
		cnn, err := m.Network().AddPod(ctx, "cnn")
		if err != nil {
			t.Fatal(err)
		}
		lis, err := cnn.Listen(ctx, "tcp", ":443")
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_ = json.NewEncoder(w).Encode(tlsSeen{Path: r.URL.Path, SNI: r.TLS.ServerName, Port: "443"})
			}),
			TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert.tls}},
			ReadHeaderTimeout: 5 * time.Second,
		}
		go func() { _ = srv.ServeTLS(lis, "", "") }()
		defer srv.Close()

		zone := filepath.Join(t.TempDir(), "zone")
		if err := os.WriteFile(zone, []byte("edition.cnn.com "+cnn.IP.String()+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		if out, err := sleep.Command(ctx, "ip", "addr", "add", nameserver+"/32", "dev", "lo").CombinedOutput(); err != nil && !strings.Contains(string(out), "File exists") {
			t.Fatalf("ip addr add %s: %v\n%s", nameserver, err, out)
		}
		dnsSrv := sleep.Command(context.WithoutCancel(ctx), self, "-dns-serve", net.JoinHostPort(nameserver, "53"), "-dns-zone", zone)
		dnsSrv.Stderr = os.Stderr
		started, err := dnsSrv.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := dnsSrv.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() {
			_ = dnsSrv.Process.Signal(syscall.SIGTERM)
			_ = dnsSrv.Wait()
		}()
		// The proxy resolves once the cluster comes: the server must
		// answer by then, or the next try is the 60s refresh away.
		if line, err := bufio.NewReader(started).ReadString('\n'); err != nil || !strings.Contains(line, "listening") {
			t.Fatalf("DNS server did not start: %q, %v", line, err)
		}

		data, err := os.ReadFile(filepath.Join(tasks, "15-egress-tls-origination.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		rule := strings.Replace(string(data), "mode: SIMPLE # initiates HTTPS when accessing edition.cnn.com",
			"mode: SIMPLE # initiates HTTPS when accessing edition.cnn.com\n        caCertificates: "+caFile, 1)
		if rule == string(data) {
			t.Fatal("the task's DestinationRule lacks its tls mode line")
		}
		if err := m.WriteConfig("egress-tls-origination.yaml", []byte(rule)); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(filepath.Join(m.ConfigDir(), "egress-tls-origination.yaml"))
		// Port 80 of any address is the HTTP listener; the Host picks the
		// route, as curl http://edition.cnn.com/politics does.
		until(t, "TLS originated to port 443", func() error {
			r := call("http://"+cnn.IP.String()+"/politics", "edition.cnn.com", nil)
			var seen tlsSeen
			if r.err != nil || r.status != 200 || json.Unmarshal(r.body, &seen) != nil {
				return fmt.Errorf("edition.cnn.com: %s %q", r, r.body)
			}
			if seen.SNI != "edition.cnn.com" || seen.Path != "/politics" {
				return fmt.Errorf("the server saw SNI %q path %q, want edition.cnn.com /politics", seen.SNI, seen.Path)
			}
			return nil
		})
	})

	// The Sidecar resource's example: a Sidecar named default in the root
	// namespace (istio-system) limits every namespace's egress to its own
	// services and istio-system's; web in namespace other disappears from
	// sleep's sidecar, reviews (sleep's namespace) stays.
	t.Run("sidecar", func(t *testing.T) {
		const web = "http://240.240.2.1/"
		until(t, "web answers", func() error {
			if r := call(web, "web.other.svc.cluster.local", nil); r.err != nil || r.status != 200 {
				return fmt.Errorf("web: %s", r)
			}
			return nil
		})
		apply(t, "16-sidecar.yaml")
		until(t, "web hidden", func() error {
			if r := call(web, "web.other.svc.cluster.local", nil); r.err == nil && r.status == 200 {
				return fmt.Errorf("web: %s, want no route to it", r)
			}
			return nil
		})
		if seen, err := versions(reviews, "reviews:9080", nil, 5); err != nil {
			t.Errorf("reviews behind the default Sidecar: %v (%v)", err, seen)
		}
		if err := os.Remove(filepath.Join(m.ConfigDir(), "sidecar-default.yaml")); err != nil {
			t.Fatal(err)
		}
		until(t, "web back", func() error {
			if r := call(web, "web.other.svc.cluster.local", nil); r.err != nil || r.status != 200 {
				return fmt.Errorf("web: %s", r)
			}
			return nil
		})
	})

	// straitctl proxy-status: every sidecar has ACKed what straitd sent.
	t.Run("proxy-status", func(t *testing.T) {
		out, err := exec.CommandContext(ctx, filepath.Join(binDir, "straitctl"), "proxy-status", "--straitd-addr", m.MonitoringAddr()).CombinedOutput()
		if err != nil {
			t.Fatalf("straitctl proxy-status: %v\n%s", err, out)
		}
		for _, pod := range []string{"sleep", "reviews-v1", "tcp-echo-v2"} {
			if !regexp.MustCompile(`(?m)^` + pod + `\.default\s.*SYNCED`).Match(out) {
				t.Errorf("no SYNCED line for %s:\n%s", pod, out)
			}
		}
		if bytes.Contains(out, []byte("STALE")) {
			t.Errorf("a proxy is STALE:\n%s", out)
		}
	})
}

// TestIstioDocsTrafficTasksValidate: straitctl validate -f on each task's
// file as istio.io prints it: every document loads, the TCP task's Gateway
// too.
func TestIstioDocsTrafficTasksValidate(t *testing.T) {
	if binDir == "" {
		testreq.Missing(t, "no binaries: run as root or set STRAIT_BIN_DIR")
	}
	_, file, _, _ := runtime.Caller(0)
	tasks, err := filepath.Glob(filepath.Join(filepath.Dir(file), "testdata", "istiodocs-traffic", "tasks", "*.yaml"))
	if err != nil || len(tasks) == 0 {
		t.Fatalf("no tasks: %v", err)
	}
	for _, task := range tasks {
		out, err := exec.Command(filepath.Join(binDir, "straitctl"), "validate", "-f", task).CombinedOutput()
		if err != nil {
			t.Errorf("%s: %v\n%s", filepath.Base(task), err, out)
		}
		if bytes.Contains(out, []byte("skipping")) {
			t.Errorf("%s: a document is skipped (the TCP task's Gateway loads since #23):\n%s", filepath.Base(task), out)
		}
	}
}
