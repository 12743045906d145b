package tcpproxy

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	tcpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/stats"
)

func TestBuildRefusesWhatItDoesNotImplement(t *testing.T) {
	base := func() *tcpv3.TcpProxy {
		return &tcpv3.TcpProxy{StatPrefix: "t", ClusterSpecifier: &tcpv3.TcpProxy_Cluster{Cluster: "be"}}
	}
	for name, tc := range map[string]struct {
		mod  func(*tcpv3.TcpProxy)
		want string // "" means accepted
	}{
		"plain": {func(*tcpv3.TcpProxy) {}, ""},
		"all honoured": {func(tp *tcpv3.TcpProxy) {
			tp.IdleTimeout = durationpb.New(0)
			tp.MaxConnectAttempts = wrapperspb.UInt32(3)
			tp.MaxDownstreamConnectionDuration = durationpb.New(time.Hour)
		}, ""},
		"hash_policy":  {func(tp *tcpv3.TcpProxy) { tp.HashPolicy = []*typev3.HashPolicy{{}} }, "hash_policy is not supported"},
		"tunneling":    {func(tp *tcpv3.TcpProxy) { tp.TunnelingConfig = &tcpv3.TcpProxy_TunnelingConfig{Hostname: "x"} }, "tunneling_config is not supported"},
		"backoff":      {func(tp *tcpv3.TcpProxy) { tp.BackoffOptions = &corev3.BackoffStrategy{} }, "backoff_options is not supported"},
		"attempts 0":   {func(tp *tcpv3.TcpProxy) { tp.MaxConnectAttempts = wrapperspb.UInt32(0) }, "max_connect_attempts is 0"},
		"attempts 1":   {func(tp *tcpv3.TcpProxy) { tp.MaxConnectAttempts = wrapperspb.UInt32(1) }, ""},
		"duration 1ms": {func(tp *tcpv3.TcpProxy) { tp.MaxDownstreamConnectionDuration = durationpb.New(time.Millisecond) }, ""},
		"weights 0": {func(tp *tcpv3.TcpProxy) {
			tp.ClusterSpecifier = &tcpv3.TcpProxy_WeightedClusters{WeightedClusters: &tcpv3.TcpProxy_WeightedCluster{Clusters: []*tcpv3.TcpProxy_WeightedCluster_ClusterWeight{
				{Name: "a", Weight: 0}}}}
		}, "total weight is 0"},
		"duration 0": {func(tp *tcpv3.TcpProxy) { tp.MaxDownstreamConnectionDuration = durationpb.New(0) }, "max_downstream_connection_duration 0s is not a valid duration"},
		"idle < 0":   {func(tp *tcpv3.TcpProxy) { tp.IdleTimeout = durationpb.New(-time.Second) }, "idle_timeout -1s is not a valid duration"},
		"weighted metadata": {func(tp *tcpv3.TcpProxy) {
			tp.ClusterSpecifier = &tcpv3.TcpProxy_WeightedClusters{WeightedClusters: &tcpv3.TcpProxy_WeightedCluster{Clusters: []*tcpv3.TcpProxy_WeightedCluster_ClusterWeight{
				{Name: "a", Weight: 1}, {Name: "b", Weight: 1, MetadataMatch: &corev3.Metadata{}}}}}
		}, "weighted_clusters.clusters[1].metadata_match is not supported"},
	} {
		t.Run(name, func(t *testing.T) {
			tp := base()
			tc.mod(tp)
			f, err := Build(tp)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Build: %v, want accepted", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Build: %v, want an error containing %q", err, tc.want)
			case tc.want == "" && name == "all honoured" && (f.IdleTimeout != 0 || f.MaxConnectAttempts != 3 || f.MaxDuration != time.Hour):
				t.Fatalf("Build read %+v", f)
			case tc.want == "" && name == "plain" && (f.IdleTimeout != time.Hour || f.MaxConnectAttempts != 1 || f.MaxDuration != 0):
				t.Fatalf("defaults %+v, want Envoy's (1 h idle, 1 attempt, no max duration)", f)
			}
		})
	}
}

