package listener

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	origdstv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/original_dst/v3"
	tcpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/route"
	"github.com/straitmesh/strait/internal/proxy/stats"
)

// nameServer accepts connections and writes its name, then echoes a line.
func nameServer(t *testing.T, name string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				fmt.Fprintf(c, "%s %s\n", name, c.RemoteAddr().(*net.TCPAddr).IP)
				_, _ = io.Copy(c, c) // echo until the proxy half-closes
			}()
		}
	}()
	return ln.Addr().String()
}

func addr(hostport string) *corev3.Address {
	ap := netip.MustParseAddrPort(hostport)
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address: ap.Addr().String(), PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(ap.Port())}}}}
}

func staticCluster(name, ep string) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name:                 name,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		LoadAssignment: &endpointv3.ClusterLoadAssignment{ClusterName: name, Endpoints: []*endpointv3.LocalityLbEndpoints{{
			LbEndpoints: []*endpointv3.LbEndpoint{{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{
				Endpoint: &endpointv3.Endpoint{Address: addr(ep)}}}}}}},
	}
}

func tcpChain(t *testing.T, cluster string, match *listenerv3.FilterChainMatch) *listenerv3.FilterChain {
	a, err := anypb.New(&tcpv3.TcpProxy{StatPrefix: cluster, ClusterSpecifier: &tcpv3.TcpProxy_Cluster{Cluster: cluster}})
	if err != nil {
		t.Fatal(err)
	}
	return &listenerv3.FilterChain{FilterChainMatch: match, Filters: []*listenerv3.Filter{{
		Name: "envoy.filters.network.tcp_proxy", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: a}}}}
}

type fakeOrigDst struct {
	mu  sync.Mutex
	dst netip.AddrPort
}

func (f *fakeOrigDst) set(d string) {
	f.mu.Lock()
	f.dst = netip.MustParseAddrPort(d)
	f.mu.Unlock()
}

func (f *fakeOrigDst) get(net.Conn) (netip.AddrPort, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.dst.IsValid() {
		return f.dst, errors.New("not redirected")
	}
	return f.dst, nil
}

func dialLine(t *testing.T, a string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", a, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		return "closed"
	}
	// Half-close: the echo must still come back.
	fmt.Fprint(c, "ping")
	_ = c.(*net.TCPConn).CloseWrite()
	rest, _ := io.ReadAll(r)
	if string(rest) != "ping" {
		t.Errorf("echo after half-close = %q", rest)
	}
	return strings.TrimSpace(line)
}

