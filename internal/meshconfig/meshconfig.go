// Package meshconfig reads Istio's mesh config (MeshConfig of
// istio.io/api/mesh/v1alpha1, the `mesh` key of the `istio` ConfigMap or
// istiod's --meshConfig file) into the settings straitd honours. Every
// field Strait does not implement is refused by name when the file is
// loaded, never silently ignored.
package meshconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
	networking "istio.io/api/networking/v1alpha3"
	"sigs.k8s.io/yaml"

	"github.com/straitmesh/strait/internal/istioconfig"
	"github.com/straitmesh/strait/internal/locality"
	"github.com/straitmesh/strait/internal/proxy/accesslog"
)

// Istio's defaults (pkg/config/mesh DefaultMeshConfig).
const (
	DefaultTrustDomain    = "cluster.local"
	DefaultDNSRefreshRate = 60 * time.Second
	DefaultConnectTimeout = 10 * time.Second
)

// Config is the mesh config as straitd uses it: Istio's defaults with the
// file's values over them. Immutable once returned.
type Config struct {
	// Mesh is the MeshConfig as written (unset fields are unset), which the
	// sidecar injector layers into each pod's PROXY_CONFIG (defaultConfig).
	Mesh *meshv1alpha1.MeshConfig
	// RegistryOnly is outboundTrafficPolicy.mode REGISTRY_ONLY: traffic to
	// a destination the mesh does not know is refused (BlackHoleCluster)
	// instead of passed through (ALLOW_ANY, the default).
	RegistryOnly bool
	// RootNamespace is rootNamespace; empty means the control plane's
	// namespace (straitd's --namespace), as in Istio.
	RootNamespace string
	// The default exportTo of the configs that set none; empty means "*".
	DefaultServiceExportTo         []string
	DefaultVirtualServiceExportTo  []string
	DefaultDestinationRuleExportTo []string
	// TrustDomain is trustDomain (default cluster.local).
	TrustDomain string
	// TrustDomainAliases is trustDomainAliases without TrustDomain and
	// without repeats: identities of these trust domains are the mesh's
	// own (authorization principals, peer certificates), as while a mesh
	// migrates from one trust domain to another.
	TrustDomainAliases []string
	// EnableAutoMTLS is enableAutoMtls (default true).
	EnableAutoMTLS bool
	// DNSRefreshRate is dnsRefreshRate, the dns_refresh_rate of DNS
	// clusters (their records' TTLs decide while resolution succeeds).
	DNSRefreshRate time.Duration
	// ConnectTimeout is connectTimeout, every cluster's connect_timeout.
	ConnectTimeout time.Duration
	// LocalityLbSetting is localityLbSetting, the locality load balancing
	// of destinations whose DestinationRule sets none; Istio's default
	// enables it (priorities by locality once outlier detection is on).
	// nil when the file disables it.
	LocalityLbSetting *networking.LocalityLoadBalancerSetting
	// Providers are the extension providers a Telemetry names
	// (providers.go), Istio's built-in ones included.
	Providers Providers
	// DefaultAccessLogProviders is defaultProviders.accessLogging: the
	// access log providers of proxies no Telemetry gives any (Istio's
	// mergeLogs); when it names one Providers knows, accessLogFile is
	// not written.
	DefaultAccessLogProviders []string
	// TracingDefaults are defaultConfig.tracing's sampling, custom tags
	// and path tag bound (its Provider is unset): a Telemetry's tracing
	// takes them where it sets none.
	TracingDefaults Tracing
	// AccessLog is the sidecars' access log (accessLogFile,
	// accessLogEncoding, accessLogFormat); nil: none.
	AccessLog *AccessLog
	// PathNormalization is pathNormalization.normalization: how every
	// HTTP connection manager normalizes request paths before
	// authorization, routing and forwarding. Never DEFAULT: unset is
	// Istio's default, BASE.
	PathNormalization meshv1alpha1.MeshConfig_ProxyPathNormalization_NormalizationType
	// Tracing is the sidecars' tracing (tracing.go); nil: none.
	Tracing *Tracing
}

