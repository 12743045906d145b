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
	filev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	tcpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/straitmesh/strait/internal/proxy/accesslog"
	"github.com/straitmesh/strait/internal/proxy/cluster"
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
		io.Copy(c, c)
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
