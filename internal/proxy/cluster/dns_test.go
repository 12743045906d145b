package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	caresv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/network/dns_resolver/cares/v3"
	metadatav3 "github.com/envoyproxy/go-control-plane/envoy/type/metadata/v3"
	"github.com/miekg/dns"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/proxy/cluster/dnsresolver"
	"github.com/straitmesh/strait/internal/proxy/stats"
)

// testDNS is a DNS server on loopback whose records the test changes.
type testDNS struct {
	addr string

	mu      sync.Mutex
	records map[string][]string // FQDN → addresses (A or AAAA by form)
	rcode   int                 // answered instead of records when not 0
	ttl     uint32
	queries map[uint16]int // by type
}

func startTestDNS(t *testing.T) *testDNS {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &testDNS{addr: pc.LocalAddr().String(), records: map[string][]string{}, ttl: 30, queries: map[uint16]int{}}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(d.serve)}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	errc := make(chan error, 1)
	go func() { errc <- srv.ActivateAndServe() }()
	<-started
	t.Cleanup(func() {
		srv.Shutdown()
		_ = <-errc
	})
	return d
}

func (d *testDNS) set(name string, addrs ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.records[dns.Fqdn(name)] = addrs
}

func (d *testDNS) remove(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.records, dns.Fqdn(name))
}

func (d *testDNS) setRcode(rc int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.rcode = rc
}

func (d *testDNS) setTTL(ttl uint32) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ttl = ttl
}

func (d *testDNS) serve(w dns.ResponseWriter, req *dns.Msg) {
	d.mu.Lock()
	defer d.mu.Unlock()
	resp := new(dns.Msg)
	resp.SetReply(req)
	q := req.Question[0]
	d.queries[q.Qtype]++
	addrs, ok := d.records[q.Name]
	switch {
	case d.rcode != 0:
		resp.Rcode = d.rcode
	case !ok:
		resp.Rcode = dns.RcodeNameError
	}
	if resp.Rcode == dns.RcodeSuccess {
		for _, a := range addrs {
			ip := netip.MustParseAddr(a)
			hdr := dns.RR_Header{Name: q.Name, Class: dns.ClassINET, Ttl: d.ttl}
			switch {
			case ip.Is4() && q.Qtype == dns.TypeA:
				hdr.Rrtype = dns.TypeA
				resp.Answer = append(resp.Answer, &dns.A{Hdr: hdr, A: ip.AsSlice()})
			case ip.Is6() && q.Qtype == dns.TypeAAAA:
				hdr.Rrtype = dns.TypeAAAA
				resp.Answer = append(resp.Answer, &dns.AAAA{Hdr: hdr, AAAA: ip.AsSlice()})
			}
		}
	}
	_ = w.WriteMsg(resp)
}

