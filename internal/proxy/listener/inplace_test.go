package listener

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	matcherv3 "github.com/cncf/xds/go/xds/type/matcher/v3"
	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	origdstv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/original_dst/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/route"
	"github.com/straitmesh/strait/internal/proxy/stats"
)

// chained is an HTTP listener on hostport with a chain per route
// configuration name, chain i matching destination port 1000+i.
func chained(t *testing.T, hostport string, rds ...string) *listenerv3.Listener {
	t.Helper()
	l := rdsListener(t, "l", hostport, rds[0], nil)
	l.FilterChains = nil
	for i, r := range rds {
		fc := rdsListener(t, "l", hostport, r, nil).FilterChains[0]
		fc.FilterChainMatch = &listenerv3.FilterChainMatch{DestinationPort: wrapperspb.UInt32(uint32(1000 + i))}
		l.FilterChains = append(l.FilterChains, fc)
	}
	return l
}

func buildOrFail(t *testing.T, l *listenerv3.Listener) *Listener {
	t.Helper()
	b, err := Build(l, Deps{Stats: stats.New()})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Which updates are filter-chain only: Envoy's rule ignores filter_chains
// and default_filter_chain and compares everything else; an update to no
// filter chains is never in place.
func TestInPlaceUpdateRule(t *testing.T) {
	base := chained(t, "127.0.0.1:80", "a", "b")
	for _, tc := range []struct {
		name   string
		change func(l *listenerv3.Listener)
		want   bool
	}{
		{"same", func(*listenerv3.Listener) {}, true},
		{"chain removed", func(l *listenerv3.Listener) { l.FilterChains = l.FilterChains[:1] }, true},
		{"chain changed", func(l *listenerv3.Listener) { l.FilterChains[1].Name = "renamed" }, true},
		{"default chain added", func(l *listenerv3.Listener) {
			l.DefaultFilterChain = proto.Clone(l.FilterChains[0]).(*listenerv3.FilterChain)
		}, true},
		{"no chains left", func(l *listenerv3.Listener) {
			l.DefaultFilterChain = l.FilterChains[0]
			l.FilterChains = nil
		}, false},
		{"stat_prefix", func(l *listenerv3.Listener) { l.StatPrefix = "x" }, false},
		{"address", func(l *listenerv3.Listener) { l.Address = addr("127.0.0.1:81") }, false},
		{"traffic_direction", func(l *listenerv3.Listener) { l.TrafficDirection = corev3.TrafficDirection_INBOUND }, false},
		{"listener_filters_timeout", func(l *listenerv3.Listener) { l.ListenerFiltersTimeout = durationpb.New(time.Second) }, false},
		{"bind_to_port", func(l *listenerv3.Listener) { l.BindToPort = wrapperspb.Bool(false) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next := proto.Clone(base).(*listenerv3.Listener)
			tc.change(next)
			if got := inPlaceUpdate(buildOrFail(t, base), buildOrFail(t, next)); got != tc.want {
				t.Errorf("inPlaceUpdate = %t, want %t", got, tc.want)
			}
		})
	}
}

// An in-place update keeps the old chain objects whose config is the same
// (wherever they are in the list) and drops the rest, the default chain
// included when it changed.
func TestAdoptChains(t *testing.T) {
	v1 := chained(t, "127.0.0.1:80", "a", "b", "c")
	v1.DefaultFilterChain = proto.Clone(v1.FilterChains[0]).(*listenerv3.FilterChain)
	v1.DefaultFilterChain.FilterChainMatch = nil
	v2 := proto.Clone(v1).(*listenerv3.Listener)
	v2.FilterChains = []*listenerv3.FilterChain{v1.FilterChains[2], v1.FilterChains[0]} // c, a; b removed
	v2.FilterChains[0].FilterChainMatch = proto.Clone(v1.FilterChains[2].GetFilterChainMatch()).(*listenerv3.FilterChainMatch)
	old, next := buildOrFail(t, v1), buildOrFail(t, v2)
	oldA, oldB, oldC, oldDefault := old.chains[0], old.chains[1], old.chains[2], old.defaultChain
	dropped := adoptChains(old, next)
	if next.chains[0] != oldC || next.chains[1] != oldA || next.defaultChain != oldDefault {
		t.Errorf("next chains = %p %p default %p, want the old c %p, a %p and default %p", next.chains[0], next.chains[1], next.defaultChain, oldC, oldA, oldDefault)
	}
	if len(dropped) != 1 || dropped[0] != oldB {
		t.Errorf("dropped = %v, want the old chain b only", dropped)
	}

	v3 := proto.Clone(v2).(*listenerv3.Listener)
	v3.DefaultFilterChain.Name = "changed"
	newer := buildOrFail(t, v3)
	dropped = adoptChains(next, newer)
	if len(dropped) != 1 || dropped[0] != oldDefault || newer.defaultChain == oldDefault {
		t.Errorf("a changed default chain: dropped %v, default kept %t; want the old default dropped", dropped, newer.defaultChain == oldDefault)
	}
}

// A listener an update replaces is listed as draining for the drain time,
// then forgotten; the gauge follows.
func TestDrainingListenerExpires(t *testing.T) {
	m, routes, st := warmingManager(t)
	m.opts.DrainTime = 50 * time.Millisecond
	if err := routes.Apply("1", emptyRoutes("r")); err != nil {
		t.Fatal(err)
	}
	a := freeTCP(t)
	if _, err := m.ApplyLDS("1", []*listenerv3.Listener{rdsListener(t, "l", a, "r", nil)}); err != nil {
		t.Fatal(err)
	}
	v2 := rdsListener(t, "l", a, "r", nil)
	v2.StatPrefix = "v2"
	if _, err := m.ApplyLDS("2", []*listenerv3.Listener{v2}); err != nil {
		t.Fatal(err)
	}
	dyn := m.Dynamic()
	if len(dyn) != 1 || dyn[0].Draining == nil || dyn[0].Draining.Version != "1" || dyn[0].Active == nil || dyn[0].Active.Version != "2" {
		t.Fatalf("Dynamic() = %+v, want l active@2 draining@1", dyn)
	}
	if g := st.Gauge("listener_manager.total_listeners_draining").Load(); g != 1 {
		t.Errorf("total_listeners_draining = %d, want 1", g)
	}
	deadline := time.Now().Add(10 * time.Second)
	for m.Dynamic()[0].Draining != nil {
		if time.Now().After(deadline) {
			t.Fatal("the draining version is still listed long after its drain time")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if g := st.Gauge("listener_manager.total_listeners_draining").Load(); g != 0 {
		t.Errorf("total_listeners_draining = %d after the drain time, want 0", g)
	}
}

// filter_chain_matcher and fcds_config would change which chain serves a
// connection: refused by name.
func TestFilterChainMatcherRefused(t *testing.T) {
	for field, set := range map[string]func(*listenerv3.Listener){
		"filter_chain_matcher": func(l *listenerv3.Listener) { l.FilterChainMatcher = &matcherv3.Matcher{} },
		"fcds_config":          func(l *listenerv3.Listener) { l.FcdsConfig = &listenerv3.Listener_FcdsConfig{Name: "x"} },
	} {
		l := chained(t, "127.0.0.1:80", "a")
		set(l)
		if _, err := Build(l, Deps{Stats: stats.New()}); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: err = %v, want it refused by name", field, err)
		}
	}
}

// Listener fields strait-proxy does not implement are refused by name;
// the ones it takes as honoured pass.
func TestUnhonouredListenerFieldsRefused(t *testing.T) {
	for field, set := range map[string]func(*listenerv3.Listener){
		"freebind":                          func(l *listenerv3.Listener) { l.Freebind = wrapperspb.Bool(true) },
		"socket_options":                    func(l *listenerv3.Listener) { l.SocketOptions = []*corev3.SocketOption{{Name: 1}} },
		"per_connection_buffer_limit_bytes": func(l *listenerv3.Listener) { l.PerConnectionBufferLimitBytes = wrapperspb.UInt32(1024) },
		"access_log":                        func(l *listenerv3.Listener) { l.AccessLog = []*accesslogv3.AccessLog{{Name: "x"}} },
		"tcp_backlog_size":                  func(l *listenerv3.Listener) { l.TcpBacklogSize = wrapperspb.UInt32(10) },
		"enable_mptcp":                      func(l *listenerv3.Listener) { l.EnableMptcp = true },
	} {
		l := chained(t, "127.0.0.1:80", "a")
		set(l)
		if _, err := Build(l, Deps{Stats: stats.New()}); err == nil || !strings.Contains(err.Error(), field+" is not supported") {
			t.Errorf("%s: err = %v, want it refused by name", field, err)
		}
	}
	l := chained(t, "127.0.0.1:80", "a")
	l.Metadata, l.StatPrefix, l.EnableReusePort, l.IgnoreGlobalConnLimit = &corev3.Metadata{}, "p", wrapperspb.Bool(true), true
	if _, err := Build(l, Deps{Stats: stats.New()}); err != nil {
		t.Errorf("fields taken as honoured: %v", err)
	}
}

// tcpConn is a live tcp_proxy connection through the listener at a whose
// original destination is dst; it has read the backend's greeting.
type tcpConn struct {
	net.Conn
	r *bufio.Reader
}

func dialVia(t *testing.T, od *fakeOrigDst, a, dst, wantName string) *tcpConn {
	t.Helper()
	od.set(dst) // before the dial: the accept loop reads it
	c, err := net.DialTimeout("tcp", a, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	tc := &tcpConn{Conn: c, r: bufio.NewReader(c)}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if line, err := tc.r.ReadString('\n'); err != nil || !strings.HasPrefix(line, wantName+" ") {
		t.Fatalf("greeting via %s = %q %v, want %s's", dst, line, err, wantName)
	}
	return tc
}

// echoes reports whether the connection still carries bytes both ways.
func (c *tcpConn) echoes() bool {
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprint(c, "x"); err != nil {
		return false
	}
	b, err := c.r.ReadByte()
	return err == nil && b == 'x'
}

// closedWithin reports whether the proxy closes the connection within d.
func (c *tcpConn) closedWithin(d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := c.r.ReadByte()
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// tcp_proxy connections and in-place updates: the connection on a chain
// the update drops is closed once the drain time has passed, the one on
// the chain it keeps goes on; a full update closes that one too.
func TestInPlaceUpdateTCPProxy(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	st := stats.New()
	cm := cluster.NewManager(log, st)
	t.Cleanup(cm.Close)
	if err := cm.AddStatic([]*clusterv3.Cluster{staticCluster("kept", nameServer(t, "kept")), staticCluster("dropped", nameServer(t, "dropped"))}); err != nil {
		t.Fatal(err)
	}
	od := &fakeOrigDst{}
	m := NewManager(Options{Logger: log, Stats: st, Routes: route.NewStore(), Clusters: cm, OriginalDst: od.get, DrainTime: 200 * time.Millisecond})
	t.Cleanup(m.Close)
	odAny, err := anypb.New(&origdstv3.OriginalDst{})
	if err != nil {
		t.Fatal(err)
	}
	listener := func(ports ...uint32) *listenerv3.Listener {
		l := &listenerv3.Listener{Name: "in", Address: addr("127.0.0.1:0"),
			ListenerFilters: []*listenerv3.ListenerFilter{{Name: "envoy.filters.listener.original_dst",
				ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: odAny}}}}
		for _, p := range ports {
			name := map[uint32]string{9001: "kept", 9002: "dropped"}[p]
			l.FilterChains = append(l.FilterChains, tcpChain(t, name, &listenerv3.FilterChainMatch{DestinationPort: wrapperspb.UInt32(p)}))
		}
		return l
	}
	if _, err := m.ApplyLDS("1", []*listenerv3.Listener{listener(9001, 9002)}); err != nil {
		t.Fatal(err)
	}
	a, _ := m.Addr("in")
	kept := dialVia(t, od, a.String(), "10.0.0.1:9001", "kept")
	dropped := dialVia(t, od, a.String(), "10.0.0.1:9002", "dropped")

	if _, err := m.ApplyLDS("2", []*listenerv3.Listener{listener(9001)}); err != nil {
		t.Fatal(err)
	}
	if a2, _ := m.Addr("in"); a2.String() != a.String() {
		t.Fatalf("the in-place update moved the socket: %s -> %s", a, a2)
	}
	if !dropped.closedWithin(10 * time.Second) {
		t.Error("the connection on the dropped chain is open long after the drain time")
	}
	if kept.closedWithin(2*m.DrainTime()) || !kept.echoes() {
		t.Error("the connection on the kept chain did not survive the in-place update")
	}
	if n := st.Counter("listener_manager.listener_in_place_updated").Load(); n != 1 {
		t.Errorf("listener_in_place_updated = %d, want 1", n)
	}

	full := listener(9001)
	full.ListenerFiltersTimeout = durationpb.New(time.Second)
	if _, err := m.ApplyLDS("3", []*listenerv3.Listener{full}); err != nil {
		t.Fatal(err)
	}
	if !kept.closedWithin(10 * time.Second) {
		t.Error("a full update left the connection open long after the drain time")
	}
}