// AccessLog is the mesh-wide Envoy file access log, as Istio's
// FileAccessLogFromMeshConfig emits it.
type AccessLog struct {
	// Path is accessLogFile: a file on the sidecar's host or /dev/stdout.
	Path string
	// JSON is accessLogEncoding JSON (TEXT otherwise).
	JSON bool
	// Text is the text format, newline-terminated (Istio's default when
	// accessLogFormat is empty); JSONFormat the JSON one (Istio's default
	// when empty). Only the one of the encoding is set.
	Text       string
	JSONFormat *structpb.Struct
}

// Default is the mesh config of an empty file.
func Default() *Config {
	return &Config{
		Mesh:              &meshv1alpha1.MeshConfig{},
		TrustDomain:       DefaultTrustDomain,
		EnableAutoMTLS:    true,
		DNSRefreshRate:    DefaultDNSRefreshRate,
		ConnectTimeout:    DefaultConnectTimeout,
		LocalityLbSetting: &networking.LocalityLoadBalancerSetting{Enabled: wrapperspb.Bool(true)},
		PathNormalization: meshv1alpha1.MeshConfig_ProxyPathNormalization_BASE,
		Providers:         builtinProviders(),
		TracingDefaults:   Tracing{Sampling: DefaultTraceSampling},
	}
}

// honoured are the MeshConfig fields (JSON names) straitd implements.
var honoured = []string{
	"accessLogEncoding", "accessLogFile", "accessLogFormat", "connectTimeout", "defaultConfig",
	"defaultDestinationRuleExportTo", "defaultServiceExportTo", "defaultVirtualServiceExportTo",
	"dnsRefreshRate", "enableAutoMtls", "localityLbSetting", "outboundTrafficPolicy", "pathNormalization",
	"rootNamespace", "trustDomain", "trustDomainAliases",
	// tracing.go audits these further.
	"enableTracing", "extensionProviders", "defaultProviders",
}

// honouredProxyConfig are the defaultConfig fields that reach the sidecar
// (the injector copies defaultConfig into PROXY_CONFIG) and that
// strait-agent implements.
var honouredProxyConfig = []string{
	"concurrency", "discoveryAddress", "drainDuration", "proxyAdminPort", "statusPort",
	"terminationDrainDuration", "tracing",
}

// Honoured returns the MeshConfig field paths straitd implements, sorted.
func Honoured() []string {
	out := slices.Clone(honoured)
	for _, f := range honouredProxyConfig {
		out = append(out, "defaultConfig."+f)
	}
	out = append(out, "outboundTrafficPolicy.mode", "pathNormalization.normalization")
	slices.Sort(out)
	return out
}

// MaxBytes is the largest mesh config read: a ConfigMap holds at most
// 1 MiB, and a bound keeps a wrong path (a device, a huge file) from
// taking the process's memory.
const MaxBytes = 2 << 20

