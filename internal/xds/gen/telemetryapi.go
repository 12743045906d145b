package gen

// The Telemetry API: what the Telemetries of a proxy (mesh.Scope.Telemetry,
// root namespace < namespace < workload selector) merge into, as Istio's
// pilot/pkg/model/telemetry.go merges them (Telemetries.Tracing,
// mergeLogs, mergeMetrics), per workload mode: CLIENT for outbound and
// gateway listeners, SERVER for inbound ones (workloadMode). withTracing,
// withAccessLogs and withTelemetry write it.

import (
	"maps"
	"slices"
	"sort"
	"strings"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	statspb "istio.io/api/envoy/extensions/stats"
	telemetry "istio.io/api/telemetry/v1alpha1"

	"github.com/straitmesh/strait/internal/istioconfig"
	"github.com/straitmesh/strait/internal/mesh"
	"github.com/straitmesh/strait/internal/meshconfig"
)

// workload modes, the index of telemetryPolicy's arrays.
const (
	clientMode = iota
	serverMode
)

// listenerMode is Istio's workloadMode of a listener's class.
func listenerMode(l *listener.Listener) int {
	if l.GetTrafficDirection() == core.TrafficDirection_INBOUND {
		return serverMode
	}
	return clientMode
}

// telemetryPolicy is the merged Telemetry of one proxy. A nil
// *telemetryPolicy, or a nil part, is the mesh config's behaviour.
type telemetryPolicy struct {
	// tracing is nil when no Telemetry sets tracing: the mesh's.
	tracing *[2]tracingSpec
	// logs is nil when no Telemetry sets access logging: the mesh's
	// accessLogFile; else each mode's.
	logs *[2]modeLogs
	// metrics are istio.stats' config by mode; nil: no istio.stats.
	metrics [2]*statspb.PluginConfig
}

// modeLogs are one mode's access logs: mesh when the Telemetries name no
// provider Strait knows for the mode (Istio then falls back to the mesh's
// accessLogFile, as with no Telemetry), else the enabled providers' logs
// (none when all are disabled).
type modeLogs struct {
	mesh bool
	logs []*meshconfig.AccessLog
}

// tracingSpec is Istio's TracingSpec.
type tracingSpec struct {
	provider   *meshconfig.TracingProvider // nil: tracing off
	disabled   bool
	sampling   *float64
	customTags map[string]*telemetry.Tracing_CustomTag
}

// telemetryFor merges the Telemetries of a scope. With none, it returns
// the mesh's default: every listener gets istio.stats unchanged.
func telemetryFor(snap *mesh.Snapshot, scope *mesh.Scope) *telemetryPolicy {
	var tels []*istioconfig.Config
	if scope != nil {
		tels = scope.Telemetry
	}
	p := &telemetryPolicy{}
	p.tracing = mergeTracing(snap.Mesh, tels)
	p.logs = mergeLogs(snap.Mesh, tels)
	p.metrics = mergeMetrics(snap.Mesh, tels)
	return p
}

// mergeTracing is Istio's Telemetries.Tracing.
func mergeTracing(mc *meshconfig.Config, tels []*istioconfig.Config) *[2]tracingSpec {
	var ts []*telemetry.Tracing
	for _, c := range tels {
		ts = append(ts, c.Telemetry().GetTracing()...)
	}
	if len(ts) == 0 {
		return nil // the mesh's tracing (default provider or legacy)
	}
	var specs [2]tracingSpec
	if mt := mc.Tracing; mt != nil && mt.Provider.Name != "" {
		// defaultProviders.tracing
		p := mt.Provider
		specs[clientMode].provider, specs[serverMode].provider = &p, &p
	}
	for _, m := range ts {
		apply := []*tracingSpec{&specs[clientMode], &specs[serverMode]}
		switch m.GetMatch().GetMode() {
		case telemetry.WorkloadMode_CLIENT:
			apply = apply[:1]
		case telemetry.WorkloadMode_SERVER:
			apply = apply[1:]
		}
		for _, s := range apply {
			if ps := m.GetProviders(); len(ps) > 0 {
				s.provider = nil
				if p, ok := mc.Providers.TracingProvider(ps[0].GetName()); ok {
					s.provider = &p
				}
			}
			if d := m.GetDisableSpanReporting(); d != nil {
				s.disabled = d.GetValue()
			}
			if m.GetCustomTags() != nil {
				s.customTags = m.GetCustomTags()
			}
			if r := m.GetRandomSamplingPercentage(); r != nil {
				v := r.GetValue()
				s.sampling = &v
			}
		}
	}
	return &specs
}

