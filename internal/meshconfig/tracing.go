package meshconfig

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
)

// Istio's tracing defaults: DefaultProxyConfig's Zipkin address, and
// PILOT_TRACE_SAMPLING (pilot/pkg/features) when defaultConfig.tracing
// sets no sampling.
const (
	DefaultZipkinAddress  = "zipkin.istio-system:9411"
	DefaultTraceSampling  = 1.0
	DefaultZipkinEndpoint = "/api/v2/spans"
)

// TracingKind is a tracing provider's kind.
type TracingKind string

// The tracing provider kinds straitd writes.
const (
	TracingZipkin        TracingKind = "zipkin"
	TracingOpenTelemetry TracingKind = "opentelemetry"
)

// Tracing is the mesh's tracing as straitd writes it on every sidecar
// HTTP connection manager (pilot/pkg/networking/core/tracing.go): the
// provider of defaultProviders.tracing (an extensionProviders entry), or,
// without one, enableTracing with defaultConfig.tracing's Zipkin
// address; sampling and custom tags from defaultConfig.tracing.
type Tracing struct {
	// Provider is where spans go.
	Provider TracingProvider
	// Sampling is the random sampling percentage (0 to 100).
	Sampling float64
	// CustomTags are defaultConfig.tracing.customTags, sorted by tag.
	CustomTags []TracingTag
	// MaxPathTagLength is the http.url tag's bound (0: Envoy's 256):
	// the provider's maxTagLength, else defaultConfig.tracing's.
	MaxPathTagLength uint32
}

// TracingProvider is a tracing backend. An extension provider names a
// mesh service (Service, Port), whose outbound cluster receives the
// spans; the legacy defaultConfig.tracing.zipkin names an address
// (Address, "host:port"), which straitd gives a cluster of its own, as
// Istio's bootstrap does (cluster "zipkin").
type TracingProvider struct {
	Name    string // the extension provider's name ("" for the legacy Zipkin)
	Kind    TracingKind
	Service string // host, or namespace/host as Istio accepts it
	Port    uint32
	Address string
	// Zipkin: Path is the collector endpoint; TraceID128 is
	// !enable64bitTraceId; W3C is traceContextOption
	// USE_B3_WITH_W3C_PROPAGATION.
	Path       string
	TraceID128 bool
	W3C        bool
	// OpenTelemetry over gRPC: Timeout and one initialMetadata entry.
	Timeout             time.Duration
	Header, HeaderValue string
}

// TracingTag is a custom tag: a literal, an environment variable of the
// proxy, or a request header, each with a default.
type TracingTag struct {
	Tag                  string
	Literal              string
	Environment, Header  string
	Default              string
	IsEnv, IsHeader, Lit bool
}

// honouredTracing are the defaultConfig.tracing fields (JSON names)
// straitd writes into the HCMs.
var honouredTracing = []string{"zipkin", "customTags", "maxPathTagLength", "sampling", "enableIstioTags"}