// clusters serves one STATIC cluster "be" with the given endpoints.
func clusters(t *testing.T, addrs ...string) *cluster.Manager {
	t.Helper()
	var lbs []*endpointv3.LbEndpoint
	for _, a := range addrs {
		ap := netip.MustParseAddrPort(a)
		lbs = append(lbs, &endpointv3.LbEndpoint{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
			Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
				Address: ap.Addr().String(), PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(ap.Port())}}}}}}})
	}
	cm := cluster.NewManager(slog.New(slog.DiscardHandler), stats.New())
	err := cm.AddStatic([]*clusterv3.Cluster{{
		Name:                 "be",
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		ConnectTimeout:       durationpb.New(time.Second),
		LoadAssignment:       &endpointv3.ClusterLoadAssignment{ClusterName: "be", Endpoints: []*endpointv3.LocalityLbEndpoints{{LbEndpoints: lbs}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return cm
}

// echoServer answers every connection with what it reads.
func echoServer(t *testing.T) string {
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
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }() // an echo: its end is the peer's
		}
	}()
	return ln.Addr().String()
}

// deadAddr is a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	// A socket bound but not listening: a connect to it is refused, and,
	// bound without SO_REUSEADDR, its port can't be handed to a listener
	// the test opens later (a closed listener's port can, and the "dead"
	// endpoint would then answer).
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), uint16(sa.(*syscall.SockaddrInet4).Port)).String()
}

// serveOne runs f on one proxied connection and returns the client side
// and a channel closed when Serve returned.
func serveOne(t *testing.T, f *Filter, cs Clusters, d Drain) (net.Conn, chan struct{}) {
	t.Helper()
	client, down := pair(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.ServeDrain(context.Background(), down, netip.AddrPort{}, cluster.OriginalSource{}, cs, slog.New(slog.DiscardHandler), d)
	}()
	t.Cleanup(func() { client.Close(); <-done })
	return client, done
}

// echoes reports whether a round trip through c comes back.
func echoes(c net.Conn) bool {
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "ping"); err != nil {
		return false
	}
	buf := make([]byte, 4)
	_, err := io.ReadFull(c, buf)
	return err == nil && string(buf) == "ping"
}

func TestMaxConnectAttempts(t *testing.T) {
	// Round robin over a dead endpoint and a live one: every other first
	// attempt fails.
	cs := clusters(t, deadAddr(t), echoServer(t))
	for _, tc := range []struct {
		attempts uint32
		wantAll  bool
	}{{1, false}, {2, true}} {
		f := &Filter{cluster: "be", MaxConnectAttempts: tc.attempts}
		ok := 0
		for range 4 {
			c, _ := serveOne(t, f, cs, Drain{})
			if echoes(c) {
				ok++
			}
		}
		if tc.wantAll && ok != 4 {
			t.Errorf("max_connect_attempts %d: %d of 4 connections got through, want all (the second attempt picks the live endpoint)", tc.attempts, ok)
		}
		if !tc.wantAll && ok != 2 {
			t.Errorf("max_connect_attempts %d: %d of 4 connections got through, want 2 (no retry after a failed connect)", tc.attempts, ok)
		}
	}
}