// meshTracingOf is the HCM tracing a tracingSpec asks for, in the form
// meshconfig.Tracing has (nil: none): the spec's sampling else
// defaultConfig.tracing's, its custom tags else defaultConfig.tracing's
// (configureTracingFromTelemetry, configureCustomTags).
func meshTracingOf(mc *meshconfig.Config, s tracingSpec) *meshconfig.Tracing {
	if s.disabled || s.provider == nil {
		return nil
	}
	d := mc.TracingDefaults
	t := &meshconfig.Tracing{Provider: *s.provider, Sampling: d.Sampling, CustomTags: d.CustomTags, MaxPathTagLength: d.MaxPathTagLength}
	if n := mc.ProviderMaxTag(s.provider.Name); n != 0 {
		t.MaxPathTagLength = n
	}
	if s.sampling != nil {
		t.Sampling = *s.sampling
	}
	if len(s.customTags) > 0 {
		t.CustomTags = nil
		for _, name := range slices.Sorted(maps.Keys(s.customTags)) {
			ct := s.customTags[name]
			tag := meshconfig.TracingTag{Tag: name}
			switch {
			case ct.GetLiteral() != nil:
				tag.Lit, tag.Literal = true, ct.GetLiteral().GetValue()
			case ct.GetEnvironment() != nil:
				tag.IsEnv, tag.Environment, tag.Default = true, ct.GetEnvironment().GetName(), ct.GetEnvironment().GetDefaultValue()
			case ct.GetHeader() != nil:
				tag.IsHeader, tag.Header, tag.Default = true, ct.GetHeader().GetName(), ct.GetHeader().GetDefaultValue()
			default:
				continue // a formatter: refused at load (support table)
			}
			t.CustomTags = append(t.CustomTags, tag)
		}
	}
	return t
}

// mergeLogs is Istio's Telemetries.AccessLogging with mergeLogs, for
// both modes: the providers the most specific Telemetry names (inherited
// by entries that name none, defaultProviders.accessLogging at the top),
// each possibly disabled; the file logs of
// the enabled ones, by provider name. A mode left with no known provider
// falls back to the mesh's log, as Istio's setHTTPAccessLog does when
// AccessLogging returns none.
func mergeLogs(mc *meshconfig.Config, tels []*istioconfig.Config) *[2]modeLogs {
	var logs [][]*telemetry.AccessLogging
	for _, c := range tels {
		if al := c.Telemetry().GetAccessLogging(); len(al) > 0 {
			logs = append(logs, al)
		}
	}
	defaults := mc.DefaultAccessLogProviders
	if len(logs) == 0 && len(defaults) == 0 {
		return nil
	}
	var out [2]modeLogs
	for mode, wm := range []telemetry.WorkloadMode{telemetry.WorkloadMode_CLIENT, telemetry.WorkloadMode_SERVER} {
		matches := func(m *telemetry.AccessLogging) bool {
			s := m.GetMatch()
			return s == nil || s.GetMode() == telemetry.WorkloadMode_CLIENT_AND_SERVER || s.GetMode() == wm
		}
		inScope := defaults
		for _, l := range logs {
			var names []string
			for _, m := range l {
				if matches(m) {
					names = append(names, providerNames(m.GetProviders())...)
				}
			}
			if len(names) > 0 {
				inScope = names
			}
		}
		disabled := map[string]bool{}
		if len(logs) == 0 {
			for _, n := range defaults {
				disabled[n] = false
			}
		}
		parent := defaults
		for _, l := range logs {
			for _, m := range l {
				names := providerNames(m.GetProviders())
				if len(names) == 0 {
					names = parent
				}
				parent = names
				for _, n := range names {
					if !slices.Contains(inScope, n) || !matches(m) {
						continue
					}
					disabled[n] = m.GetDisabled().GetValue()
				}
			}
		}
		known := false
		for _, n := range slices.Sorted(maps.Keys(disabled)) {
			al, ok := mc.Providers.AccessLogProvider(n)
			if !ok {
				continue
			}
			known = true
			if !disabled[n] {
				out[mode].logs = append(out[mode].logs, al)
			}
		}
		out[mode].mesh = !known
	}
	return &out
}

