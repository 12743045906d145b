package listener

import (
	"bufio"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	origdstv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/original_dst/v3"
	origsrcv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/original_src/v3"
	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/route"
	"github.com/straitmesh/strait/internal/proxy/stats"
	"github.com/straitmesh/strait/internal/testreq"
)

func typed(t *testing.T, m proto.Message) *listenerv3.ListenerFilter_TypedConfig {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return &listenerv3.ListenerFilter_TypedConfig{TypedConfig: a}
}

func TestBuildOriginalSrc(t *testing.T) {
	st := stats.New()
	deps := Deps{Stats: st, Routes: route.NewStore()}
	origDst := &listenerv3.ListenerFilter{Name: originalDstFilter, ConfigType: typed(t, &origdstv3.OriginalDst{})}
	for _, tc := range []struct {
		name        string
		transparent *wrapperspb.BoolValue
		filters     []*listenerv3.ListenerFilter
		want        *OriginalSrc // nil: no filter
		wantErr     string
	}{
		{name: "none"},
		{
			name:        "virtualInbound TPROXY",
			transparent: wrapperspb.Bool(true),
			filters: []*listenerv3.ListenerFilter{origDst,
				{Name: originalSrcFilter, ConfigType: typed(t, &origsrcv3.OriginalSrc{Mark: 1337})}},
			want: &OriginalSrc{Mark: 1337},
		},
		{
			name:    "mark 0 sets no mark",
			filters: []*listenerv3.ListenerFilter{{Name: originalSrcFilter, ConfigType: typed(t, &origsrcv3.OriginalSrc{})}},
			want:    &OriginalSrc{},
		},
		{
			name:    "max mark",
			filters: []*listenerv3.ListenerFilter{{Name: originalSrcFilter, ConfigType: typed(t, &origsrcv3.OriginalSrc{Mark: 0xffffffff})}},
			want:    &OriginalSrc{Mark: 0xffffffff},
		},
		{
			name:    "no typed_config",
			filters: []*listenerv3.ListenerFilter{{Name: originalSrcFilter}},
			want:    &OriginalSrc{},
		},
		{
			name:    "recognised by type URL",
			filters: []*listenerv3.ListenerFilter{{Name: "my.original_src", ConfigType: typed(t, &origsrcv3.OriginalSrc{Mark: 7})}},
			want:    &OriginalSrc{Mark: 7},
		},
		{
			name:    "wrong typed_config",
			filters: []*listenerv3.ListenerFilter{{Name: originalSrcFilter, ConfigType: typed(t, &origdstv3.OriginalDst{})}},
			wantErr: "typed_config is",
		},
		{
			name:    "bind_port",
			filters: []*listenerv3.ListenerFilter{{Name: originalSrcFilter, ConfigType: typed(t, &origsrcv3.OriginalSrc{BindPort: true, Mark: 1})}},
			wantErr: "bind_port is not supported",
		},
		{
			name: "twice",
			filters: []*listenerv3.ListenerFilter{
				{Name: originalSrcFilter, ConfigType: typed(t, &origsrcv3.OriginalSrc{Mark: 1})},
				{Name: originalSrcFilter, ConfigType: typed(t, &origsrcv3.OriginalSrc{Mark: 2})}},
			wantErr: "more than once",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &listenerv3.Listener{Name: "virtualInbound", Address: addr("0.0.0.0:15006"), Transparent: tc.transparent,
				ListenerFilters: tc.filters, FilterChains: []*listenerv3.FilterChain{tcpChain(t, "InboundPassthroughCluster", nil)}}
			got, err := Build(l, deps)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), `"virtualInbound"`) {
					t.Fatalf("err = %v, want one containing %q naming the listener", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Transparent != tc.transparent.GetValue() {
				t.Errorf("Transparent = %v, want %v", got.Transparent, tc.transparent.GetValue())
			}
			switch {
			case tc.want == nil && got.OriginalSrc != nil:
				t.Errorf("OriginalSrc = %+v, want none", *got.OriginalSrc)
			case tc.want != nil && (got.OriginalSrc == nil || *got.OriginalSrc != *tc.want):
				t.Errorf("OriginalSrc = %+v, want %+v", got.OriginalSrc, *tc.want)
			}
		})
	}
}

