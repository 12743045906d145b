package tcpproxy

import (
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

// TestAccessLogOutcomes logs a proxied connection, one to a dead
// endpoint and one to an unknown cluster, over real loopback
// connections: the cluster and upstream addresses are those Envoy's
// tcp_proxy has at each outcome ("-" before it has them).
func TestAccessLogOutcomes(t *testing.T) {
	echo, dead := echoServer(t), deadAddr(t)
	path := filepath.Join(t.TempDir(), "access.log")
	files := accesslog.NewFiles(accesslog.FilesOptions{FlushInterval: time.Hour})
	defer files.Close()
	fl, err := anypb.New(&filev3.FileAccessLog{Path: path, AccessLogFormat: &filev3.FileAccessLog_LogFormat{LogFormat: &corev3.SubstitutionFormatString{
		Format: &corev3.SubstitutionFormatString_TextFormat{TextFormat: "%RESPONSE_FLAGS% %UPSTREAM_CLUSTER% %UPSTREAM_HOST% %UPSTREAM_REMOTE_ADDRESS% " +
			"%UPSTREAM_LOCAL_ADDRESS_WITHOUT_PORT% %BYTES_RECEIVED% %BYTES_SENT% %PROTOCOL% %REQUESTED_SERVER_NAME% %DOWNSTREAM_DIRECT_REMOTE_ADDRESS_WITHOUT_PORT%\n"}}}})
	if err != nil {
		t.Fatal(err)
	}
	logs, err := accesslog.Build([]*accesslogv3.AccessLog{{Name: accesslog.FileLoggerName, ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: fl}}}, files)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, cluster, endpoint, want string
	}{
		{"proxied", "be", echo, "- be " + echo + " " + echo + " 127.0.0.1 4 4 - - 127.0.0.1"},
		{"dead endpoint", "be", dead, "UF be " + dead + " - - 0 0 - - 127.0.0.1"},
		{"unknown cluster", "missing", echo, "NC - - - - 0 0 - - 127.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.Truncate(path, 0); err != nil {
				t.Fatal(err)
			}
			f := &Filter{cluster: tc.cluster, MaxConnectAttempts: 1, AccessLog: logs}
			client, done := serveOne(t, f, clusters(t, tc.endpoint), Drain{})
			if tc.name == "proxied" {
				if !echoes(client) {
					t.Fatal("no echo")
				}
			}
			client.Close()
			<-done
			files.Flush()
			data, _ := os.ReadFile(path)
			if got := strings.TrimSuffix(string(data), "\n"); got != tc.want {
				t.Errorf("line %q, want %q", got, tc.want)
			}
		})
	}
}
