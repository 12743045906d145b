package meshconfig

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
)

func TestParseHonouredFields(t *testing.T) {
	c, err := Parse([]byte(`
outboundTrafficPolicy:
  mode: REGISTRY_ONLY
rootNamespace: mesh-root
defaultServiceExportTo: ["*"]
defaultVirtualServiceExportTo: ["."]
defaultDestinationRuleExportTo: [".", "team-a"]
trustDomain: example.org
enableAutoMtls: false
dnsRefreshRate: 5s
connectTimeout: 2s
defaultConfig:
  drainDuration: 10s
  terminationDrainDuration: 3s
  concurrency: 2
`))
	if err != nil {
		t.Fatal(err)
	}
	if !c.RegistryOnly || c.RootNamespace != "mesh-root" || c.TrustDomain != "example.org" || c.EnableAutoMTLS ||
		c.DNSRefreshRate != 5*time.Second || c.ConnectTimeout != 2*time.Second {
		t.Errorf("parsed = %+v", c)
	}
	if !slices.Equal(c.DefaultVirtualServiceExportTo, []string{"."}) || !slices.Equal(c.DefaultDestinationRuleExportTo, []string{".", "team-a"}) ||
		!slices.Equal(c.DefaultServiceExportTo, []string{"*"}) {
		t.Errorf("exportTo defaults = %v %v %v", c.DefaultServiceExportTo, c.DefaultVirtualServiceExportTo, c.DefaultDestinationRuleExportTo)
	}
	if c.Mesh.GetDefaultConfig().GetDrainDuration().AsDuration() != 10*time.Second {
		t.Error("defaultConfig not kept for the injector")
	}
}

func TestParseDefaults(t *testing.T) {
	for _, in := range []string{"", "{}", "outboundTrafficPolicy: {}", "kind: ConfigMap\napiVersion: v1\ndata:\n  mesh: |\n    trustDomain: cluster.local\n"} {
		c, err := Parse([]byte(in))
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		// The proto's zero mode is REGISTRY_ONLY: only a written mode may
		// turn Istio's ALLOW_ANY default off.
		if c.RegistryOnly || c.RootNamespace != "" || c.TrustDomain != DefaultTrustDomain || !c.EnableAutoMTLS ||
			c.DNSRefreshRate != DefaultDNSRefreshRate || c.ConnectTimeout != DefaultConnectTimeout {
			t.Errorf("%q: parsed = %+v, want Istio's defaults", in, c)
		}
	}
}

func TestParseConfigMap(t *testing.T) {
	c, err := Parse([]byte(`apiVersion: v1
kind: ConfigMap
metadata:
  name: istio
  namespace: istio-system
data:
  mesh: |
    outboundTrafficPolicy:
      mode: REGISTRY_ONLY
`))
	if err != nil || !c.RegistryOnly {
		t.Fatalf("Parse = %+v, %v; want REGISTRY_ONLY from data.mesh", c, err)
	}
}

