package listener

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	filev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	origdstv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/original_dst/v3"
	netrbacv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/rbac/v3"
	tcpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/proxy/accesslog"
	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/route"
	"github.com/straitmesh/strait/internal/proxy/stats"
	"github.com/straitmesh/strait/internal/proxy/tcpproxy"
)

// TestAccessLogTLSPassthrough runs a real TLS client through the
// tls_inspector and tcp_proxy (TLS passed through, not terminated) to a
// real TLS backend: the access log names the SNI the inspector read and
// the upstream connection's addresses as the backend saw them.
func TestAccessLogTLSPassthrough(t *testing.T) {
	cert := testCert(t, "db.example.com")
	beLn, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	defer beLn.Close()
	peers := make(chan string, 1)
	go func() {
		c, err := beLn.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		peers <- c.RemoteAddr().String()
		_, _ = io.Copy(c, c)
	}()
	beAddr := netip.MustParseAddrPort(beLn.Addr().String())

	cm := cluster.NewManager(slog.New(slog.DiscardHandler), stats.New())
	if err := cm.AddStatic([]*clusterv3.Cluster{{
		Name: "db", AltStatName: "db-stats",
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		ConnectTimeout:       durationpb.New(time.Second),
		LoadAssignment: &endpointv3.ClusterLoadAssignment{ClusterName: "db", Endpoints: []*endpointv3.LocalityLbEndpoints{{LbEndpoints: []*endpointv3.LbEndpoint{{
			HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: &corev3.Address{Address: &corev3.Address_SocketAddress{
				SocketAddress: &corev3.SocketAddress{Address: beAddr.Addr().String(), PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(beAddr.Port())}}}}}},
		}}}}},
	}}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "access.log")
	files := accesslog.NewFiles(accesslog.FilesOptions{FlushInterval: time.Hour})
	defer files.Close()
	fl, err := anypb.New(&filev3.FileAccessLog{Path: path, AccessLogFormat: &filev3.FileAccessLog_LogFormat{LogFormat: &corev3.SubstitutionFormatString{
		Format: &corev3.SubstitutionFormatString_TextFormat{TextFormat: "%REQUESTED_SERVER_NAME% %UPSTREAM_LOCAL_ADDRESS% %UPSTREAM_REMOTE_ADDRESS% " +
			"%UPSTREAM_HOST% %UPSTREAM_CLUSTER% %UPSTREAM_CLUSTER_RAW% %DOWNSTREAM_REMOTE_ADDRESS% %DOWNSTREAM_LOCAL_ADDRESS% %PROTOCOL% %RESPONSE_CODE% %DOWNSTREAM_TLS_VERSION%\n"}}}})
	if err != nil {
		t.Fatal(err)
	}
	logs, err := accesslog.Build([]*accesslogv3.AccessLog{{Name: accesslog.FileLoggerName, ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: fl}}}, files)
	if err != nil {
		t.Fatal(err)
	}
	f, err := tcpproxy.Build(&tcpv3.TcpProxy{StatPrefix: "db", ClusterSpecifier: &tcpv3.TcpProxy_Cluster{Cluster: "db"}})
	if err != nil {
		t.Fatal(err)
	}
	f.AccessLog = logs

	client, server := tcpPair(t)
	dst := netip.MustParseAddrPort("240.240.0.2:443")
	served := make(chan struct{})
	go func() {
		defer close(served)
		c, _, ok := inspectTLS(server, 5*time.Second, false)
		if !ok {
			server.Close()
			return
		}
		f.Serve(context.Background(), c, dst, cluster.OriginalSource{}, cm, slog.New(slog.DiscardHandler))
	}()
	tc := tls.Client(client, &tls.Config{ServerName: "db.example.com", InsecureSkipVerify: true}) //nolint:gosec // test peer
	tc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := tc.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(tc, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("echo through the proxy: %q, %v", buf, err)
	}
	upLocal := <-peers
	tc.Close()
	<-served
	files.Flush()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := "db.example.com " + upLocal + " " + beAddr.String() + " " + beAddr.String() + " db-stats db " +
		client.LocalAddr().String() + " 240.240.0.2:443 - 0 -\n"
	if string(data) != want {
		t.Errorf("access log\n  %q\nwant\n  %q", data, want)
	}
	if strings.Count(string(data), "\n") != 1 {
		t.Errorf("%d lines, want 1", strings.Count(string(data), "\n"))
	}
}

