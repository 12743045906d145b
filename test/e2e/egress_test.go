package e2e

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/straitmesh/strait/internal/localmesh"
	"github.com/straitmesh/strait/internal/testreq"
)

// dnsServe makes the test binary a DNS server (run inside the client pod)
// instead of running tests: it answers A queries from the zone file
// dnsZone ("NAME IP[,IP...]" lines, read at every query) with a TTL of
// 1 s, and NXDOMAIN for names it does not have.
var (
	dnsServe = flag.String("dns-serve", "", "serve DNS on this UDP address instead of running tests")
	dnsZone  = flag.String("dns-zone", "", "zone file of -dns-serve")
)

func serveDNS(addr, zone string) int {
	srv := &dns.Server{Addr: addr, Net: "udp", Handler: dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		resp := new(dns.Msg)
		resp.SetReply(req)
		resp.Authoritative = true
		q := req.Question[0]
		records := readZone(zone)
		ips, ok := records[strings.ToLower(q.Name)]
		if !ok {
			resp.Rcode = dns.RcodeNameError
		}
		for _, ip := range ips {
			if q.Qtype == dns.TypeA && ip.Is4() {
				resp.Answer = append(resp.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 1}, A: ip.AsSlice()})
			}
		}
		_ = w.WriteMsg(resp)
	})}
	// The test waits for this line before it points a cluster here: a
	// proxy that resolves before the socket is bound would wait out the
	// mesh's 60 s refresh rate.
	srv.NotifyStartedFunc = func() { fmt.Println("dns: listening") }
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sig
		_ = srv.Shutdown()
	}()
	if err := srv.ListenAndServe(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func readZone(path string) map[string][]netip.Addr {
	out := map[string][]netip.Addr{}
	f, err := os.Open(path)
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, ips, ok := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		if !ok {
			continue
		}
		for _, ip := range strings.Split(ips, ",") {
			if a, err := netip.ParseAddr(strings.TrimSpace(ip)); err == nil {
				out[dns.Fqdn(strings.ToLower(name))] = append(out[dns.Fqdn(strings.ToLower(name))], a)
			}
		}
	}
	return out
}

// dnsEntry resolves api.external.test's endpoint backend.external.test
// with the client pod's DNS server; spread.external.test (DNS) and
// first.external.test (DNS_ROUND_ROBIN) resolve both.external.test, which
// has two addresses.
const dnsEntry = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: api, namespace: egress}
spec:
  hosts: [api.external.test]
  addresses: [240.240.6.2]
  ports: [{number: 80, name: http, protocol: HTTP}]
  location: MESH_EXTERNAL
  resolution: DNS
  endpoints: [{address: backend.external.test, ports: {http: 8080}}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: spread, namespace: egress}
spec:
  hosts: [spread.external.test]
  addresses: [240.240.6.3]
  ports: [{number: 80, name: http, protocol: HTTP}]
  location: MESH_EXTERNAL
  resolution: DNS
  endpoints: [{address: both.external.test, ports: {http: 8080}}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: first, namespace: egress}
spec:
  hosts: [first.external.test]
  addresses: [240.240.6.4]
  ports: [{number: 80, name: http, protocol: HTTP}]
  location: MESH_EXTERNAL
  resolution: DNS_ROUND_ROBIN
  endpoints: [{address: both.external.test, ports: {http: 8080}}]
`

const allowAnySidecar = `apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: egress}
spec:
  outboundTrafficPolicy: {mode: ALLOW_ANY}
