package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/straitmesh/strait/internal/debugapi"
	"github.com/straitmesh/strait/internal/freeport"
	"github.com/straitmesh/strait/internal/localmesh"
)

// TestDNSProxy: with DNS capture (ISTIO_META_DNS_CAPTURE, strait-agent
// iptables --redirect-dns) the client pod's DNS queries to its resolv.conf
// nameserver reach its agent's DNS proxy. A mesh service's name resolves to
// its VIP from straitd's name table (the upstream never sees it), and a
// request to that name goes through the sidecar to the service; a headless
// service's name resolves to its pod; a ServiceEntry without addresses to
// the address straitd allocated it, on which the sidecar listens; an
// outside name and an unknown name are answered by the upstream DNS
// server, which the test runs on loopback and the mesh's DNS forwarder
// (localmesh DNSUpstreams, what straitctl local up --dns-capture runs)
// reaches from the bridge's host address. The name table comes on the
// client's one xDS stream.
func TestDNSProxy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	asked := make(chan string, 1000)
	h := dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		q := req.Question[0]
		asked <- q.Name
		resp := new(dns.Msg)
		resp.SetReply(req)
		switch {
		case q.Name == "outside.example.org." && q.Qtype == dns.TypeA:
			resp.Answer = append(resp.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5}, A: net.IPv4(192, 0, 2, 7)})
		case q.Name == "outside.example.org.":
		default:
			resp.Rcode = dns.RcodeNameError
		}
		_ = w.WriteMsg(resp)
	})
	// The upstream listens on loopback of the host: only the mesh's
	// forwarder (on the bridge's host address) can reach it.
	pc, ln, err := freeport.ListenUDPTCP("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	for _, srv := range []*dns.Server{{PacketConn: pc, Handler: h}, {Listener: ln, Handler: h}} {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		errc := make(chan error, 1)
		go func() { errc <- srv.ActivateAndServe() }()
		select {
		case <-started:
		case err := <-errc:
			t.Fatalf("upstream DNS: %v", err)
		}
		defer srv.Shutdown()
	}
	m := startMesh(ctx, t, "dns", localmesh.Options{
		DNSCapture:   true,
		DNSUpstreams: []string{pc.LocalAddr().String()},
		Workloads: []localmesh.Workload{
			{Name: "client", Namespace: "dnsdemo", ConfigIP: "10.95.0.10"},
			echoPod("echo", "dnsdemo", "10.95.0.21", "v1"),
			echoPod("tcpecho", "dnsdemo", "10.95.0.22", "tcp"),
		},
	})
	upstream := net.JoinHostPort(m.HostIP().String(), "53")
	client := m.Pod("client")

	// The pod's resolv.conf names the bridge host as nameserver.
	rc, err := os.ReadFile(filepath.Join(client.Dir(), "resolv.conf"))
	if err != nil || !strings.Contains(string(rc), "nameserver "+m.HostIP().String()) {
		t.Fatalf("pod resolv.conf %q, %v", rc, err)
	}

	for _, network := range []string{"udp", "tcp"} {
		t.Run(network, func(t *testing.T) {
			r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return client.DialContext(ctx, network, upstream)
			}}
			for _, tc := range []struct{ name, want string }{
				{"echo.dnsdemo.svc.cluster.local", "240.240.7.1"},
				{"echo-headless.dnsdemo.svc.cluster.local", m.Pod("echo").IP},
				{"outside.example.org", "192.0.2.7"},
			} {
				addrs, err := r.LookupHost(ctx, tc.name)
				if err != nil || !slices.Contains(addrs, tc.want) {
					t.Errorf("lookup %s = %v, %v; want %s", tc.name, addrs, err, tc.want)
				}
			}
			if _, err := r.LookupHost(ctx, "missing.example.org"); err == nil {
				t.Error("missing.example.org resolved; want the upstream's NXDOMAIN")
			}
		})
	}

	// The app in the pod, with its own resolv.conf: getent asks the
	// captured nameserver with the pod's search list.
	t.Run("getent short name", func(t *testing.T) {
		out, err := client.Command(ctx, "unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
			`mount --bind "$0" /etc/resolv.conf && exec getent ahostsv4 echo.dnsdemo`, filepath.Join(client.Dir(), "resolv.conf")).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "240.240.7.1") {
			t.Errorf("getent ahostsv4 echo.dnsdemo: %q, %v; want 240.240.7.1", out, err)
		}
	})

	t.Run("request by name through the sidecar", func(t *testing.T) {
		r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return client.DialContext(ctx, network, upstream)
		}}
		hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, port, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			ips, err := r.LookupHost(ctx, host)
			if err != nil || len(ips) == 0 {
				if err == nil {
					err = errors.New("no addresses")
				}
				return nil, fmt.Errorf("resolve %s: %w", host, err)
			}
			return client.DialContext(ctx, network, net.JoinHostPort(ips[0], port))
		}}}
		resp, err := hc.Get("http://echo.dnsdemo.svc.cluster.local/dns")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"path":"/dns"`) {
			t.Errorf("GET echo by name: %d %s", resp.StatusCode, body)
		}
	})

	t.Run("allocated address of a TCP ServiceEntry without addresses", func(t *testing.T) {
		r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return client.DialContext(ctx, network, upstream)
		}}
		ips, err := r.LookupHost(ctx, "echo-tcp.dnsdemo.svc.cluster.local")
		if err != nil || len(ips) != 1 || !netip.MustParsePrefix("240.240.0.0/16").Contains(netip.MustParseAddr(ips[0])) {
			t.Fatalf("lookup echo-tcp = %v, %v; want one address in 240.240.0.0/16", ips, err)
		}
		// The sidecar listens on that address for the service's TCP port:
		// HTTP over it reaches tcpecho, not echo.
		hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return client.DialContext(ctx, network, net.JoinHostPort(ips[0], "9000"))
		}}}
		resp, err := hc.Get("http://echo-tcp.dnsdemo.svc.cluster.local:9000/tcp")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"version":"tcp"`) {
			t.Errorf("GET echo-tcp by its allocated address: %d %s", resp.StatusCode, body)
		}
	})

	t.Run("name table on the proxy's stream", func(t *testing.T) {
		resp, err := http.Get("http://" + m.MonitoringAddr() + "/debug/syncz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var syncz []debugapi.SyncStatus
		if err := json.NewDecoder(resp.Body).Decode(&syncz); err != nil {
			t.Fatal(err)
		}
		var streams [][]string
		for _, s := range syncz {
			if strings.Contains(s.ProxyID, "~client.dnsdemo~") {
				var types []string
				for _, ty := range s.Types {
					types = append(types, ty.Type)
				}
				streams = append(streams, types)
			}
		}
		if len(streams) != 1 || !slices.Contains(streams[0], "nds") || !slices.Contains(streams[0], "cds") {
			t.Errorf("client's xDS streams (types): %q; want one with cds and nds", streams)
		}
	})

	var names []string
	for len(asked) > 0 {
		names = append(names, <-asked)
	}
	for _, n := range names {
		if n == "echo.dnsdemo.svc.cluster.local." {
			t.Errorf("the upstream was asked for the mesh name %s: %q", n, names)
		}
	}
	if !slices.Contains(names, "outside.example.org.") {
		t.Errorf("the upstream was asked %q; want outside.example.org forwarded", names)
	}
}
