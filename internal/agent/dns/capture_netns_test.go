package dns

import (
	"context"
	"errors"
	"net"
	"os/exec"
	"slices"
	"testing"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/straitmesh/strait/internal/iptables"
	"github.com/straitmesh/strait/internal/nds"
	"github.com/straitmesh/strait/internal/netns"
	"github.com/straitmesh/strait/internal/testreq"
)

// TestCapturedPodResolves is the whole path in network namespaces: the
// app pod has Istio's DNS capture rules (REDIRECT mode, the resolver from
// its resolv.conf), the DNS proxy runs in it as the proxy's user, and a
// resolver pod on the bridge plays the cluster DNS. The app's Go resolver,
// asking the cluster DNS over UDP and TCP, gets the mesh service's VIP
// from the name table (the resolver never sees that name) and an outside
// name from the resolver, through the proxy.
func TestCapturedPodResolves(t *testing.T) {
	testreq.Binary(t, "iptables-restore", "iptables")
	n := netns.NewTestNetwork(t)
	app := n.AddTestPod(t, "app")
	resolverPod := n.AddTestPod(t, "resolver")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// The cluster DNS: answers outside.example.org, NXDOMAIN otherwise.
	asked := make(chan string, 100)
	h := mdns.HandlerFunc(func(w mdns.ResponseWriter, req *mdns.Msg) {
		q := req.Question[0]
		asked <- q.Name
		m := new(mdns.Msg)
		m.SetReply(req)
		switch {
		case q.Name == "outside.example.org." && q.Qtype == mdns.TypeA:
			m.Answer = append(m.Answer, &mdns.A{Hdr: mdns.RR_Header{Name: q.Name, Rrtype: mdns.TypeA, Class: mdns.ClassINET, Ttl: 60}, A: net.IPv4(192, 0, 2, 7)})
		case q.Name == "outside.example.org.":
		default:
			m.Rcode = mdns.RcodeNameError
		}
		_ = w.WriteMsg(m)
	})
	var pc net.PacketConn
	var ln net.Listener
	if err := resolverPod.Do(nil, func() error {
		var err error
		if pc, err = net.ListenPacket("udp4", ":53"); err != nil {
			return err
		}
		ln, err = net.Listen("tcp4", ":53")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for _, srv := range []*mdns.Server{{PacketConn: pc, Handler: h}, {Listener: ln, Handler: h}} {
		srv := srv
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		go func() { _ = srv.ActivateAndServe() }()
		<-started
		defer srv.Shutdown()
	}
	clusterDNS := net.JoinHostPort(resolverPod.IP.String(), "53")

	// Capture, as `strait-agent iptables --redirect-dns` installs it with
	// the resolv.conf nameserver.
	cfg := iptables.DefaultConfig()
	cfg.OutboundIPRangesInclude = "*"
	cfg.RedirectDNS = true
	cfg.DNSServers = []string{resolverPod.IP.String()}
	plan, err := iptables.Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cmd := func(ctx context.Context, name string, args ...string) *exec.Cmd {
		return app.Command(ctx, netns.ExecOptions{}, name, args...)
	}
	backend, _ := iptables.DetectBackend(ctx, cmd)
	if rep, err := iptables.Install(ctx, backend.System(cmd), plan); err != nil {
		t.Fatalf("install capture: %v\n%s", err, rep)
	}

	// The DNS proxy, as the proxy user in the app pod.
	proxyUser := &netns.Identity{UID: 1337, GID: 1337}
	inPod := func(fn func() error) error { return app.Do(proxyUser, fn) }
	s, err := New(Options{
		Addr:          DefaultAddr,
		Namespace:     "demo",
		ClusterDomain: "cluster.local",
		Search:        []string{"demo.svc.cluster.local", "svc.cluster.local", "cluster.local"},
		Upstreams:     []string{clusterDNS},
		Dial: func(ctx context.Context, network, addr string) (c net.Conn, err error) {
			err = inPod(func() error { c, err = (&net.Dialer{}).DialContext(ctx, network, addr); return err })
			return c, err
		},
		ListenPacket: func(network, addr string) (pc net.PacketConn, err error) {
			err = inPod(func() error { pc, err = net.ListenPacket(network, addr); return err })
			return pc, err
		},
		Listen: func(network, addr string) (l net.Listener, err error) {
			err = inPod(func() error { l, err = net.Listen(network, addr); return err })
			return l, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	s.UpdateNameTable(nds.NameTable{
		"reviews.demo.svc.cluster.local": {IPs: []string{"10.96.0.20"}, Registry: nds.RegistryKubernetes, Shortname: "reviews", Namespace: "demo"},
	})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	if _, _, err := s.Addrs(ctx); err != nil {
		t.Fatal(err)
	}

	for _, network := range []string{"udp", "tcp"} {
		// The app (not the proxy user) asks the cluster DNS, as its
		// resolv.conf says.
		r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return app.DialContext(ctx, network, clusterDNS)
		}}
		for _, tc := range []struct{ name, want string }{
			{"reviews.demo.svc.cluster.local", "10.96.0.20"},
			{"outside.example.org", "192.0.2.7"},
		} {
			addrs, err := r.LookupHost(ctx, tc.name)
			if err != nil || !slices.Contains(addrs, tc.want) {
				t.Errorf("%s: lookup %s = %v, %v; want %s", network, tc.name, addrs, err, tc.want)
			}
		}
		if _, err := r.LookupHost(ctx, "missing.example.org"); err == nil {
			t.Errorf("%s: missing.example.org resolved; want the resolver's NXDOMAIN", network)
		} else if de := (*net.DNSError)(nil); !errors.As(err, &de) || !de.IsNotFound {
			t.Errorf("%s: missing.example.org: %v; want not found", network, err)
		}
	}
	var names []string
	for len(asked) > 0 {
		names = append(names, <-asked)
	}
	if slices.Contains(names, "reviews.demo.svc.cluster.local.") {
		t.Errorf("the cluster DNS was asked for the mesh name: %q", names)
	}
	if !slices.Contains(names, "outside.example.org.") || !slices.Contains(names, "missing.example.org.") {
		t.Errorf("the cluster DNS was asked %q; want the outside names forwarded", names)
	}
}