// Load reads a mesh config file; errors start with its path.
func Load(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("mesh config: %w", err)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxBytes+1))
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("mesh config: %w", err)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Parse reads a MeshConfig in YAML or JSON (Istio's field names, Go
// durations such as "10s"); a ConfigMap manifest is read through its
// data.mesh. An unknown key, a field Strait does not implement or a bad
// value is an error naming the field.
func Parse(data []byte) (*Config, error) {
	if len(data) > MaxBytes {
		return nil, fmt.Errorf("mesh config: larger than %d MiB (a ConfigMap holds at most 1 MiB); is this the right file?", MaxBytes>>20)
	}
	// Strict: a key written twice is an error, not the last one winning.
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("mesh config: not YAML: %s", istioconfig.YAMLProblem(err, data, 1))
	}
	if env, ok := envelope(js); ok {
		// MeshConfig has neither apiVersion nor kind: this is a manifest.
		if env.Kind != "ConfigMap" {
			return nil, fmt.Errorf("mesh config: this is a %s %s, not a mesh config; give Istio's MeshConfig YAML (e.g. \"trustDomain: cluster.local\") or the istio ConfigMap", env.APIVersion, env.Kind)
		}
		raw, ok := env.Data["mesh"]
		if !ok {
			return nil, errors.New("mesh config: data.mesh: the ConfigMap has no mesh key; the istio ConfigMap holds the mesh config under data.mesh")
		}
		var mesh string
		if err := json.Unmarshal(raw, &mesh); err != nil {
			return nil, errors.New("mesh config: data.mesh: must be a string (write \"mesh: |\" and the mesh config indented below it)")
		}
		data = []byte(mesh)
		if js, err = yaml.YAMLToJSONStrict(data); err != nil {
			return nil, fmt.Errorf("mesh config: data.mesh: not YAML: %s", istioconfig.YAMLProblem(err, data, 1))
		}
	}
	c := Default()
	if t := bytes.TrimSpace(js); len(t) == 0 || string(t) == "null" {
		return c, nil
	}
	m := &meshv1alpha1.MeshConfig{}
	if err := istioconfig.DecodeJSON(js, m); err != nil {
		var fe *istioconfig.FieldError
		if errors.As(err, &fe) && fe.Field != "" {
			return nil, fieldError(fe.Field, fe.Problem)
		}
		return nil, fmt.Errorf("mesh config: %w", err)
	}
	if err := refuseUnsupported(m); err != nil {
		return nil, err
	}
	c.Mesh = m
	if p := m.GetOutboundTrafficPolicy(); p != nil {
		if p.GetTls() != nil {
			return nil, fieldError("outboundTrafficPolicy.tls", "not supported by Strait yet")
		}
		// The proto's zero is REGISTRY_ONLY, so only a mode written out
		// changes Istio's default (ALLOW_ANY).
		if modeWritten(js) {
			switch p.GetMode() {
			case meshv1alpha1.MeshConfig_OutboundTrafficPolicy_REGISTRY_ONLY:
				c.RegistryOnly = true
			case meshv1alpha1.MeshConfig_OutboundTrafficPolicy_ALLOW_ANY:
			default:
				return nil, fieldError("outboundTrafficPolicy.mode", p.GetMode().String()+" is not supported by Strait yet (want ALLOW_ANY or REGISTRY_ONLY)")
			}
		}
	}
	if ns := m.GetRootNamespace(); ns != "" {
		if !isDNSLabel(ns) {
			return nil, fieldError("rootNamespace", fmt.Sprintf("%q is not a namespace name", ns))
		}
		c.RootNamespace = ns
	}
	for _, e := range []struct {
		name string
		in   []string
		out  *[]string
	}{
		{"defaultServiceExportTo", m.GetDefaultServiceExportTo(), &c.DefaultServiceExportTo},
		{"defaultVirtualServiceExportTo", m.GetDefaultVirtualServiceExportTo(), &c.DefaultVirtualServiceExportTo},
		{"defaultDestinationRuleExportTo", m.GetDefaultDestinationRuleExportTo(), &c.DefaultDestinationRuleExportTo},
	} {
		for i, v := range e.in {
			if v != "." && v != "*" && v != "~" && !isDNSLabel(v) {
				return nil, fieldError(fmt.Sprintf("%s[%d]", e.name, i), fmt.Sprintf("%q is not \".\", \"*\", \"~\" or a namespace name", v))
			}
		}
		*e.out = slices.Clone(e.in)
	}
	if td := m.GetTrustDomain(); td != "" {
		c.TrustDomain = td
	}
	for i, a := range m.GetTrustDomainAliases() {
		if err := checkTrustDomain(a); err != nil {
			return nil, fieldError(fmt.Sprintf("trustDomainAliases[%d]", i), err.Error())
		}
		if a != c.TrustDomain && !slices.Contains(c.TrustDomainAliases, a) {
			c.TrustDomainAliases = append(c.TrustDomainAliases, a)
		}
	}
	if v := m.GetEnableAutoMtls(); v != nil {
		c.EnableAutoMTLS = v.GetValue()
	}
	if d := m.GetDnsRefreshRate(); d != nil {
		if d.AsDuration() < time.Millisecond {
			return nil, fieldError("dnsRefreshRate", fmt.Sprintf("%s is shorter than 1ms", d.AsDuration()))
		}
		c.DNSRefreshRate = d.AsDuration()
	}
	if d := m.GetConnectTimeout(); d != nil {
		if d.AsDuration() < time.Millisecond {
			return nil, fieldError("connectTimeout", fmt.Sprintf("%s is shorter than 1ms", d.AsDuration()))
		}
		c.ConnectTimeout = d.AsDuration()
	}
	if ls := m.GetLocalityLbSetting(); ls != nil {
		var fe *locality.FieldError
		if err := locality.Validate("localityLbSetting", ls); errors.As(err, &fe) {
			return nil, fieldError(fe.Field, fe.Problem)
		}
		c.LocalityLbSetting = ls
		if e := ls.GetEnabled(); e != nil && !e.GetValue() {
			c.LocalityLbSetting = nil
		}
	}
	switch n := m.GetPathNormalization().GetNormalization(); n {
	case meshv1alpha1.MeshConfig_ProxyPathNormalization_DEFAULT: // Istio's default, BASE (Default)
	case meshv1alpha1.MeshConfig_ProxyPathNormalization_NONE, meshv1alpha1.MeshConfig_ProxyPathNormalization_BASE,
		meshv1alpha1.MeshConfig_ProxyPathNormalization_MERGE_SLASHES, meshv1alpha1.MeshConfig_ProxyPathNormalization_DECODE_AND_MERGE_SLASHES:
		c.PathNormalization = n
	default:
		return nil, fieldError("pathNormalization.normalization", fmt.Sprintf("%s is not a known normalization (want NONE, BASE, MERGE_SLASHES or DECODE_AND_MERGE_SLASHES)", n))
	}
	al, err := parseAccessLog(m)
	if err != nil {
		return nil, err
	}
	c.AccessLog = al
	if c.Tracing, err = parseTracing(m); err != nil { // tracing.go
		return nil, err
	}
	c.DefaultAccessLogProviders = m.GetDefaultProviders().GetAccessLogging()
	// Both were checked by parseTracing.
	if c.Providers, err = parseProviders(m); err != nil {
		return nil, err
	}
	if c.TracingDefaults, err = tracingDefaults(m.GetDefaultConfig().GetTracing()); err != nil {
		return nil, err
	}
	return c, nil
}

