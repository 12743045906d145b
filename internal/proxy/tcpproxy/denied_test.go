package tcpproxy

import (
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/straitmesh/strait/internal/proxy/accesslog"
)

// LogDenied writes the line Envoy's tcp_proxy writes for a connection a
// filter before it closed: the termination details and the downstream
// addresses, no cluster; a filter without access_log writes nothing.
func TestLogDenied(t *testing.T) {
	path := filepath.Join(t.TempDir(), "access.log")
	files := accesslog.NewFiles(accesslog.FilesOptions{FlushInterval: time.Hour})
	defer files.Close()
	fl, err := anypb.New(&filev3.FileAccessLog{Path: path, AccessLogFormat: &filev3.FileAccessLog_LogFormat{LogFormat: &corev3.SubstitutionFormatString{
		Format: &corev3.SubstitutionFormatString_TextFormat{TextFormat: "%CONNECTION_TERMINATION_DETAILS% %UPSTREAM_CLUSTER% %DOWNSTREAM_LOCAL_ADDRESS% %DOWNSTREAM_DIRECT_REMOTE_ADDRESS_WITHOUT_PORT%\n"}}}})
	if err != nil {
		t.Fatal(err)
	}
	logs, err := accesslog.Build([]*accesslogv3.AccessLog{{Name: accesslog.FileLoggerName, ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: fl}}}, files)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	dst := netip.MustParseAddrPort("10.0.0.7:8080")

	(&Filter{cluster: "be"}).LogDenied(server, dst, time.Now(), "rbac_access_denied_matched_policy[none]")
	files.Flush()
	if data, _ := os.ReadFile(path); len(data) != 0 {
		t.Errorf("a filter without access_log wrote %q", data)
	}

	(&Filter{cluster: "be", AccessLog: logs}).LogDenied(server, dst, time.Now(), "rbac_access_denied_matched_policy[none]")
	files.Flush()
	data, _ := os.ReadFile(path)
	if got, want := strings.TrimSuffix(string(data), "\n"), "rbac_access_denied_matched_policy[none] - 10.0.0.7:8080 127.0.0.1"; got != want {
		t.Errorf("line %q, want %q", got, want)
	}
}
