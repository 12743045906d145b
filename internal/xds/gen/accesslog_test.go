package gen_test

import (
	"os"

	accesslog "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"path/filepath"
	"testing"

	filelog "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxy "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"google.golang.org/protobuf/proto"

	"github.com/straitmesh/strait/internal/mesh"
	"github.com/straitmesh/strait/internal/meshconfig"
	"github.com/straitmesh/strait/internal/proxypush"
	"github.com/straitmesh/strait/internal/xds/gen"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// TestMeshAccessLog: with accessLogFile every HCM and tcp_proxy of a
// sidecar's listeners (shared outbound ones, virtualInbound) carries
// Istio's file logger with the mesh's format and encoding; without it,
// none does.
func TestMeshAccessLog(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "mtls", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := proxypush.ParseNodeID("sidecar~10.95.0.11~server.secure~secure.svc.cluster.local")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, mesh string
		check      func(t *testing.T, fl *filelog.FileAccessLog)
	}{
		{"text", "accessLogFile: /dev/stdout\n", func(t *testing.T, fl *filelog.FileAccessLog) {
			if fl.GetPath() != "/dev/stdout" || fl.GetLogFormat().GetTextFormatSource().GetInlineString() != meshconfig.DefaultAccessLogFormat {
				t.Errorf("text logger %v", fl)
			}
		}},
		{"json", "accessLogFile: /var/log/a.log\naccessLogEncoding: JSON\naccessLogFormat: '{\"code\": \"%RESPONSE_CODE%\"}'\n", func(t *testing.T, fl *filelog.FileAccessLog) {
			if fl.GetPath() != "/var/log/a.log" || fl.GetLogFormat().GetJsonFormat().GetFields()["code"].GetStringValue() != "%RESPONSE_CODE%" {
				t.Errorf("json logger %v", fl)
			}
		}},
		{"none", "trustDomain: cluster.local\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mc, err := meshconfig.Parse([]byte(tc.mesh))
			if err != nil {
				t.Fatal(err)
			}
			snap := build(t, storeOf(t, string(b)), mesh.BuildOptions{Mesh: mc})
			g := gen.New(gen.SourceFunc(func() *mesh.Snapshot { return snap }))
			res, err := g.Generate(proxy, xdsapi.ListenerType, nil, &proxypush.PushRequest{Full: true})
			if err != nil {
				t.Fatal(err)
			}
			var nHCM, nTCP int
			for _, r := range res {
				var l listener.Listener
				if err := r.GetResource().UnmarshalTo(&l); err != nil {
					t.Fatal(err)
				}
				if err := l.ValidateAll(); err != nil {
					t.Errorf("listener %s: %v", l.GetName(), err)
				}
				for _, fc := range l.GetFilterChains() {
					for _, f := range fc.GetFilters() {
						var logs []*filelog.FileAccessLog
						var m proto.Message
						switch f.GetName() {
						case "envoy.filters.network.http_connection_manager":
							m = &hcm.HttpConnectionManager{}
							nHCM++
						case "envoy.filters.network.tcp_proxy":
							m = &tcpproxy.TcpProxy{}
							nTCP++
						default:
							continue
						}
						if err := f.GetTypedConfig().UnmarshalTo(m); err != nil {
							t.Fatal(err)
						}
						switch v := m.(type) {
						case *hcm.HttpConnectionManager:
							logs = decodeLogs(t, v.GetAccessLog())
						case *tcpproxy.TcpProxy:
							logs = decodeLogs(t, v.GetAccessLog())
						}
						if tc.check == nil {
							if len(logs) != 0 {
								t.Errorf("%s/%s: access log without accessLogFile", l.GetName(), f.GetName())
							}
							continue
						}
						if len(logs) != 1 {
							t.Fatalf("%s/%s: %d access logs, want 1", l.GetName(), f.GetName(), len(logs))
						}
						tc.check(t, logs[0])
					}
				}
			}
			if nHCM == 0 || nTCP == 0 {
				t.Errorf("checked %d HCMs and %d tcp_proxies; the scenario should have both", nHCM, nTCP)
			}
		})
	}
}

func decodeLogs(t *testing.T, als []*accesslog.AccessLog) []*filelog.FileAccessLog {
	t.Helper()
	var out []*filelog.FileAccessLog
	for _, al := range als {
		if al.GetName() != "envoy.access_loggers.file" {
			t.Errorf("access log %q, want envoy.access_loggers.file", al.GetName())
		}
		fl := &filelog.FileAccessLog{}
		if err := al.GetTypedConfig().UnmarshalTo(fl); err != nil {
			t.Fatal(err)
		}
		out = append(out, fl)
	}
	return out
}
