package gen

import (
	accesslog "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	filelog "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxy "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"google.golang.org/protobuf/proto"

	"github.com/straitmesh/strait/internal/mesh"
	"github.com/straitmesh/strait/internal/meshconfig"
)

// The mesh config's access log (accessLogFile, accessLogEncoding,
// accessLogFormat) on every HTTP connection manager and tcp_proxy of a
// sidecar's listeners, as Istio's AccessLogBuilder does without a
// Telemetry resource (pilot/pkg/networking/core/accesslog.go, the file
// logger of pilot/pkg/model FileAccessLogFromMeshConfig).

const fileAccessLogName = "envoy.access_loggers.file"

// meshAccessLog is the AccessLog of the mesh config, nil when there is
// none.
func meshAccessLog(c *meshconfig.Config) *accesslog.AccessLog {
	return fileAccessLog(c.AccessLog)
}

// fileAccessLog is Envoy's file access log writing al (nil: none).
func fileAccessLog(al *meshconfig.AccessLog) *accesslog.AccessLog {
	if al == nil {
		return nil
	}
	format := &core.SubstitutionFormatString{}
	if al.JSON {
		format.Format = &core.SubstitutionFormatString_JsonFormat{JsonFormat: al.JSONFormat}
		format.JsonFormatOptions = &core.JsonFormatOptions{SortProperties: false}
	} else {
		format.Format = &core.SubstitutionFormatString_TextFormatSource{TextFormatSource: &core.DataSource{
			Specifier: &core.DataSource_InlineString{InlineString: al.Text},
		}}
	}
	return &accesslog.AccessLog{
		Name: fileAccessLogName,
		ConfigType: &accesslog.AccessLog_TypedConfig{TypedConfig: mustAny(&filelog.FileAccessLog{
			Path:            al.Path,
			AccessLogFormat: &filelog.FileAccessLog_LogFormat{LogFormat: format},
		})},
	}
}

// withAccessLogs adds the access logs of tp (telemetryapi.go) to the
// terminal filters of ls, by each listener's mode; without Telemetry
// access logging (tp or its logs nil), the mesh's access log. It returns
// ls.
func withAccessLogs(snap *mesh.Snapshot, tp *telemetryPolicy, ls ...*listener.Listener) []*listener.Listener {
	// Filter chains may share a filter (the PERMISSIVE trio of mtls.go):
	// each gets the logs once.
	done := map[*listener.Filter]bool{}
	for _, l := range ls {
		var als []*accesslog.AccessLog
		if tp == nil || tp.logs == nil || tp.logs[listenerMode(l)].mesh {
			if al := meshAccessLog(snap.Mesh); al != nil {
				als = append(als, al)
			}
		} else {
			for _, al := range tp.logs[listenerMode(l)].logs {
				als = append(als, fileAccessLog(al))
			}
		}
		if len(als) == 0 {
			continue
		}
		for _, fc := range l.GetFilterChains() {
			for _, f := range fc.GetFilters() {
				if !done[f] {
					done[f] = true
					addAccessLog(f, als...)
				}
			}
		}
	}
	return ls
}

// addAccessLog appends al to an HTTP connection manager or tcp_proxy
// filter (its typed_config is decoded and encoded again).
func addAccessLog(f *listener.Filter, al ...*accesslog.AccessLog) {
	tc := f.GetTypedConfig()
	var m proto.Message
	switch f.GetName() {
	case hcmFilterName:
		h := &hcm.HttpConnectionManager{}
		if tc.UnmarshalTo(h) != nil {
			return
		}
		h.AccessLog = append(h.AccessLog, al...)
		m = h
	case tcpProxyFilterName:
		t := &tcpproxy.TcpProxy{}
		if tc.UnmarshalTo(t) != nil {
			return
		}
		t.AccessLog = append(t.AccessLog, al...)
		m = t
	default:
		return
	}
	f.ConfigType = &listener.Filter_TypedConfig{TypedConfig: mustAny(m)}
}