// parseAccessLog reads the access log fields as Istio's
// FileAccessLogFromMeshConfig does (a newline is added to a text format
// that lacks one), and checks the format with strait-proxy's own parser,
// so that a command operator the proxy does not fill is refused here,
// naming it, rather than NACKed by every sidecar.
func parseAccessLog(m *meshv1alpha1.MeshConfig) (*AccessLog, error) {
	if m.GetAccessLogFile() == "" {
		if m.GetAccessLogFormat() != "" || m.GetAccessLogEncoding() != meshv1alpha1.MeshConfig_TEXT {
			return nil, fieldError("accessLogFile", "is empty, so accessLogFormat and accessLogEncoding have no effect: set accessLogFile (e.g. /dev/stdout) or remove them")
		}
		return nil, nil
	}
	al := &AccessLog{Path: m.GetAccessLogFile()}
	switch m.GetAccessLogEncoding() {
	case meshv1alpha1.MeshConfig_TEXT:
		al.Text = DefaultAccessLogFormat
		if f := m.GetAccessLogFormat(); f != "" {
			if !strings.HasSuffix(f, "\n") {
				f += "\n"
			}
			al.Text = f
		}
		if _, err := accesslog.ParseText(al.Text); err != nil {
			return nil, fieldError("accessLogFormat", err.Error())
		}
	case meshv1alpha1.MeshConfig_JSON:
		al.JSON = true
		al.JSONFormat = defaultJSONAccessLogFormat()
		if f := m.GetAccessLogFormat(); f != "" {
			st := &structpb.Struct{}
			if err := protojson.Unmarshal([]byte(f), st); err != nil {
				return nil, fieldError("accessLogFormat", fmt.Sprintf("not a JSON object for accessLogEncoding JSON: %v", err))
			}
			al.JSONFormat = st
		}
		if _, err := accesslog.ParseJSON(al.JSONFormat); err != nil {
			return nil, fieldError("accessLogFormat", err.Error())
		}
	default:
		return nil, fieldError("accessLogEncoding", fmt.Sprintf("%s is not supported (want TEXT or JSON)", m.GetAccessLogEncoding()))
	}
	return al, nil
}