func TestOriginalDstHandoff(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	st := stats.New()
	cm := cluster.NewManager(log, st)
	exact, wild, own, pass := nameServer(t, "exact"), nameServer(t, "wild"), nameServer(t, "own"), nameServer(t, "passthrough")
	if err := cm.AddStatic([]*clusterv3.Cluster{
		staticCluster("exact", exact), staticCluster("wild", wild), staticCluster("own", own),
		{Name: "PassthroughCluster", ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_ORIGINAL_DST},
			LbPolicy: clusterv3.Cluster_CLUSTER_PROVIDED},
	}); err != nil {
		t.Fatal(err)
	}
	od := &fakeOrigDst{}
	m := NewManager(Options{Logger: log, Stats: st, Routes: route.NewStore(), Clusters: cm, OriginalDst: od.get, Workers: 2})
	t.Cleanup(m.Close)

	odAny, _ := anypb.New(&origdstv3.OriginalDst{})
	ls := []*listenerv3.Listener{
		{Name: "virtualOutbound", Address: addr("127.0.0.1:0"), UseOriginalDst: wrapperspb.Bool(true),
			FilterChains: []*listenerv3.FilterChain{
				tcpChain(t, "own", &listenerv3.FilterChainMatch{DestinationPort: wrapperspb.UInt32(7777)}),
				tcpChain(t, "PassthroughCluster", nil),
			}},
		{Name: "10.0.0.1_8080", Address: addr("10.0.0.1:8080"), BindToPort: wrapperspb.Bool(false),
			FilterChains: []*listenerv3.FilterChain{tcpChain(t, "exact", nil)}},
		{Name: "0.0.0.0_8080", Address: addr("0.0.0.0:8080"), BindToPort: wrapperspb.Bool(false),
			FilterChains: []*listenerv3.FilterChain{tcpChain(t, "wild", nil)}},
		{Name: "virtualInbound", Address: addr("127.0.0.1:0"),
			ListenerFilters: []*listenerv3.ListenerFilter{{Name: "envoy.filters.listener.original_dst",
				ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: odAny}}},
			FilterChains: []*listenerv3.FilterChain{
				tcpChain(t, "exact", &listenerv3.FilterChainMatch{DestinationPort: wrapperspb.UInt32(9000)}),
				tcpChain(t, "wild", &listenerv3.FilterChainMatch{DestinationPort: wrapperspb.UInt32(9000),
					PrefixRanges: []*corev3.CidrRange{{AddressPrefix: "10.1.0.0", PrefixLen: wrapperspb.UInt32(16)}}}),
				tcpChain(t, "PassthroughCluster", nil),
			}},
	}
	if _, err := m.ApplyLDS("1", ls); err != nil {
		t.Fatal(err)
	}
	out, _ := m.Addr("virtualOutbound")
	in, _ := m.Addr("virtualInbound")
	passIP := netip.MustParseAddrPort(pass)

	for _, tc := range []struct {
		listener net.Addr
		dst      string
		want     string
	}{
		{out, "10.0.0.1:8080", "exact 127.0.0.1"},      // exact IP:port listener
		{out, "10.0.0.2:8080", "wild 127.0.0.1"},       // 0.0.0.0:PORT listener
		{out, "10.0.0.3:7777", "own 127.0.0.1"},        // own chains, port match
		{out, pass, "passthrough 127.0.0.1"},           // own default chain -> ORIGINAL_DST
		{in, "10.2.0.1:9000", "exact 127.0.0.1"},       // destination_port match
		{in, "10.1.2.3:9000", "wild 127.0.0.1"},        // port + longer prefix wins
		{in, passIP.String(), "passthrough 127.0.0.1"}, // default chain, ORIGINAL_DST to the original destination
	} {
		od.set(tc.dst)
		if got := dialLine(t, tc.listener.String()); got != tc.want {
			t.Errorf("via %s to original dst %s: got %q, want %q", tc.listener, tc.dst, got, tc.want)
		}
	}

	// A re-push of identical listeners changes nothing; removing the
	// listener closes its socket but not a live connection.
	od.set("10.0.0.1:8080") // before the dial: the accept loop reads it
	live, err := net.Dial("tcp", out.String())
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	r := bufio.NewReader(live)
	if line, _ := r.ReadString('\n'); !strings.HasPrefix(line, "exact") {
		t.Fatalf("live conn got %q", line)
	}
	if _, err := m.ApplyLDS("2", ls); err != nil {
		t.Fatal(err)
	}
	if a2, _ := m.Addr("virtualOutbound"); a2.String() != out.String() {
		t.Errorf("identical re-push rebound the socket: %s -> %s", out, a2)
	}
	if _, err := m.ApplyLDS("3", ls[1:]); err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("tcp", out.String(), time.Second); err == nil {
		c.Close()
		t.Error("removed listener still accepts")
	}
	fmt.Fprint(live, "still")
	live.SetDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 5)
	if _, err := io.ReadFull(r, buf); err != nil || string(buf) != "still" {
		t.Errorf("live connection after listener removal: %q %v", buf, err)
	}
}

func TestBuildRejectsUnsupported(t *testing.T) {
	st := stats.New()
	for name, l := range map[string]*listenerv3.Listener{
		"unknown network filter": {Name: "x", Address: addr("127.0.0.1:1"), FilterChains: []*listenerv3.FilterChain{{
			Filters: []*listenerv3.Filter{{Name: "envoy.filters.network.redis_proxy"}}}}},
		"unknown listener filter": {Name: "x", Address: addr("127.0.0.1:1"),
			ListenerFilters: []*listenerv3.ListenerFilter{{Name: "envoy.filters.listener.proxy_protocol"}}},
	} {
		if _, err := Build(l, Deps{Stats: st, Routes: route.NewStore()}); err == nil || !strings.Contains(err.Error(), `"x"`) {
			t.Errorf("%s: err = %v, want an error naming listener x", name, err)
		}
	}
}
