package support

// telemetrySupport is the honour-or-refuse table of Telemetry (see
// fieldSupport): straitd resolves the Telemetry of each proxy as Istio's
// pilot/pkg/model/telemetry.go does (the root namespace's, then the
// proxy namespace's, then those whose selector matches the workload) and
// writes what it merges into the proxy's listeners (internal/xds/gen
// telemetryapi.go): the HCMs' tracing, the access logs of HCMs and
// tcp_proxies, and istio.stats' metric drops and report interval.
var telemetrySupport = map[string]Support{
	"selector":             Honoured,
	"selector.matchLabels": Honoured,
	// targetRef(s) attach a Telemetry to a Gateway API gateway or a
	// service (ambient waypoints); Strait attaches by selector only.
	"targetRef":            Refused,
	"targetRef.group":      Refused,
	"targetRef.kind":       Refused,
	"targetRef.name":       Refused,
	"targetRef.namespace":  Refused,
	"targetRefs":           Refused,
	"targetRefs.group":     Refused,
	"targetRefs.kind":      Refused,
	"targetRefs.name":      Refused,
	"targetRefs.namespace": Refused,

	"tracing":                                     Honoured,
	"tracing.match":                               Honoured,
	"tracing.match.mode":                          Honoured,
	"tracing.match.mode=CLIENT":                   Honoured,
	"tracing.match.mode=SERVER":                   Honoured,
	"tracing.providers":                           Honoured,
	"tracing.providers.name":                      Honoured,
	"tracing.randomSamplingPercentage":            Honoured,
	"tracing.disableSpanReporting":                Honoured,
	"tracing.customTags":                          Honoured,
	"tracing.customTags.literal":                  Honoured,
	"tracing.customTags.literal.value":            Honoured,
	"tracing.customTags.environment":              Honoured,
	"tracing.customTags.environment.name":         Honoured,
	"tracing.customTags.environment.defaultValue": Honoured,
	"tracing.customTags.header":                   Honoured,
	"tracing.customTags.header.name":              Honoured,
	"tracing.customTags.header.defaultValue":      Honoured,
	// A formatter tag is an Envoy substitution command operator, which
	// strait-proxy's tracer does not evaluate.
	"tracing.customTags.formatter":       Refused,
	"tracing.customTags.formatter.value": Refused,
	// strait-proxy always samples by the request id and writes no istio.*
	// tags; it has no switch for either, nor for context propagation.
	"tracing.useRequestIdForTraceSampling": Refused,
	"tracing.enableIstioTags":              Refused,
	"tracing.disableContextPropagation":    Refused,

	"metrics":                                               Honoured,
	"metrics.providers":                                     Honoured,
	"metrics.providers.name":                                Honoured,
	"metrics.overrides":                                     Honoured,
	"metrics.overrides.match":                               Honoured,
	"metrics.overrides.match.metric":                        Honoured,
	"metrics.overrides.match.metric=REQUEST_COUNT":          Honoured,
	"metrics.overrides.match.metric=REQUEST_DURATION":       Honoured,
	"metrics.overrides.match.metric=REQUEST_SIZE":           Honoured,
	"metrics.overrides.match.metric=RESPONSE_SIZE":          Honoured,
	"metrics.overrides.match.metric=TCP_OPENED_CONNECTIONS": Honoured,
	"metrics.overrides.match.metric=TCP_CLOSED_CONNECTIONS": Honoured,
	"metrics.overrides.match.metric=TCP_SENT_BYTES":         Honoured,
	"metrics.overrides.match.metric=TCP_RECEIVED_BYTES":     Honoured,
	// strait-proxy records no gRPC message counts: disabling them is
	// what it does already.
	"metrics.overrides.match.metric=GRPC_REQUEST_MESSAGES":  Honoured,
	"metrics.overrides.match.metric=GRPC_RESPONSE_MESSAGES": Honoured,
	// Custom metrics and label rewrites need istio.stats' CEL
	// expressions and metric definitions, which strait-proxy lacks.
	"metrics.overrides.match.customMetric":            Refused,
	"metrics.overrides.match.mode":                    Honoured,
	"metrics.overrides.match.mode=CLIENT":             Honoured,
	"metrics.overrides.match.mode=SERVER":             Honoured,
	"metrics.overrides.disabled":                      Honoured,
	"metrics.overrides.tagOverrides":                  Refused,
	"metrics.overrides.tagOverrides.operation":        Refused,
	"metrics.overrides.tagOverrides.operation=REMOVE": Refused,
	"metrics.overrides.tagOverrides.value":            Refused,
	"metrics.reportingInterval":                       Honoured,

	"accessLogging":                   Honoured,
	"accessLogging.match":             Honoured,
	"accessLogging.match.mode":        Honoured,
	"accessLogging.match.mode=CLIENT": Honoured,
	"accessLogging.match.mode=SERVER": Honoured,
	"accessLogging.providers":         Honoured,
	"accessLogging.providers.name":    Honoured,
	"accessLogging.disabled":          Honoured,
	// A filter is a CEL expression, which strait-proxy does not evaluate.
	"accessLogging.filter":            Refused,
	"accessLogging.filter.expression": Refused,
}
