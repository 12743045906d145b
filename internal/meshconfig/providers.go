package meshconfig

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"

	"github.com/straitmesh/strait/internal/proxy/accesslog"
)

// Providers are the extension providers a Telemetry resource names, by
// name: extensionProviders' zipkin and opentelemetry tracers, its
// envoyFileAccessLog loggers and its prometheus metrics, with Istio's
// built-in "envoy" (a text log on /dev/stdout) and "prometheus" unless an
// entry of the same name replaces them (pkg/config/mesh DefaultMeshConfig).
type Providers struct {
	Tracing   map[string]TracingProvider
	AccessLog map[string]*AccessLog
	Metrics   map[string]bool
}

// The built-in providers' names.
const (
	BuiltinAccessLogProvider = "envoy"
	BuiltinMetricsProvider   = "prometheus"
)

func builtinProviders() Providers {
	return Providers{
		Tracing:   map[string]TracingProvider{},
		AccessLog: map[string]*AccessLog{BuiltinAccessLogProvider: {Path: "/dev/stdout", Text: DefaultAccessLogFormat}},
		Metrics:   map[string]bool{BuiltinMetricsProvider: true},
	}
}

// find is Istio's fetchProvider: names match without regard to case (an
// exact match first, then the first such name in byte order).
func find[V any](m map[string]V, name string) (V, bool) {
	if v, ok := m[name]; ok {
		return v, true
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if strings.EqualFold(k, name) {
			return m[k], true
		}
	}
	var zero V
	return zero, false
}

// TracingProvider returns the tracing provider named name.
func (p Providers) TracingProvider(name string) (TracingProvider, bool) {
	return find(p.Tracing, name)
}

// AccessLogProvider returns the file access log provider named name.
func (p Providers) AccessLogProvider(name string) (*AccessLog, bool) {
	return find(p.AccessLog, name)
}

// MetricsProvider reports whether name is a prometheus provider.
func (p Providers) MetricsProvider(name string) bool {
	_, ok := find(p.Metrics, name)
	return ok
}

// parseProviders reads extensionProviders: the tracers (parseExtensionProvider)
// and the envoyFileAccessLog and prometheus entries; names are unique.
func parseProviders(m *meshv1alpha1.MeshConfig) (Providers, error) {
	out := builtinProviders()
	seen := map[string]bool{}
	for i, ep := range m.GetExtensionProviders() {
		at := fmt.Sprintf("extensionProviders[%d]", i)
		name := ep.GetName()
		if name == "" || seen[name] {
			return out, fieldError(at+".name", fmt.Sprintf("%q is empty or names another provider too", name))
		}
		seen[name] = true
		delete(out.AccessLog, name)
		delete(out.Metrics, name)
		switch {
		case ep.GetPrometheus() != nil:
			out.Metrics[name] = true
		case ep.GetEnvoyFileAccessLog() != nil:
			al, err := parseFileAccessLogProvider(at+".envoyFileAccessLog", ep.GetEnvoyFileAccessLog())
			if err != nil {
				return out, err
			}
			out.AccessLog[name] = al
		default:
			p, err := parseExtensionProvider(at, ep) // tracing.go
			if err != nil {
				return out, err
			}
			out.Tracing[name] = p
		}
	}
	return out, nil
}

// parseFileAccessLogProvider is Istio's fileAccessLogFromTelemetry: the
// text format (Istio's default when empty, a newline added) or the
// labels as a JSON format, checked with strait-proxy's parser.
func parseFileAccessLogProvider(at string, f *meshv1alpha1.MeshConfig_ExtensionProvider_EnvoyFileAccessLogProvider) (*AccessLog, error) {
	var bad string
	f.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		if n := fd.JSONName(); n != "path" && n != "logFormat" {
			bad = n
			return false
		}
		return true
	})
	if bad != "" {
		return nil, fieldError(at+"."+bad, "not supported by Strait yet")
	}
	if f.GetPath() == "" {
		return nil, fieldError(at+".path", "must be set (a file on the sidecar's host, or /dev/stdout)")
	}
	al := &AccessLog{Path: f.GetPath(), Text: DefaultAccessLogFormat}
	switch lf := f.GetLogFormat(); {
	case lf.GetLabels() != nil:
		al.JSON, al.Text, al.JSONFormat = true, "", lf.GetLabels()
		if len(al.JSONFormat.GetFields()) == 0 {
			al.JSONFormat = defaultJSONAccessLogFormat()
		}
		if _, err := accesslog.ParseJSON(al.JSONFormat); err != nil {
			return nil, fieldError(at+".logFormat.labels", err.Error())
		}
	case lf.GetText() != "":
		al.Text = lf.GetText()
		if !strings.HasSuffix(al.Text, "\n") {
			al.Text += "\n"
		}
		if _, err := accesslog.ParseText(al.Text); err != nil {
			return nil, fieldError(at+".logFormat.text", err.Error())
		}
	}
	return al, nil
}