// closesWithin reports whether Serve ends (closing the client's
// connection) before limit.
func closesWithin(c net.Conn, done chan struct{}, limit time.Duration) bool {
	select {
	case <-done:
	case <-time.After(limit):
		return false
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := c.Read(make([]byte, 1))
	return err != nil
}

func TestMaxDownstreamConnectionDuration(t *testing.T) {
	cs := clusters(t, echoServer(t))
	const max = 300 * time.Millisecond
	f := &Filter{cluster: "be", MaxConnectAttempts: 1, IdleTimeout: time.Hour, MaxDuration: max}
	start := time.Now()
	c, done := serveOne(t, f, cs, Drain{})
	if !echoes(c) {
		t.Fatal("no echo through the proxy")
	}
	if !closesWithin(c, done, 10*time.Second) {
		t.Fatal("the connection outlived max_downstream_connection_duration")
	}
	if el := time.Since(start); el < max {
		t.Fatalf("closed after %v, before max_downstream_connection_duration %v", el, max)
	}
}

func TestDrainClosesAfterDrainTime(t *testing.T) {
	cs := clusters(t, echoServer(t))
	f := &Filter{cluster: "be", MaxConnectAttempts: 1, IdleTimeout: time.Hour}
	started, start := context.WithCancel(context.Background())
	defer start()
	const drainTime = 300 * time.Millisecond
	c, done := serveOne(t, f, cs, Drain{Started: started, Time: drainTime})
	other, otherDone := serveOne(t, f, cs, Drain{}) // another listener's: never drains
	if !echoes(c) || !echoes(other) {
		t.Fatal("no echo through the proxy")
	}
	select {
	case <-done:
		t.Fatal("the connection closed before its listener drained")
	case <-time.After(2 * drainTime):
	}
	// The clock starts before the drain does: read after start(), it could
	// begin later than the connection's drain timer on a loaded machine.
	began := time.Now()
	start()
	if !echoes(c) {
		t.Fatal("the connection stopped carrying bytes as soon as the drain started, want it to go on for the drain time")
	}
	if !closesWithin(c, done, 10*time.Second) {
		t.Fatal("a draining tcp_proxy connection was not closed after the drain time")
	}
	if el := time.Since(began); el < drainTime {
		t.Fatalf("closed %v after the drain started, before the drain time %v", el, drainTime)
	}
	select {
	case <-otherDone:
		t.Fatal("a connection of a listener that did not drain was closed")
	default:
	}
	if !echoes(other) {
		t.Fatal("a connection of a listener that did not drain stopped working")
	}
}

func TestWeightedClusters(t *testing.T) {
	f, err := Build(&tcpv3.TcpProxy{StatPrefix: "t", ClusterSpecifier: &tcpv3.TcpProxy_WeightedClusters{WeightedClusters: &tcpv3.TcpProxy_WeightedCluster{
		Clusters: []*tcpv3.TcpProxy_WeightedCluster_ClusterWeight{{Name: "never", Weight: 0}, {Name: "a", Weight: 1}, {Name: "b", Weight: 3}}}}})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for range 400 {
		seen[f.pickCluster()]++
	}
	if seen["never"] != 0 || seen["a"] < 50 || seen["a"] > 150 || seen["b"] < 250 {
		t.Fatalf("picks %v; want a about a quarter, b three quarters (weights 1 and 3), never the weight-0 cluster", seen)
	}
}

// TestConnectAttemptsAllFail: with every endpoint down, exactly
// max_connect_attempts connects are tried, then the client is closed.
func TestConnectAttemptsAllFail(t *testing.T) {
	cs := clusters(t, deadAddr(t))
	f := &Filter{cluster: "be", MaxConnectAttempts: 2}
	c, done := serveOne(t, f, cs, Drain{})
	if !closesWithin(c, done, 10*time.Second) {
		t.Fatal("the client was not closed after the connect attempts failed")
	}
	if got := cs.Get("be").Stats.CxConnectFail.Load(); got != 2 {
		t.Fatalf("%d connect attempts failed, want max_connect_attempts 2", got)
	}
}

// TestDrainNeverStarted: a connection of a listener whose drain never
// started ends normally when its client leaves.
func TestDrainNeverStarted(t *testing.T) {
	cs := clusters(t, echoServer(t))
	f := &Filter{cluster: "be", MaxConnectAttempts: 1, IdleTimeout: time.Hour}
	never, stop := context.WithCancel(context.Background())
	defer stop()
	c, done := serveOne(t, f, cs, Drain{Started: never, Time: time.Hour})
	if !echoes(c) {
		t.Fatal("no echo through the proxy")
	}
	c.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after the client left")
	}
}