// dnsCluster is a DNS cluster that asks server for the targets
// ("host:port").
func dnsCluster(t *testing.T, typ clusterv3.Cluster_DiscoveryType, server string, targets ...string) *clusterv3.Cluster {
	t.Helper()
	var lbs []*endpointv3.LbEndpoint
	for _, tg := range targets {
		host, port, _ := strings.Cut(tg, ":")
		var p uint32
		_, _ = fmt.Sscan(port, &p)
		lbs = append(lbs, &endpointv3.LbEndpoint{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
			Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
				Address: host, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: p}}}}}}})
	}
	ap := netip.MustParseAddrPort(server)
	resolver, err := anypb.New(&caresv3.CaresDnsResolverConfig{Resolvers: []*corev3.Address{{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address: ap.Addr().String(), PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(ap.Port())}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	return &clusterv3.Cluster{
		Name:                   "dns",
		ClusterDiscoveryType:   &clusterv3.Cluster_Type{Type: typ},
		ConnectTimeout:         durationpb.New(time.Second),
		DnsLookupFamily:        clusterv3.Cluster_V4_ONLY,
		DnsRefreshRate:         durationpb.New(20 * time.Millisecond),
		TypedDnsResolverConfig: &corev3.TypedExtensionConfig{Name: caresName, TypedConfig: resolver},
		LoadAssignment:         &endpointv3.ClusterLoadAssignment{ClusterName: "dns", Endpoints: []*endpointv3.LocalityLbEndpoints{{LbEndpoints: lbs}}},
	}
}

func addresses(c *Cluster) []string {
	var out []string
	for _, ep := range c.Endpoints() {
		out = append(out, ep.Address)
	}
	return out
}

// waitEndpoints waits until the active cluster "dns" has exactly want.
func waitEndpoints(t *testing.T, m *Manager, want ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c := m.Get("dns")
		var got []string
		if c != nil {
			got = addresses(c)
		}
		if slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("endpoints = %v, want %v", got, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func newTestManager(t *testing.T) (*Manager, *stats.Store) {
	st := stats.New()
	m := NewManager(slog.New(slog.DiscardHandler), st)
	t.Cleanup(m.Close)
	return m, st
}

func TestStrictDNSResolvesEveryAddressAndFollowsChanges(t *testing.T) {
	srv := startTestDNS(t)
	srv.set("db.example.test", "10.0.0.2", "10.0.0.1")
	srv.set("cache.example.test", "10.0.1.1")
	m, st := newTestManager(t)
	if _, err := m.ApplyCDS("1", []*clusterv3.Cluster{dnsCluster(t, clusterv3.Cluster_STRICT_DNS, srv.addr, "db.example.test:5432", "cache.example.test:6379")}); err != nil {
		t.Fatal(err)
	}
	waitEndpoints(t, m, "10.0.0.1:5432", "10.0.0.2:5432", "10.0.1.1:6379")
	if got := m.Get("dns").Kind; got != KindStrictDNS {
		t.Errorf("Kind = %v, want KindStrictDNS", got)
	}

	srv.set("db.example.test", "10.0.0.3")
	waitEndpoints(t, m, "10.0.0.3:5432", "10.0.1.1:6379")

	// A name that stops existing has no endpoints; the other keeps its own.
	srv.remove("cache.example.test")
	waitEndpoints(t, m, "10.0.0.3:5432")
	if st.Counter("cluster.dns.update_success").Load() == 0 {
		t.Error("update_success not counted")
	}
}

func TestStrictDNSKeepsEndpointsWhenResolutionFails(t *testing.T) {
	srv := startTestDNS(t)
	srv.set("db.example.test", "10.0.0.1")
	m, st := newTestManager(t)
	if _, err := m.ApplyCDS("1", []*clusterv3.Cluster{dnsCluster(t, clusterv3.Cluster_STRICT_DNS, srv.addr, "db.example.test:80")}); err != nil {
		t.Fatal(err)
	}
	waitEndpoints(t, m, "10.0.0.1:80")
	srv.setRcode(dns.RcodeServerFailure)
	deadline := time.Now().Add(10 * time.Second)
	for st.Counter("cluster.dns.update_failure").Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("no failed resolution counted")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := addresses(m.Get("dns")); !slices.Equal(got, []string{"10.0.0.1:80"}) {
		t.Fatalf("after SERVFAIL endpoints = %v, want the previous ones", got)
	}
	srv.setRcode(0)
	srv.set("db.example.test", "10.0.0.9")
	waitEndpoints(t, m, "10.0.0.9:80")
}

func TestLogicalDNSUsesTheFirstAddressOnly(t *testing.T) {
	srv := startTestDNS(t)
	srv.set("api.example.test", "10.0.0.7", "10.0.0.8")
	m, _ := newTestManager(t)
	if _, err := m.ApplyCDS("1", []*clusterv3.Cluster{dnsCluster(t, clusterv3.Cluster_LOGICAL_DNS, srv.addr, "api.example.test:443")}); err != nil {
		t.Fatal(err)
	}
	waitEndpoints(t, m, "10.0.0.7:443")
	srv.set("api.example.test", "10.0.0.8", "10.0.0.7")
	waitEndpoints(t, m, "10.0.0.8:443")
}

func TestDNSClusterWarmsUntilFirstResolution(t *testing.T) {
	srv := startTestDNS(t)
	srv.set("db.example.test", "10.0.0.1")
	// The server holds its answers until released: the cluster must stay
	// warming (not active, no endpoints) until the first answer.
	srv.mu.Lock()
	m, _ := newTestManager(t)
	warmed := make(chan struct{}, 4)
	m.OnWarmed(func() { warmed <- struct{}{} })
	if _, err := m.ApplyCDS("1", []*clusterv3.Cluster{dnsCluster(t, clusterv3.Cluster_STRICT_DNS, srv.addr, "db.example.test:80")}); err != nil {
		srv.mu.Unlock()
		t.Fatal(err)
	}
	active, warming := m.Get("dns"), m.Warming()
	srv.mu.Unlock()
	if active != nil || warming != 1 {
		t.Fatalf("before the first answer: active %v, warming %d; want warming only", active != nil, warming)
	}
	select {
	case <-warmed:
	case <-time.After(10 * time.Second):
		t.Fatal("OnWarmed not called")
	}
	if m.Get("dns") == nil || m.Warming() != 0 {
		t.Fatal("cluster not active after its first resolution")
	}
	waitEndpoints(t, m, "10.0.0.1:80")
}

func TestDNSRefreshFollowsTTLWhenRespected(t *testing.T) {
	srv := startTestDNS(t)
	srv.set("db.example.test", "10.0.0.1")
	srv.setTTL(1)
	c := dnsCluster(t, clusterv3.Cluster_STRICT_DNS, srv.addr, "db.example.test:80")
	c.DnsRefreshRate = durationpb.New(time.Hour)
	c.RespectDnsTtl = true
	m, st := newTestManager(t)
	if _, err := m.ApplyCDS("1", []*clusterv3.Cluster{c}); err != nil {
		t.Fatal(err)
	}
	waitEndpoints(t, m, "10.0.0.1:80")
	// With an hour's refresh rate only the 1 s TTL can bring the change.
	srv.set("db.example.test", "10.0.0.2")
	waitEndpoints(t, m, "10.0.0.2:80")
	if n := st.Counter("cluster.dns.update_attempt").Load(); n < 2 {
		t.Errorf("update_attempt = %d, want ≥ 2", n)
	}
}

func TestDNSRefreshRateWithoutTTL(t *testing.T) {
	srv := startTestDNS(t)
	srv.set("db.example.test", "10.0.0.1")
	srv.setTTL(1)
	c := dnsCluster(t, clusterv3.Cluster_STRICT_DNS, srv.addr, "db.example.test:80")
	c.DnsRefreshRate = durationpb.New(time.Hour) // TTL not respected: no refresh within the test
	m, st := newTestManager(t)
	if _, err := m.ApplyCDS("1", []*clusterv3.Cluster{c}); err != nil {
		t.Fatal(err)
	}
	waitEndpoints(t, m, "10.0.0.1:80")
	srv.set("db.example.test", "10.0.0.2")
	time.Sleep(1500 * time.Millisecond) // longer than the TTL, which must not matter
	if got := addresses(m.Get("dns")); !slices.Equal(got, []string{"10.0.0.1:80"}) {
		t.Fatalf("endpoints = %v; re-resolved before dns_refresh_rate", got)
	}
	if n := st.Counter("cluster.dns.update_attempt").Load(); n != 1 {
		t.Errorf("update_attempt = %d, want 1", n)
	}
}

func TestDNSLookupFamily(t *testing.T) {
	srv := startTestDNS(t)
	srv.set("dual.example.test", "10.0.0.1", "fd00::1")
	srv.set("v4.example.test", "10.0.0.2")
	r := &dnsresolver.Resolver{Servers: []string{srv.addr}, Timeout: time.Second, Tries: 1}
	ctx := context.Background()
	for _, tc := range []struct {
		host   string
		family clusterv3.Cluster_DnsLookupFamily
		want   []string
	}{
		{"dual.example.test", clusterv3.Cluster_V4_ONLY, []string{"10.0.0.1"}},
		{"dual.example.test", clusterv3.Cluster_V6_ONLY, []string{"fd00::1"}},
		{"dual.example.test", clusterv3.Cluster_AUTO, []string{"fd00::1"}},
		{"dual.example.test", clusterv3.Cluster_V4_PREFERRED, []string{"10.0.0.1"}},
		{"dual.example.test", clusterv3.Cluster_ALL, []string{"10.0.0.1", "fd00::1"}},
		{"v4.example.test", clusterv3.Cluster_AUTO, []string{"10.0.0.2"}},
		{"v4.example.test", clusterv3.Cluster_V6_ONLY, nil},
		{"10.9.9.9", clusterv3.Cluster_V6_ONLY, []string{"10.9.9.9"}},
		{"missing.example.test", clusterv3.Cluster_ALL, nil},
	} {
		res, err := r.Lookup(ctx, tc.host, tc.family)
		if err != nil {
			t.Errorf("%s %s: %v", tc.host, tc.family, err)
			continue
		}
		var got []string
		for _, a := range res.Addrs {
			got = append(got, a.String())
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s %s = %v, want %v", tc.host, tc.family, got, tc.want)
		}
	}
}

func TestDNSClusterRefusesWhatItDoesNotImplement(t *testing.T) {
	srv := "127.0.0.1:53"
	cares := func(cfg *caresv3.CaresDnsResolverConfig) *corev3.TypedExtensionConfig {
		a, _ := anypb.New(cfg)
		return &corev3.TypedExtensionConfig{Name: caresName, TypedConfig: a}
	}
	for _, tc := range []struct {
		name   string
		mutate func(c *clusterv3.Cluster)
		want   string
	}{
		{"two logical endpoints", func(c *clusterv3.Cluster) {
			c.ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_LOGICAL_DNS}
			c.LoadAssignment.Endpoints[0].LbEndpoints = append(c.LoadAssignment.Endpoints[0].LbEndpoints, c.LoadAssignment.Endpoints[0].LbEndpoints[0])
		}, "exactly one lb_endpoint"},
		{"other resolver", func(c *clusterv3.Cluster) {
			c.TypedDnsResolverConfig = &corev3.TypedExtensionConfig{Name: "envoy.network.dns_resolver.apple", TypedConfig: c.TypedDnsResolverConfig.TypedConfig}
		}, `"envoy.network.dns_resolver.apple" is not supported`},
		{"filter_unroutable_families", func(c *clusterv3.Cluster) {
			c.TypedDnsResolverConfig = cares(&caresv3.CaresDnsResolverConfig{FilterUnroutableFamilies: true})
		}, "filter_unroutable_families"},
		{"resolver by name", func(c *clusterv3.Cluster) {
			c.TypedDnsResolverConfig = cares(&caresv3.CaresDnsResolverConfig{Resolvers: []*corev3.Address{{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
				Address: "dns.example.test", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 53}}}}}})
		}, "resolvers[0]"},
		{"no port", func(c *clusterv3.Cluster) {
			c.LoadAssignment.Endpoints[0].LbEndpoints[0].GetEndpoint().Address.GetSocketAddress().PortSpecifier = nil
		}, "needs a port_value"},
		{"priority", func(c *clusterv3.Cluster) { c.LoadAssignment.Endpoints[0].Priority = 1 }, "priority"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dnsCluster(t, clusterv3.Cluster_STRICT_DNS, srv, "db.example.test:80")
			tc.mutate(c)
			_, err := build(c, stats.New(), slog.New(slog.DiscardHandler))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("build error = %v, want one naming %q", err, tc.want)
			}
		})
	}
}