`

// TestEgressThroughSidecars runs one mesh for the ServiceEntry
// resolutions, the outbound traffic policy, DestinationRule merging and
// VirtualService exportTo, each checked with real requests through the
// sidecars.
func TestEgressThroughSidecars(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The proxy resolves with the servers of /etc/resolv.conf, as Envoy's
	// c-ares does; the test serves DNS on the first one's address inside
	// the client pod, whose network has no way out.
	nameserver := "127.0.0.1"
	if rc, err := dns.ClientConfigFromFile("/etc/resolv.conf"); err == nil && len(rc.Servers) > 0 {
		nameserver = rc.Servers[0]
	}
	ns, err := netip.ParseAddr(nameserver)
	if err != nil || !ns.Is4() {
		testreq.Missing(t, "the first nameserver of /etc/resolv.conf, %q, is not an IPv4 address", nameserver)
	}
	tmp := t.TempDir()
	meshFile := filepath.Join(tmp, "meshconfig.yaml")
	if err := os.WriteFile(meshFile, []byte("outboundTrafficPolicy:\n  mode: REGISTRY_ONLY\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	m := startMesh(ctx, t, "egress", localmesh.Options{
		StraitdArgs: []string{"--mesh", meshFile},
		Workloads: []localmesh.Workload{
			{Name: "client", Namespace: "egress", ConfigIP: "10.95.0.10"},
			{Name: "other", Namespace: "other", ConfigIP: "10.95.0.11"},
			echoPod("echo-v1", "egress", "10.95.0.21", "v1"),
			echoPod("echo-v2", "egress", "10.95.0.22", "v2"),
			echoPod("outside-a", "outside", "10.95.0.31", "a"),
			echoPod("outside-b", "outside", "10.95.0.32", "b"),
		},
	})
	client, other := m.Pod("client"), m.Pod("other")
	outsideA, outsideB := m.Pod("outside-a").IP, m.Pod("outside-b").IP

	t.Run("registry-only refuses unknown destinations", func(t *testing.T) {
		// HTTP on a port the mesh has a listener for: block_all, 502.
		status, _, err := request(ctx, client, "http://"+outsideA+":8080/", "")
		if err != nil || status != http.StatusBadGateway {
			t.Errorf("unknown HTTP destination: status %d, error %v; want 502", status, err)
		}
		// A port no listener claims: BlackHoleCluster closes the
		// connection (the outside pod's agent answers on 15021 when the
		// connection gets there).
		if status, _, err := request(ctx, client, "http://"+outsideA+":15021/healthz/ready", ""); err == nil {
			t.Errorf("unknown TCP destination answered %d; want the connection closed", status)
		}
	})

	t.Run("resolution NONE passes to the original destination", func(t *testing.T) {
		for _, ip := range []string{outsideA, outsideB} {
			status, reply, err := request(ctx, client, "http://"+ip+":8080/", "legacy.internal.test:8080")
			if err != nil || status != http.StatusOK || reply.Pod != podOf(m, ip) {
				t.Errorf("legacy.internal.test via %s: status %d, pod %q, error %v; want 200 from %s", ip, status, reply.Pod, err, podOf(m, ip))
			}
		}
	})

	t.Run("DNS resolution follows the record", func(t *testing.T) {
		zone := filepath.Join(tmp, "zone")
		writeZone(t, zone, outsideA, outsideA, outsideB)
		if out, err := client.Command(ctx, "ip", "addr", "add", nameserver+"/32", "dev", "lo").CombinedOutput(); err != nil {
			t.Fatalf("ip addr add %s: %v\n%s", nameserver, err, out)
		}
		srv := client.Command(context.WithoutCancel(ctx), self, "-dns-serve", net.JoinHostPort(nameserver, "53"), "-dns-zone", zone)
		srv.Stderr = os.Stderr
		started, err := srv.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() {
			_ = srv.Process.Signal(syscall.SIGTERM)
			_ = srv.Wait()
		}()
		if line, err := bufio.NewReader(started).ReadString('\n'); err != nil || !strings.Contains(line, "listening") {
			t.Fatalf("DNS server did not start: %q, %v", line, err)
		}
		writeConfig(t, m, "dns.yaml", []byte(dnsEntry))
		waitPod(ctx, t, client, "http://240.240.6.2/", "api.external.test", "outside-a", applyTimeout, "before the change")
		writeZone(t, zone, outsideB, outsideA, outsideB)
		start := time.Now()
		waitPod(ctx, t, client, "http://240.240.6.2/", "api.external.test", "outside-b", 15*time.Second, "after the record changed")
		t.Logf("re-resolved %s after the record changed (TTL 1s)", time.Since(start).Round(100*time.Millisecond))

		// Two addresses: STRICT_DNS balances over both, LOGICAL_DNS
		// (DNS_ROUND_ROBIN) uses the first only.
		for _, tc := range []struct {
			host string
			vip  string
			want map[string]bool
		}{
			{"spread.external.test", "240.240.6.3", map[string]bool{"outside-a": true, "outside-b": true}},
			{"first.external.test", "240.240.6.4", map[string]bool{"outside-a": true}},
		} {
			waitPod(ctx, t, client, "http://"+tc.vip+"/", tc.host, "outside-a", 15*time.Second, tc.host)
			seen := map[string]bool{}
			for range 20 {
				status, reply, err := request(ctx, client, "http://"+tc.vip+"/", tc.host)
				if err != nil || status != http.StatusOK {
					t.Fatalf("%s: status %d, error %v", tc.host, status, err)
				}
				seen[reply.Pod] = true
			}
			if len(seen) != len(tc.want) || !seen["outside-a"] {
				t.Errorf("%s answered from %v, want %v", tc.host, seen, tc.want)
			}
		}
	})

	t.Run("two DestinationRules merged", func(t *testing.T) {
		// The VirtualService routes to subset v2, which only the second
		// rule defines.
		for i := range 10 {
			status, reply, err := request(ctx, client, "http://240.240.6.1/", "echo.egress.svc.cluster.local")
			if err != nil || status != http.StatusOK || reply.Version != "v2" {
				t.Fatalf("request %d: status %d, version %q, error %v; want 200 from v2", i, status, reply.Version, err)
			}
		}
	})

	t.Run("exportTo . hides the VirtualService from another namespace", func(t *testing.T) {
		seen := map[string]int{}
		for range 10 {
			status, reply, err := request(ctx, other, "http://240.240.6.1/", "echo.egress.svc.cluster.local")
			if err != nil || status != http.StatusOK {
				t.Fatalf("from namespace other: status %d, error %v", status, err)
			}
			seen[reply.Version]++
		}
		if seen["v1"] == 0 {
			t.Errorf("namespace other saw %v; without the VirtualService both versions answer", seen)
		}
	})

	t.Run("ALLOW_ANY passes unknown destinations", func(t *testing.T) {
		writeConfig(t, m, "sidecar.yaml", []byte(allowAnySidecar))
		waitPod(ctx, t, client, "http://"+outsideA+":8080/", "", "outside-a", applyTimeout, "unknown HTTP destination with ALLOW_ANY")
		status, _, err := request(ctx, client, "http://"+outsideB+":15021/healthz/ready", "")
		if err != nil || status != http.StatusOK {
			t.Errorf("unknown TCP destination with ALLOW_ANY: status %d, error %v; want 200 from outside-b's agent", status, err)
		}
	})
}

func podOf(m *localmesh.Mesh, ip string) string {
	for _, name := range []string{"outside-a", "outside-b"} {
		if m.Pod(name).IP == ip {
			return name
		}
	}
	return ""
}

// writeZone answers backend.external.test with ip and both.external.test
// with outside-a's and outside-b's addresses (in that order).
func writeZone(t *testing.T, path, ip, a, b string) {
	t.Helper()
	replaceFile(t, path, "backend.external.test "+ip+"\nboth.external.test "+a+","+b+"\n")
}