// TestOriginalSrcTCP runs a transparent listener with original_src in
// front of a tcp_proxy on loopback: the upstream sees the client's address
// (not the cluster's upstream_bind_config source), and the listening socket
// has IP_TRANSPARENT.
func TestOriginalSrcTCP(t *testing.T) {
	testreq.Root(t, "IP_TRANSPARENT needs CAP_NET_ADMIN")
	up := nameServer(t, "app")
	cm := cluster.NewManager(slog.Default(), stats.New())
	c := staticCluster("inbound", up)
	c.UpstreamBindConfig = &corev3.BindConfig{SourceAddress: addr("127.0.0.6:0").GetSocketAddress()}
	if err := cm.AddStatic([]*clusterv3.Cluster{c}); err != nil {
		t.Fatal(err)
	}
	st := stats.New()
	m := NewManager(Options{Logger: slog.Default(), Stats: st, Routes: route.NewStore(), Clusters: cm,
		OriginalDst: func(net.Conn) (netip.AddrPort, error) { return netip.AddrPort{}, errors.New("not redirected") }})
	defer m.Close()
	mk := func(name, bind string, osrc bool) *listenerv3.Listener {
		l := &listenerv3.Listener{Name: name, Address: addr(bind), FilterChains: []*listenerv3.FilterChain{tcpChain(t, "inbound", nil)}}
		if osrc {
			l.Transparent = wrapperspb.Bool(true)
			l.ListenerFilters = []*listenerv3.ListenerFilter{{Name: originalSrcFilter, ConfigType: typed(t, &origsrcv3.OriginalSrc{Mark: 1337})}}
		}
		return l
	}
	if _, err := m.ApplyLDS("1", []*listenerv3.Listener{mk("virtualInbound", "127.0.0.1:0", true), mk("plain", "127.0.0.1:0", false)}); err != nil {
		t.Fatal(err)
	}
	in, _ := m.Addr("virtualInbound")
	plain, _ := m.Addr("plain")
	if v := listenerSockopt(t, m, "virtualInbound"); v != 1 {
		t.Errorf("virtualInbound IP_TRANSPARENT = %d, want 1", v)
	}
	if v := listenerSockopt(t, m, "plain"); v != 0 {
		t.Errorf("plain IP_TRANSPARENT = %d, want 0", v)
	}

	dialFrom := func(src string, to net.Addr) string {
		d := net.Dialer{Timeout: 2 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
		cn, err := d.Dial("tcp", to.String())
		if err != nil {
			t.Fatal(err)
		}
		defer cn.Close()
		cn.SetDeadline(time.Now().Add(5 * time.Second))
		line, err := bufio.NewReader(cn).ReadString('\n')
		if err != nil {
			t.Fatalf("read via %s: %v", to, err)
		}
		return strings.TrimSpace(line)
	}
	for _, src := range []string{"127.0.0.10", "127.0.0.11"} {
		if got := dialFrom(src, in); got != "app "+src {
			t.Errorf("from %s via original_src listener: upstream saw %q, want %q", src, got, "app "+src)
		}
	}
	if got := dialFrom("127.0.0.10", plain); got != "app 127.0.0.6" {
		t.Errorf("without original_src: upstream saw %q, want the bind address 127.0.0.6", got)
	}

	// Dropping transparent on an update flips the option on the same socket.
	if _, err := m.ApplyLDS("2", []*listenerv3.Listener{mk("virtualInbound", "127.0.0.1:0", false), mk("plain", "127.0.0.1:0", false)}); err != nil {
		t.Fatal(err)
	}
	if v := listenerSockopt(t, m, "virtualInbound"); v != 0 {
		t.Errorf("after update: IP_TRANSPARENT = %d, want 0", v)
	}
	if got := dialFrom("127.0.0.10", in); got != "app 127.0.0.6" {
		t.Errorf("after removing original_src: upstream saw %q, want 127.0.0.6", got)
	}
}

func listenerSockopt(t *testing.T, m *Manager, name string) int {
	t.Helper()
	m.mu.Lock()
	s := m.sockets[name]
	m.mu.Unlock()
	if s == nil {
		t.Fatalf("no socket for %s", name)
	}
	raw, err := s.ln.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var v int
	var serr error
	_ = raw.Control(func(fd uintptr) { v, serr = unix.GetsockoptInt(int(fd), unix.SOL_IP, unix.IP_TRANSPARENT) })
	if serr != nil {
		t.Fatal(serr)
	}
	return v
}