func providerNames(ps []*telemetry.ProviderRef) []string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.GetName())
	}
	return out
}

// istioMetricNames are Istio's metricToPrometheusMetric.
var istioMetricNames = map[string]string{
	"REQUEST_COUNT":          "requests_total",
	"REQUEST_DURATION":       "request_duration_milliseconds",
	"REQUEST_SIZE":           "request_bytes",
	"RESPONSE_SIZE":          "response_bytes",
	"TCP_OPENED_CONNECTIONS": "tcp_connections_opened_total",
	"TCP_CLOSED_CONNECTIONS": "tcp_connections_closed_total",
	"TCP_SENT_BYTES":         "tcp_sent_bytes_total",
	"TCP_RECEIVED_BYTES":     "tcp_received_bytes_total",
	"GRPC_REQUEST_MESSAGES":  "request_messages_total",
	"GRPC_RESPONSE_MESSAGES": "response_messages_total",
}

// mergeMetrics is Istio's mergeMetrics and generateStatsConfig for the
// prometheus providers (Strait's default metrics provider is the built-in
// prometheus, as Istio's defaultProviders.metrics): per mode, istio.stats'
// config, or nil when the providers in scope name no prometheus provider
// or every metric of the mode is disabled. With several prometheus
// providers in scope the first by name is written.
func mergeMetrics(mc *meshconfig.Config, tels []*istioconfig.Config) [2]*statspb.PluginConfig {
	var ms []*telemetry.Metrics
	for _, c := range tels {
		ms = append(ms, c.Telemetry().GetMetrics()...)
	}
	defaults := []string{meshconfig.BuiltinMetricsProvider}
	inScope := defaults
	for _, m := range ms {
		if names := providerNames(m.GetProviders()); len(names) > 0 {
			inScope = names
		}
	}
	provider := ""
	for _, n := range slices.Sorted(slices.Values(inScope)) {
		if mc.Providers.MetricsProvider(n) {
			provider = n
			break
		}
	}
	var out [2]*statspb.PluginConfig
	if provider == "" {
		return out
	}
	type override struct{ disabled, set bool }
	perMode := [2]map[string]override{{}, {}}
	allDisabled := [2]bool{}
	var interval *durationpb.Duration
	parent := defaults
	for _, m := range ms {
		names := providerNames(m.GetProviders())
		if len(names) == 0 {
			names = parent
		}
		parent = names
		if !slices.Contains(names, provider) {
			continue
		}
		if d := m.GetReportingInterval(); d != nil {
			interval = d
		}
		for _, o := range m.GetOverrides() {
			modes := []int{clientMode, serverMode}
			switch o.GetMatch().GetMode() {
			case telemetry.WorkloadMode_CLIENT:
				modes = modes[:1]
			case telemetry.WorkloadMode_SERVER:
				modes = modes[1:]
			}
			metric := o.GetMatch().GetMetric()
			all := metric == telemetry.MetricSelector_ALL_METRICS
			if all && o.GetDisabled().GetValue() {
				for _, md := range modes {
					allDisabled[md] = true
				}
				continue
			}
			names := []string{metric.String()}
			if all {
				names = slices.Sorted(maps.Keys(istioMetricNames))
			}
			for _, md := range modes {
				allDisabled[md] = false
				for _, n := range names {
					ov := perMode[md][n]
					ov.set = true
					if o.GetDisabled() != nil {
						ov.disabled = o.GetDisabled().GetValue()
					}
					perMode[md][n] = ov
				}
			}
		}
	}
	for md := range out {
		if allDisabled[md] {
			continue
		}
		cfg := &statspb.PluginConfig{DisableHostHeaderFallback: md == serverMode, TcpReportingDuration: interval}
		var metrics []*statspb.MetricConfig
		for n, ov := range perMode[md] {
			metrics = append(metrics, &statspb.MetricConfig{Name: istioMetricNames[n], Drop: ov.disabled})
		}
		sort.Slice(metrics, func(i, j int) bool { return strings.Compare(metrics[i].Name, metrics[j].Name) < 0 })
		cfg.Metrics = metrics
		out[md] = cfg
	}
	return out
}