// DefaultAccessLogFormat is Istio's text format (pilot/pkg/model
// EnvoyTextLogFormat).
const DefaultAccessLogFormat = "[%START_TIME%] \"%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% " +
	"%PROTOCOL%\" %RESPONSE_CODE% %RESPONSE_FLAGS% " +
	"%RESPONSE_CODE_DETAILS% %CONNECTION_TERMINATION_DETAILS% " +
	"\"%UPSTREAM_TRANSPORT_FAILURE_REASON%\" %BYTES_RECEIVED% %BYTES_SENT% " +
	"%DURATION% %RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% \"%REQ(X-FORWARDED-FOR)%\" " +
	"\"%REQ(USER-AGENT)%\" \"%REQ(X-REQUEST-ID)%\" \"%REQ(:AUTHORITY)%\" \"%UPSTREAM_HOST%\" " +
	"%UPSTREAM_CLUSTER_RAW% %UPSTREAM_LOCAL_ADDRESS% %DOWNSTREAM_LOCAL_ADDRESS% " +
	"%DOWNSTREAM_REMOTE_ADDRESS% %REQUESTED_SERVER_NAME% %ROUTE_NAME%\n"

// defaultJSONAccessLogFormat is Istio's JSON format (pilot/pkg/model
// EnvoyJSONLogFormatIstio).
func defaultJSONAccessLogFormat() *structpb.Struct {
	fields := map[string]string{
		"start_time": "%START_TIME%", "route_name": "%ROUTE_NAME%", "method": "%REQ(:METHOD)%",
		"path": "%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%", "protocol": "%PROTOCOL%", "response_code": "%RESPONSE_CODE%",
		"response_flags": "%RESPONSE_FLAGS%", "response_code_details": "%RESPONSE_CODE_DETAILS%",
		"connection_termination_details": "%CONNECTION_TERMINATION_DETAILS%", "bytes_received": "%BYTES_RECEIVED%",
		"bytes_sent": "%BYTES_SENT%", "duration": "%DURATION%", "upstream_service_time": "%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)%",
		"x_forwarded_for": "%REQ(X-FORWARDED-FOR)%", "user_agent": "%REQ(USER-AGENT)%", "request_id": "%REQ(X-REQUEST-ID)%",
		"authority": "%REQ(:AUTHORITY)%", "upstream_host": "%UPSTREAM_HOST%", "upstream_cluster": "%UPSTREAM_CLUSTER_RAW%",
		"upstream_local_address": "%UPSTREAM_LOCAL_ADDRESS%", "downstream_local_address": "%DOWNSTREAM_LOCAL_ADDRESS%",
		"downstream_remote_address": "%DOWNSTREAM_REMOTE_ADDRESS%", "requested_server_name": "%REQUESTED_SERVER_NAME%",
		"upstream_transport_failure_reason": "%UPSTREAM_TRANSPORT_FAILURE_REASON%",
	}
	st := &structpb.Struct{Fields: map[string]*structpb.Value{}}
	for k, v := range fields {
		st.Fields[k] = structpb.NewStringValue(v)
	}
	return st
}

// namedWithin are the refused message fields whose own set fields are
// named in the refusal: defaultConfig.proxyHeaders holds
// metadataExchangeHeaders (mode IN_MESH: the metadata exchange headers
// only towards mesh services), which a mesh copied from Istio sets and
// which Strait's sidecars do not implement (they send the exchange to
// every upstream).
var namedWithin = []string{"defaultConfig.proxyHeaders"}