func TestParseRefusesByName(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"enableEnvoyAccessLogService: true", "enableEnvoyAccessLogService: not supported by Strait yet"},
		{"accessLogFormat: '%PROTOCOL%'", "accessLogFile: is empty"},
		{"accessLogFile: /dev/stdout\naccessLogFormat: '%UPSTREAM_PEER%'", "accessLogFormat: command operator %UPSTREAM_PEER% is not supported by strait-proxy"},
		// An Envoy operator strait-proxy does not fill is refused by straitd
		// too, naming it, in either encoding.
		{"accessLogFile: /dev/stdout\naccessLogFormat: '%START_TIME% %UPSTREAM_REQUEST_ATTEMPT_COUNT%'", "accessLogFormat: command operator %UPSTREAM_REQUEST_ATTEMPT_COUNT% is not supported by strait-proxy"},
		{"accessLogFile: /dev/stdout\naccessLogEncoding: JSON\naccessLogFormat: '{\"md\": \"%DYNAMIC_METADATA(istio.mixer)%\"}'", `accessLogFormat: json_format "md": command operator %DYNAMIC_METADATA% is not supported by strait-proxy`},
		{"accessLogFile: /dev/stdout\naccessLogFormat: '%START_TIME(%Ez)%'", "accessLogFormat: command operator %START_TIME(%Ez)%: time format"},
		{"accessLogFile: /dev/stdout\naccessLogEncoding: JSON\naccessLogFormat: 'not json'", "accessLogFormat: not a JSON object"},
		{"accessLogFile: /dev/stdout\naccessLogEncoding: JSON\naccessLogFormat: '{\"a\": {\"b\": \"%PROTOCOL%\"}}'", `accessLogFormat: json_format "a": only string values`},
		{"enableEnvoyAccessLogService: true", "enableEnvoyAccessLogService: not supported by Strait yet"},
		{"defaultConfig:\n  tracingServiceName: CANONICAL_NAME_ONLY", "defaultConfig.tracingServiceName: not supported by Strait yet"},
		{"defaultConfig:\n  holdApplicationUntilProxyStarts: true", "defaultConfig.holdApplicationUntilProxyStarts: not supported by Strait yet"},
		// Istio's IN_MESH: the exchange headers only towards the mesh;
		// Strait's sidecars send them to every upstream.
		{"defaultConfig:\n  proxyHeaders:\n    metadataExchangeHeaders: {mode: IN_MESH}", "mesh config: defaultConfig.proxyHeaders.metadataExchangeHeaders: not supported by Strait yet"},
		{"defaultConfig:\n  proxyHeaders: {}", "mesh config: defaultConfig.proxyHeaders: not supported by Strait yet"},
		{"outboundTrafficPolicy:\n  mode: ALLOW_ANY_DYNAMIC_DNS", "outboundTrafficPolicy.mode: ALLOW_ANY_DYNAMIC_DNS is not supported"},
		{"outboundTrafficPolicy:\n  tls: {}", "outboundTrafficPolicy.tls: not supported"},
		{"noSuchField: 1", "noSuchField"},
		{"rootNamespace: Not_A_Namespace", "rootNamespace: \"Not_A_Namespace\" is not a namespace name"},
		{"defaultVirtualServiceExportTo: [\"a/b\"]", "defaultVirtualServiceExportTo[0]"},
		{"dnsRefreshRate: 0s", "dnsRefreshRate: 0s is shorter than 1ms"},
		{"connectTimeout: 0s", "connectTimeout"},
		{"trustDomainAliases: [old-td, \"\"]", "trustDomainAliases[1]: empty trust domain"},
		{"trustDomainAliases: [Old_TD]", `trustDomainAliases[0]: "Old_TD" is not a trust domain`},
		{"trustDomainAliases: [a..b]", `trustDomainAliases[0]: "a..b" is not a trust domain`},
	} {
		_, err := Parse([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one containing %q", tc.in, err, tc.want)
		}
	}
}

// TestPathNormalization: pathNormalization.normalization is read as
// written; unset, or DEFAULT, is Istio's default BASE; a value the proto
// does not know is refused by name.
func TestPathNormalization(t *testing.T) {
	for in, want := range map[string]meshv1alpha1.MeshConfig_ProxyPathNormalization_NormalizationType{
		"":                      meshv1alpha1.MeshConfig_ProxyPathNormalization_BASE,
		"pathNormalization: {}": meshv1alpha1.MeshConfig_ProxyPathNormalization_BASE,
		"pathNormalization:\n  normalization: DEFAULT":                  meshv1alpha1.MeshConfig_ProxyPathNormalization_BASE,
		"pathNormalization:\n  normalization: NONE":                     meshv1alpha1.MeshConfig_ProxyPathNormalization_NONE,
		"pathNormalization:\n  normalization: BASE":                     meshv1alpha1.MeshConfig_ProxyPathNormalization_BASE,
		"pathNormalization:\n  normalization: MERGE_SLASHES":            meshv1alpha1.MeshConfig_ProxyPathNormalization_MERGE_SLASHES,
		"pathNormalization:\n  normalization: DECODE_AND_MERGE_SLASHES": meshv1alpha1.MeshConfig_ProxyPathNormalization_DECODE_AND_MERGE_SLASHES,
	} {
		c, err := Parse([]byte(in))
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if c.PathNormalization != want {
			t.Errorf("%q: %s, want %s", in, c.PathNormalization, want)
		}
	}
	for _, in := range []string{"pathNormalization:\n  normalization: 9", "pathNormalization:\n  normalization: SOMETIMES"} {
		if _, err := Parse([]byte(in)); err == nil || !strings.Contains(err.Error(), "pathNormalization.normalization") {
			t.Errorf("%q: error %v, want one naming pathNormalization.normalization", in, err)
		}
	}
	c := Default()
	c.PathNormalization = meshv1alpha1.MeshConfig_ProxyPathNormalization_NONE
	if got := c.String(); got != "pathNormalization=NONE" {
		t.Errorf("String() = %q", got)
	}
}

func TestLoadNamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mesh")
	if err := os.WriteFile(path, []byte("enableEnvoyAccessLogService: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if err == nil || !strings.HasPrefix(err.Error(), path+": mesh config: enableEnvoyAccessLogService") {
		t.Fatalf("Load error = %v", err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("missing file loaded")
	}
}

// TestParseTrustDomainAliases: the aliases are kept in order, without the
// trust domain itself and without repeats, and show in String.
func TestParseTrustDomainAliases(t *testing.T) {
	c, err := Parse([]byte("trustDomain: new-td\ntrustDomainAliases: [old-td, new-td, example.com., old-td]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.TrustDomainAliases, []string{"old-td", "example.com."}) {
		t.Errorf("TrustDomainAliases = %q, want [old-td example.com.]", c.TrustDomainAliases)
	}
	if got := c.String(); got != "trustDomain=new-td trustDomainAliases=old-td,example.com." {
		t.Errorf("String() = %q", got)
	}
	if c, err := Parse([]byte("trustDomain: x\n")); err != nil || c.TrustDomainAliases != nil {
		t.Errorf("no aliases: %q, %v", c.TrustDomainAliases, err)
	}
}

func TestHonouredListsEveryAcceptedField(t *testing.T) {
	h := Honoured()
	for _, f := range []string{"outboundTrafficPolicy.mode", "pathNormalization.normalization", "defaultConfig.drainDuration", "rootNamespace", "trustDomain", "trustDomainAliases"} {
		if !slices.Contains(h, f) {
			t.Errorf("Honoured() lacks %s", f)
		}
	}
	if slices.Contains(h, "enableEnvoyAccessLogService") {
		t.Error("Honoured() lists a refused field")
	}
}

func TestExportTo(t *testing.T) {
	if got := ExportTo(nil, []string{"."}); !slices.Equal(got, []string{"."}) {
		t.Errorf("ExportTo(nil) = %v", got)
	}
	if got := ExportTo([]string{"*"}, []string{"."}); !slices.Equal(got, []string{"*"}) {
		t.Errorf("ExportTo(*) = %v", got)
	}
}

func TestDurationLimitsAtOneMillisecond(t *testing.T) {
	for _, field := range []string{"dnsRefreshRate", "connectTimeout"} {
		c, err := Parse([]byte(field + ": 0.001s\n"))
		if err != nil {
			t.Errorf("%s 1ms: %v; 1ms is allowed", field, err)
			continue
		}
		if c.DNSRefreshRate != time.Millisecond && c.ConnectTimeout != time.Millisecond {
			t.Errorf("%s 1ms not applied: %+v", field, c)
		}
		if _, err := Parse([]byte(field + ": 0.000999s\n")); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s just under 1ms: %v; want refused", field, err)
		}
	}
}

// TestRefusalNamesEveryField: every refused field is named, the
// top-level ones and defaultConfig's, one line each, so that an Istio
// installation's mesh config is fixed in one pass.
func TestRefusalNamesEveryField(t *testing.T) {
	_, err := Parse([]byte("enableEnvoyAccessLogService: true\nenablePrometheusMerge: true\ndefaultConfig:\n  tracingServiceName: CANONICAL_NAME_ONLY\n"))
	if err == nil {
		t.Fatal("refused fields accepted")
	}
	for _, want := range []string{"mesh config: enableEnvoyAccessLogService: not supported", "mesh config: enablePrometheusMerge: not supported", "mesh config: defaultConfig.tracingServiceName: not supported"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if n := strings.Count(err.Error(), "\n") + 1; n != 3 {
		t.Errorf("%d lines, want one per field:\n%v", n, err)
	}
}

// TestDurationsAsIstioWritesThem: durations in Go's notation, as in the
// networking kinds; a bad value or enum names its field.
func TestDurationsAsIstioWritesThem(t *testing.T) {
	c, err := Parse([]byte("connectTimeout: 1500ms\ndnsRefreshRate: 1m\ndefaultConfig:\n  drainDuration: 0.5s\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.ConnectTimeout != 1500*time.Millisecond || c.DNSRefreshRate != time.Minute || c.Mesh.GetDefaultConfig().GetDrainDuration().AsDuration() != 500*time.Millisecond {
		t.Errorf("parsed %v %v %v", c.ConnectTimeout, c.DNSRefreshRate, c.Mesh.GetDefaultConfig().GetDrainDuration())
	}
	for in, want := range map[string]string{
		"connectTimeout: soon\n":                        `mesh config: connectTimeout: "soon" is not a duration`,
		"defaultConfig:\n  drainDuration: 5\n":          "mesh config: defaultConfig.drainDuration: 5 is not a duration",
		"outboundTrafficPolicy: {mode: REGISTRY_ONY}\n": "mesh config: outboundTrafficPolicy.mode: ",
		"connectTimeout: 0.1ms\n":                       "mesh config: connectTimeout: 100µs is shorter than 1ms",
	} {
		if _, err := Parse([]byte(in)); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", in, err, want)
		}
	}
}

func TestString(t *testing.T) {
	if got := Default().String(); got != "defaults" {
		t.Errorf("Default().String() = %q", got)
	}
	c := Default()
	c.RegistryOnly = true
	if got := c.String(); got != "outboundTrafficPolicy=REGISTRY_ONLY" {
		t.Errorf("String() = %q", got)
	}
	c.RootNamespace = "root"
	if got := c.String(); got != "outboundTrafficPolicy=REGISTRY_ONLY rootNamespace=root" {
		t.Errorf("String() = %q", got)
	}
	c.RegistryOnly = false
	if got := c.String(); got != "rootNamespace=root" {
		t.Errorf("String() = %q", got)
	}
}

// TestAccessLog: accessLogFile alone is Istio's text format; a format
// without a newline gets one; JSON is Istio's JSON format unless given.
func TestAccessLog(t *testing.T) {
	c, err := Parse([]byte("accessLogFile: /dev/stdout\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.AccessLog == nil || c.AccessLog.Path != "/dev/stdout" || c.AccessLog.JSON || c.AccessLog.Text != DefaultAccessLogFormat {
		t.Fatalf("access log %+v", c.AccessLog)
	}
	c, err = Parse([]byte("accessLogFile: /tmp/a.log\naccessLogFormat: '%RESPONSE_CODE% %RESPONSE_FLAGS%'\n"))
	if err != nil || c.AccessLog.Text != "%RESPONSE_CODE% %RESPONSE_FLAGS%\n" {
		t.Fatalf("custom text: %+v %v", c.AccessLog, err)
	}
	_, err = Parse([]byte("accessLogFile: /tmp/a.log\naccessLogFormat: '%START_TIME(%s.%3f)% %DOWNSTREAM_PEER_URI_SAN% %UPSTREAM_LOCAL_PORT% %REQ(USER-AGENT):10%'\n"))
	if err != nil {
		t.Fatalf("operators strait-proxy fills: %v", err)
	}
	c, err = Parse([]byte("accessLogFile: /dev/stdout\naccessLogEncoding: JSON\n"))
	if err != nil || !c.AccessLog.JSON || c.AccessLog.JSONFormat.GetFields()["response_flags"].GetStringValue() != "%RESPONSE_FLAGS%" || len(c.AccessLog.JSONFormat.GetFields()) != 24 {
		t.Fatalf("default JSON: %+v %v", c.AccessLog, err)
	}
	c, err = Parse([]byte("accessLogFile: /dev/stdout\naccessLogEncoding: JSON\naccessLogFormat: '{\"code\": \"%RESPONSE_CODE%\"}'\n"))
	if err != nil || len(c.AccessLog.JSONFormat.GetFields()) != 1 {
		t.Fatalf("custom JSON: %+v %v", c.AccessLog, err)
	}
	if c, _ := Parse([]byte("trustDomain: x\n")); c.AccessLog != nil {
		t.Error("an access log without accessLogFile")
	}
}