func TestDNSClusterStopsResolvingWhenRemoved(t *testing.T) {
	srv := startTestDNS(t)
	srv.set("db.example.test", "10.0.0.1")
	m, _ := newTestManager(t)
	if _, err := m.ApplyCDS("1", []*clusterv3.Cluster{dnsCluster(t, clusterv3.Cluster_STRICT_DNS, srv.addr, "db.example.test:80")}); err != nil {
		t.Fatal(err)
	}
	waitEndpoints(t, m, "10.0.0.1:80")
	c := m.Get("dns")
	if _, err := m.ApplyCDS("2", nil); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { c.dns.wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the removed cluster still resolves")
	}
}

func TestOriginalDstRefusesOtherDestinations(t *testing.T) {
	base := func() *clusterv3.Cluster {
		return &clusterv3.Cluster{Name: "od", ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_ORIGINAL_DST}, LbPolicy: clusterv3.Cluster_CLUSTER_PROVIDED}
	}
	c := base()
	c.LbConfig = &clusterv3.Cluster_OriginalDstLbConfig_{OriginalDstLbConfig: &clusterv3.Cluster_OriginalDstLbConfig{}}
	if _, err := build(c, stats.New(), slog.New(slog.DiscardHandler)); err != nil {
		t.Fatalf("empty original_dst_lb_config: %v", err)
	}
	for field, cfg := range map[string]*clusterv3.Cluster_OriginalDstLbConfig{
		"use_http_header":        {UseHttpHeader: true},
		"http_header_name":       {HttpHeaderName: "x-dst"},
		"upstream_port_override": {UpstreamPortOverride: wrapperspb.UInt32(8080)},
		"metadata_key":           {MetadataKey: &metadatav3.MetadataKey{Key: "k"}},
	} {
		c := base()
		c.LbConfig = &clusterv3.Cluster_OriginalDstLbConfig_{OriginalDstLbConfig: cfg}
		if _, err := build(c, stats.New(), slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "original_dst_lb_config."+field) {
			t.Errorf("%s: %v, want refused by name", field, err)
		}
	}
}