// refuseUnsupported names every set field that Strait does not implement,
// one line each in the proto's order, so that a mesh config copied from
// an Istio installation is fixed in one pass.
func refuseUnsupported(m *meshv1alpha1.MeshConfig) error {
	var errs []error
	var check func(prefix string, msg protoreflect.Message, ok []string)
	check = func(prefix string, msg protoreflect.Message, ok []string) {
		msg.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			switch {
			case slices.Contains(ok, fd.JSONName()):
			case slices.Contains(namedWithin, prefix+fd.JSONName()) && fd.Message() != nil:
				// Name the fields inside (defaultConfig.proxyHeaders.
				// metadataExchangeHeaders), where the refusal is.
				n := len(errs)
				check(prefix+fd.JSONName()+".", v.Message(), nil)
				if len(errs) == n { // set but empty
					errs = append(errs, fieldError(prefix+fd.JSONName(), "not supported by Strait yet"))
				}
			default:
				errs = append(errs, fieldError(prefix+fd.JSONName(), "not supported by Strait yet"))
			}
			return true
		})
	}
	check("", m.ProtoReflect(), honoured)
	if m.GetDefaultConfig() != nil {
		check("defaultConfig.", m.GetDefaultConfig().ProtoReflect(), honouredProxyConfig)
	}
	return errors.Join(errs...)
}

// modeWritten reports whether outboundTrafficPolicy.mode is in the JSON.
func modeWritten(js []byte) bool {
	var raw struct {
		OutboundTrafficPolicy map[string]json.RawMessage `json:"outboundTrafficPolicy"`
	}
	if json.Unmarshal(js, &raw) != nil {
		return false
	}
	_, ok := raw.OutboundTrafficPolicy["mode"]
	return ok
}

func fieldError(field, problem string) error {
	return fmt.Errorf("mesh config: %s: %s", field, problem)
}

// checkTrustDomain is Istio's ValidateTrustDomain (pkg/config/validation/
// agent): DNS-1123 labels separated by dots, a trailing dot allowed.
func checkTrustDomain(td string) error {
	if td == "" {
		return errors.New("empty trust domain (want a name such as old-td or example.com)")
	}
	labels := strings.Split(strings.TrimSuffix(td, "."), ".")
	for _, l := range labels {
		if !isDNSLabel(l) {
			return fmt.Errorf("%q is not a trust domain: %q is not a DNS label (lower-case letters, digits and '-')", td, l)
		}
	}
	return nil
}

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

func isDNSLabel(s string) bool { return dnsLabel.MatchString(s) }

// manifest is the part of a Kubernetes manifest that tells it from a
// MeshConfig.
type manifest struct {
	APIVersion string                     `json:"apiVersion"`
	Kind       string                     `json:"kind"`
	Data       map[string]json.RawMessage `json:"data"`
}

// envelope reads js as a manifest; ok is false when it has no kind (then
// it is a MeshConfig, or not an object at all).
func envelope(js []byte) (manifest, bool) {
	var m manifest
	if err := json.Unmarshal(js, &m); err != nil || m.Kind == "" {
		return manifest{}, false
	}
	return m, true
}

// ExportTo returns exportTo, or def when exportTo is empty.
func ExportTo(exportTo, def []string) []string {
	if len(exportTo) == 0 {
		return def
	}
	return exportTo
}

// String describes the settings that differ from Istio's defaults, for
// straitd's start-up log.
func (c *Config) String() string {
	var parts []string
	if c.RegistryOnly {
		parts = append(parts, "outboundTrafficPolicy=REGISTRY_ONLY")
	}
	if c.RootNamespace != "" {
		parts = append(parts, "rootNamespace="+c.RootNamespace)
	}
	if c.TrustDomain != DefaultTrustDomain {
		parts = append(parts, "trustDomain="+c.TrustDomain)
	}
	if !c.EnableAutoMTLS {
		parts = append(parts, "enableAutoMtls=false")
	}
	if len(c.TrustDomainAliases) > 0 {
		parts = append(parts, "trustDomainAliases="+strings.Join(c.TrustDomainAliases, ","))
	}
	if c.PathNormalization != meshv1alpha1.MeshConfig_ProxyPathNormalization_BASE {
		parts = append(parts, "pathNormalization="+c.PathNormalization.String())
	}
	if c.Tracing != nil {
		parts = append(parts, c.Tracing.String())
	}
	if len(parts) == 0 {
		return "defaults"
	}
	return strings.Join(parts, " ")
}