// TestAccessLogRBACDenied: a connection the network RBAC filter denies
// still leaves the tcp_proxy's line, with Envoy's termination details
// naming the policy (none when an ALLOW policy matched nothing) and no
// cluster or upstream; a connection it lets through has none.
func TestAccessLogRBACDenied(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	st := stats.New()
	cm := cluster.NewManager(log, st)
	if err := cm.AddStatic([]*clusterv3.Cluster{staticCluster("be", nameServer(t, "be"))}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "access.log")
	files := accesslog.NewFiles(accesslog.FilesOptions{FlushInterval: time.Hour})
	defer files.Close()
	od := &fakeOrigDst{}
	m := NewManager(Options{Logger: log, Stats: st, Routes: route.NewStore(), Clusters: cm, OriginalDst: od.get, Workers: 2, AccessLogs: files})
	t.Cleanup(m.Close)
	fl, err := anypb.New(&filev3.FileAccessLog{Path: path, AccessLogFormat: &filev3.FileAccessLog_LogFormat{LogFormat: &corev3.SubstitutionFormatString{
		Format: &corev3.SubstitutionFormatString_TextFormat{TextFormat: "%DOWNSTREAM_LOCAL_ADDRESS% %CONNECTION_TERMINATION_DETAILS% %RESPONSE_FLAGS% %UPSTREAM_CLUSTER% %UPSTREAM_HOST% %BYTES_RECEIVED%\n"}}}})
	if err != nil {
		t.Fatal(err)
	}
	chain := func(port uint32, rules *rbacv3.RBAC) *listenerv3.FilterChain {
		tp, err := anypb.New(&tcpv3.TcpProxy{StatPrefix: "be", ClusterSpecifier: &tcpv3.TcpProxy_Cluster{Cluster: "be"},
			AccessLog: []*accesslogv3.AccessLog{{Name: accesslog.FileLoggerName, ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: fl}}}})
		if err != nil {
			t.Fatal(err)
		}
		return &listenerv3.FilterChain{FilterChainMatch: &listenerv3.FilterChainMatch{DestinationPort: wrapperspb.UInt32(port)}, Filters: []*listenerv3.Filter{
			networkRBAC(t, &netrbacv3.RBAC{StatPrefix: "tcp.", Rules: rules}),
			{Name: "envoy.filters.network.tcp_proxy", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: tp}}}}
	}
	allowNobody := &rbacv3.RBAC{Action: rbacv3.RBAC_ALLOW, Policies: map[string]*rbacv3.Policy{"ns[demo]-policy[only-9]-rule[0]": {
		Permissions: []*rbacv3.Permission{{Rule: &rbacv3.Permission_DestinationPort{DestinationPort: 9}}},
		Principals:  []*rbacv3.Principal{{Identifier: &rbacv3.Principal_Any{Any: true}}},
	}}}
	odAny, _ := anypb.New(&origdstv3.OriginalDst{})
	if _, err := m.ApplyLDS("1", []*listenerv3.Listener{{Name: "virtualInbound", Address: addr("127.0.0.1:0"),
		ListenerFilters: []*listenerv3.ListenerFilter{{Name: "envoy.filters.listener.original_dst",
			ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: odAny}}},
		FilterChains: []*listenerv3.FilterChain{chain(9001, denyPort(9001)), chain(9002, allowNobody), chain(9003, denyPort(9001))},
	}}); err != nil {
		t.Fatal(err)
	}
	in, _ := m.Addr("virtualInbound")
	for _, tc := range []struct{ dst, want string }{
		{"10.0.0.1:9001", "10.0.0.1:9001 rbac_access_denied_matched_policy[p] - - - 0"},
		{"10.0.0.1:9002", "10.0.0.1:9002 rbac_access_denied_matched_policy[none] - - - 0"},
		{"10.0.0.1:9003", "10.0.0.1:9003 - - be "},
	} {
		_ = os.Truncate(path, 0)
		od.set(tc.dst)
		dialLine(t, in.String())
		var got string
		deadline := time.Now().Add(10 * time.Second)
		for got == "" && time.Now().Before(deadline) {
			files.Flush()
			data, _ := os.ReadFile(path)
			got = string(data)
			time.Sleep(5 * time.Millisecond)
		}
		if !strings.HasPrefix(got, tc.want) || strings.Count(got, "\n") != 1 {
			t.Errorf("to %s: %q, want one line starting %q", tc.dst, got, tc.want)
		}
	}
}