// Each address a name resolves to carries its lb_endpoint's weight.
func TestStrictDNSWeights(t *testing.T) {
	srv := startTestDNS(t)
	srv.set("a.example.test", "10.0.0.1", "10.0.0.2")
	srv.set("b.example.test", "10.0.1.1")
	m, _ := newTestManager(t)
	cfg := dnsCluster(t, clusterv3.Cluster_STRICT_DNS, srv.addr, "a.example.test:80", "b.example.test:80")
	cfg.LbPolicy = clusterv3.Cluster_ROUND_ROBIN
	cfg.LoadAssignment.Endpoints[0].LbEndpoints[0].LoadBalancingWeight = wrapperspb.UInt32(3)
	if _, err := m.ApplyCDS("1", []*clusterv3.Cluster{cfg}); err != nil {
		t.Fatal(err)
	}
	waitEndpoints(t, m, "10.0.0.1:80", "10.0.0.2:80", "10.0.1.1:80")
	n := map[string]int{}
	for range 700 {
		ep, err := m.Get("dns").Pick(netip.AddrPort{})
		if err != nil {
			t.Fatal(err)
		}
		n[ep.Address]++
	}
	if n["10.0.0.1:80"] != 300 || n["10.0.0.2:80"] != 300 || n["10.0.1.1:80"] != 100 {
		t.Errorf("weights 3, 3, 1: %v", n)
	}
}