// parseTracing reads the tracing fields of m: enableTracing,
// extensionProviders (zipkin and opentelemetry), defaultProviders.tracing
// and defaultConfig.tracing, refusing what straitd does not write by
// path.
func parseTracing(m *meshv1alpha1.MeshConfig) (*Tracing, error) {
	providers, err := parseProviders(m) // providers.go
	if err != nil {
		return nil, err
	}
	if dp := m.GetDefaultProviders(); dp != nil {
		if len(dp.GetMetrics()) > 0 {
			return nil, fieldError("defaultProviders.metrics", "not supported by Strait yet (the istio.stats filter is always on)")
		}
	}
	pc := m.GetDefaultConfig().GetTracing()
	if pc != nil {
		var errs []string
		pc.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
			if !slices.Contains(honouredTracing, fd.JSONName()) {
				errs = append(errs, fd.JSONName())
			}
			return true
		})
		if len(errs) > 0 {
			return nil, fieldError("defaultConfig.tracing."+errs[0], "not supported by Strait yet (only zipkin, customTags, maxPathTagLength, sampling and enableIstioTags false)")
		}
		if v := pc.GetEnableIstioTags(); v != nil && v.GetValue() {
			return nil, fieldError("defaultConfig.tracing.enableIstioTags", "true is not supported by Strait yet: the per-workload istio.* tags are not written (set it false or remove it)")
		}
	}
	defaults, err := tracingDefaults(pc)
	if err != nil {
		return nil, err
	}
	t := &defaults
	names := m.GetDefaultProviders().GetTracing()
	switch {
	case len(names) > 1:
		return nil, fieldError("defaultProviders.tracing", "more than one provider is not supported (Istio uses one)")
	case len(names) == 1:
		p, ok := providers.Tracing[names[0]]
		if !ok {
			return nil, fieldError("defaultProviders.tracing[0]", fmt.Sprintf("%q is not a tracing provider of extensionProviders", names[0]))
		}
		t.Provider = p
	case m.GetEnableTracing():
		addr := DefaultZipkinAddress
		if z := pc.GetZipkin(); z != nil && z.GetAddress() != "" {
			addr = z.GetAddress()
		}
		if _, port, err := net.SplitHostPort(addr); err != nil || !validPort(port) {
			return nil, fieldError("defaultConfig.tracing.zipkin.address", fmt.Sprintf("%q is not host:port", addr))
		}
		t.Provider = TracingProvider{Kind: TracingZipkin, Address: addr, Path: DefaultZipkinEndpoint, TraceID128: true}
	default:
		if pc.GetZipkin() != nil {
			return nil, fieldError("defaultConfig.tracing.zipkin", "has no effect without enableTracing: true (or defaultProviders.tracing); set it or remove the field")
		}
		return nil, nil
	}
	if t.Provider.Kind == TracingZipkin || t.Provider.Kind == TracingOpenTelemetry {
		if n := providerMaxTag(m, t.Provider.Name); n != 0 {
			t.MaxPathTagLength = n
		}
	}
	return t, nil
}

// tracingDefaults are defaultConfig.tracing's sampling, custom tags and
// path tag bound: what a Telemetry's tracing falls back to (Istio's
// configureTracingFromTelemetry), and the mesh's own tracing starts from.
func tracingDefaults(pc *meshv1alpha1.Tracing) (Tracing, error) {
	t := Tracing{Sampling: DefaultTraceSampling, MaxPathTagLength: pc.GetMaxPathTagLength()}
	if s := pc.GetSampling(); s != 0 {
		// Istio's proxyConfigSamplingValue: above 100 means 1 %.
		if s < 0 {
			return t, fieldError("defaultConfig.tracing.sampling", fmt.Sprintf("%v is negative (want 0 to 100)", s))
		}
		t.Sampling = s
		if s > 100 {
			t.Sampling = 1
		}
	}
	tags, err := parseCustomTags(pc.GetCustomTags())
	if err != nil {
		return t, err
	}
	t.CustomTags = tags
	return t, nil
}

// ProviderMaxTag is the named extension provider's maxTagLength (0: none).
func (c *Config) ProviderMaxTag(name string) uint32 { return providerMaxTag(c.Mesh, name) }

// providerMaxTag is the named extension provider's maxTagLength.
func providerMaxTag(m *meshv1alpha1.MeshConfig, name string) uint32 {
	for _, ep := range m.GetExtensionProviders() {
		if ep.GetName() == name && name != "" {
			if z := ep.GetZipkin(); z != nil {
				return z.GetMaxTagLength()
			}
			return ep.GetOpentelemetry().GetMaxTagLength()
		}
	}
	return 0
}

// parseExtensionProvider reads one extensionProviders entry: zipkin and
// opentelemetry (over gRPC) are what straitd writes; any other kind, or
// field, is refused by path.
func parseExtensionProvider(at string, ep *meshv1alpha1.MeshConfig_ExtensionProvider) (TracingProvider, error) {
	p := TracingProvider{Name: ep.GetName()}
	only := func(prefix string, msg protoreflect.Message, ok ...string) error {
		var bad string
		msg.Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
			if !slices.Contains(ok, fd.JSONName()) {
				bad = fd.JSONName()
				return false
			}
			return true
		})
		if bad != "" {
			return fieldError(prefix+"."+bad, "not supported by Strait yet")
		}
		return nil
	}
	switch {
	case ep.GetZipkin() != nil:
		z := ep.GetZipkin()
		if err := only(at+".zipkin", z.ProtoReflect(), "service", "port", "maxTagLength", "enable64bitTraceId", "path", "traceContextOption"); err != nil {
			return p, err
		}
		p.Kind, p.Service, p.Port, p.Path, p.TraceID128 = TracingZipkin, z.GetService(), z.GetPort(), z.GetPath(), !z.GetEnable_64BitTraceId()
		if p.Path == "" {
			p.Path = DefaultZipkinEndpoint
		}
		switch z.GetTraceContextOption() {
		case meshv1alpha1.MeshConfig_ExtensionProvider_ZipkinTracingProvider_USE_B3:
		case meshv1alpha1.MeshConfig_ExtensionProvider_ZipkinTracingProvider_USE_B3_WITH_W3C_PROPAGATION:
			p.W3C = true
		default:
			return p, fieldError(at+".zipkin.traceContextOption", z.GetTraceContextOption().String()+" is not supported")
		}
	case ep.GetOpentelemetry() != nil:
		o := ep.GetOpentelemetry()
		if err := only(at+".opentelemetry", o.ProtoReflect(), "service", "port", "maxTagLength", "grpc"); err != nil {
			return p, err
		}
		p.Kind, p.Service, p.Port = TracingOpenTelemetry, o.GetService(), o.GetPort()
		if g := o.GetGrpc(); g != nil {
			if d := g.GetTimeout(); d != nil {
				p.Timeout = d.AsDuration()
			}
			switch md := g.GetInitialMetadata(); len(md) {
			case 0:
			case 1:
				p.Header, p.HeaderValue = md[0].GetName(), md[0].GetValue()
			default:
				return p, fieldError(at+".opentelemetry.grpc.initialMetadata", "more than one entry is not supported by Strait yet")
			}
		}
	default:
		kind := "an unknown kind"
		ep.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
			if fd.JSONName() != "name" {
				kind = fd.JSONName()
				return false
			}
			return true
		})
		return p, fieldError(at+"."+kind, "not supported by Strait yet (zipkin, opentelemetry, envoyFileAccessLog and prometheus providers are)")
	}
	if p.Service == "" || p.Port == 0 || p.Port > 65535 {
		return p, fieldError(at+"."+string(p.Kind), "service and port are required")
	}
	return p, nil
}

// parseCustomTags reads defaultConfig.tracing.customTags, sorted by tag
// as istiod sorts them.
func parseCustomTags(in map[string]*meshv1alpha1.Tracing_CustomTag) ([]TracingTag, error) {
	var out []TracingTag
	for name, ct := range in {
		at := "defaultConfig.tracing.customTags." + name
		t := TracingTag{Tag: name}
		switch {
		case ct.GetLiteral() != nil:
			t.Lit, t.Literal = true, ct.GetLiteral().GetValue()
		case ct.GetEnvironment() != nil:
			t.IsEnv, t.Environment, t.Default = true, ct.GetEnvironment().GetName(), ct.GetEnvironment().GetDefaultValue()
		case ct.GetHeader() != nil:
			t.IsHeader, t.Header, t.Default = true, ct.GetHeader().GetName(), ct.GetHeader().GetDefaultValue()
		default:
			return nil, fieldError(at, "needs literal, environment or header")
		}
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b TracingTag) int { return strings.Compare(a.Tag, b.Tag) })
	return out, nil
}

// String describes the tracing for straitd's start-up log.
func (t *Tracing) String() string {
	where := t.Provider.Address
	if where == "" {
		where = t.Provider.Service + ":" + strconv.Itoa(int(t.Provider.Port))
	}
	return fmt.Sprintf("tracing=%s(%s,%v%%)", t.Provider.Kind, where, t.Sampling)
}

func validPort(s string) bool {
	p, err := strconv.Atoi(s)
	return err == nil && p > 0 && p < 65536
}
