package settings

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/proxypush"
)

type fixture struct {
	env         map[string]string
	environ     []string
	meshFile    string // contents; "" = absent
	annotations string // contents of pod/annotations; "" = absent
	labels      string
	domain      string
	concurrency *int
}

func (f fixture) load(t *testing.T) (*Config, error) {
	t.Helper()
	dir := t.TempDir()
	pod := filepath.Join(dir, "pod")
	if err := os.MkdirAll(pod, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(path, s string) {
		if s != "" {
			if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(filepath.Join(dir, "mesh"), f.meshFile)
	write(filepath.Join(pod, "annotations"), f.annotations)
	write(filepath.Join(pod, "labels"), f.labels)
	env := map[string]string{"POD_NAME": "client-1", "POD_NAMESPACE": "demo", "INSTANCE_IP": "10.1.0.2"}
	for k, v := range f.env {
		if v == "<unset>" {
			delete(env, k)
		} else {
			env[k] = v
		}
	}
	return Load(Sources{
		LookupEnv:      func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		Environ:        append([]string{"PATH=/bin"}, f.environ...),
		Executable:     "/opt/strait/bin/strait-agent",
		WorkDir:        "/work",
		MeshConfigFile: filepath.Join(dir, "mesh"),
		PodInfoDir:     pod,
		Domain:         f.domain,
		Concurrency:    f.concurrency,
	})
}

func TestLoadDefaults(t *testing.T) {
	c, err := fixture{environ: []string{"ISTIO_META_INTERCEPTION_MODE=REDIRECT", "ISTIO_META_=x"}}.load(t)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct{ name, got, want string }{
		{"node id", c.NodeID(), "sidecar~10.1.0.2~client-1.demo~demo.svc.cluster.local"},
		{"cluster", c.ServiceCluster(), "client-1.demo"},
		{"configPath", c.Proxy.ConfigPath, "/work/etc/istio/proxy"},
		{"binaryPath", c.Proxy.BinaryPath, "/opt/strait/bin/strait-proxy"},
		{"socket", c.XDSSocketPath, "/work/etc/istio/proxy/XDS"},
		{"bootstrap", c.BootstrapPath(), "/work/etc/istio/proxy/envoy-rev.json"},
		{"discoveryAddress", c.Proxy.DiscoveryAddress, DefaultDiscoveryAddress},
		{"meta", c.NodeMetadata()["INTERCEPTION_MODE"], "REDIRECT"},
		{"meta NAMESPACE", c.NodeMetadata()["NAMESPACE"], "demo"},
		{"meta INSTANCE_IPS", c.NodeMetadata()["INSTANCE_IPS"], "10.1.0.2"},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s = %q, want %q", ch.name, ch.got, ch.want)
		}
	}
	if c.Concurrency != 2 || c.Proxy.ProxyAdminPort != 15000 || c.Proxy.StatusPort != 15020 || c.ReadinessPort != 15021 {
		t.Errorf("ports/concurrency = %d %d %d %d", c.Concurrency, c.Proxy.ProxyAdminPort, c.Proxy.StatusPort, c.ReadinessPort)
	}
	if c.DrainDuration != 5*time.Second || c.ProxyDrainTime() != 45*time.Second {
		t.Errorf("drain = %v, proxy drain time = %v", c.DrainDuration, c.ProxyDrainTime())
	}
	if _, ok := c.NodeMetadata()["SERVICE_ACCOUNT"]; ok {
		t.Error("SERVICE_ACCOUNT in metadata although unset")
	}
	if len(c.Metadata) != 1 {
		t.Errorf("metadata = %v, want only INTERCEPTION_MODE", c.Metadata)
	}
}

// TestLoadAppMetrics: the injector's ISTIO_PROMETHEUS_ANNOTATIONS become
// the app endpoints the agent merges, with pilot-agent's defaults.
func TestLoadAppMetrics(t *testing.T) {
	c, err := fixture{env: map[string]string{"ISTIO_PROMETHEUS_ANNOTATIONS": `{"scrape":"true","path":"","port":"9102"}`}}.load(t)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.AppMetrics) != 1 || c.AppMetrics[0].Port != "9102" || c.AppMetrics[0].Path != "/metrics" {
		t.Errorf("AppMetrics = %+v, want [{9102 /metrics}]", c.AppMetrics)
	}
	if c, err := (fixture{}).load(t); err != nil || c.AppMetrics != nil {
		t.Errorf("without the variable: %+v, %v", c.AppMetrics, err)
	}
}

// TestLoadMetaJSONLabels: ISTIO_METAJSON_LABELS gives the pod's labels
// (pilot-agent's extractAttributesMetadata); the downward API file's win.
func TestLoadMetaJSONLabels(t *testing.T) {
	c, err := fixture{env: map[string]string{"ISTIO_METAJSON_LABELS": `{"app":"reviews","version":"v2"}`}, labels: "version=\"v3\"\n"}.load(t)
	if err != nil {
		t.Fatal(err)
	}
	if c.Labels["app"] != "reviews" || c.Labels["version"] != "v3" || c.ServiceCluster() != "reviews.demo" {
		t.Errorf("labels %v, cluster %s", c.Labels, c.ServiceCluster())
	}
	if _, err := (fixture{env: map[string]string{"ISTIO_METAJSON_LABELS": "app=x"}}).load(t); err == nil || !strings.Contains(err.Error(), "ISTIO_METAJSON_LABELS") {
		t.Errorf("bad JSON: %v", err)
	}
}

func TestLoadMergeOrder(t *testing.T) {
	five := 5
	c, err := fixture{
		meshFile: "defaultConfig:\n  discoveryAddress: mesh:15010\n  proxyAdminPort: 16000\n  statusPort: 16020\n  concurrency: 3\n" +
			"enableTracing: true\n", // other MeshConfig fields are fine
		env:         map[string]string{"PROXY_CONFIG": `{"discoveryAddress":"env:15010","proxyAdminPort":17000,"binaryPath":"/usr/local/bin/strait-proxy"}`, "SERVICE_ACCOUNT": "sa"},
		annotations: `proxy.istio.io/config="discoveryAddress: annotation:15010\nterminationDrainDuration: 7s\n"` + "\nother=\"x\"\n",
		labels:      "app=\"client\"\nversion=\"v1\"\n",
		domain:      "demo.svc.example.org",
		concurrency: &five,
	}.load(t)
	if err != nil {
		t.Fatal(err)
	}
	if c.Proxy.DiscoveryAddress != "annotation:15010" {
		t.Errorf("discoveryAddress = %q, want the annotation's", c.Proxy.DiscoveryAddress)
	}
	if c.Proxy.ProxyAdminPort != 17000 || c.Proxy.StatusPort != 16020 {
		t.Errorf("ports = %d, %d: want PROXY_CONFIG over mesh, mesh over default", c.Proxy.ProxyAdminPort, c.Proxy.StatusPort)
	}
	if c.Concurrency != 5 {
		t.Errorf("concurrency = %d, want the flag's 5", c.Concurrency)
	}
	if c.Proxy.BinaryPath != "/usr/local/bin/strait-proxy" || c.DrainDuration != 7*time.Second {
		t.Errorf("binaryPath %q, drain %v", c.Proxy.BinaryPath, c.DrainDuration)
	}
	if c.NodeID() != "sidecar~10.1.0.2~client-1.demo~demo.svc.example.org" || c.ServiceCluster() != "client.demo" {
		t.Errorf("node id %q, cluster %q", c.NodeID(), c.ServiceCluster())
	}
	md := c.NodeMetadata()
	if md["NAME"] != "client-1" || md["SERVICE_ACCOUNT"] != "sa" || c.Labels["app"] != "client" || c.Labels["version"] != "v1" {
		t.Errorf("metadata = %v", md)
	}

	c, err = fixture{meshFile: "defaultConfig:\n  concurrency: 3\n"}.load(t)
	if err != nil || c.Concurrency != 3 {
		t.Errorf("concurrency from mesh file = %v, %v; want 3", c, err)
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name string
		f    fixture
		want string // substring of the error
	}{
		{"no pod name", fixture{env: map[string]string{"POD_NAME": "<unset>"}}, "POD_NAME: not set"},
		{"no namespace", fixture{env: map[string]string{"POD_NAMESPACE": ""}}, "POD_NAMESPACE: not set"},
		{"dotted pod name", fixture{env: map[string]string{"POD_NAME": "a.b"}}, "POD_NAME: \"a.b\" contains '.'"},
		{"no ip", fixture{env: map[string]string{"INSTANCE_IP": "<unset>"}}, "INSTANCE_IP: not set"},
		{"bad ip", fixture{env: map[string]string{"INSTANCE_IP": "10.1.0"}}, "INSTANCE_IP: \"10.1.0\" is not an IP address"},
		{"bad json", fixture{env: map[string]string{"PROXY_CONFIG": "{"}}, "PROXY_CONFIG: not a JSON ProxyConfig"},
		{"unknown field", fixture{env: map[string]string{"PROXY_CONFIG": `{"discoveryAdress":"a:1"}`}}, `unknown field "discoveryAdress"`},
		{"bad discovery address", fixture{env: map[string]string{"PROXY_CONFIG": `{"discoveryAddress":"straitd"}`}}, `PROXY_CONFIG: discoveryAddress: "straitd" is not host:port`},
		{"bad discovery port", fixture{env: map[string]string{"PROXY_CONFIG": `{"discoveryAddress":"straitd:http"}`}}, `PROXY_CONFIG: discoveryAddress: "straitd:http" has port "http"`},
		{"bad admin port", fixture{env: map[string]string{"PROXY_CONFIG": `{"proxyAdminPort":70000}`}}, "PROXY_CONFIG: proxyAdminPort: 70000 is not a port"},
		{"negative concurrency", fixture{env: map[string]string{"PROXY_CONFIG": `{"concurrency":-1}`}}, "PROXY_CONFIG: concurrency: -1 is negative"},
		{"bad mesh file", fixture{meshFile: "defaultConfig:\n  discoveryAddress: nope\n"}, "mesh: defaultConfig: discoveryAddress: \"nope\""},
		{"bad annotation", fixture{annotations: `proxy.istio.io/config="discoveryAddress: x"`}, "annotation proxy.istio.io/config: discoveryAddress"},
		{"annotation field not honoured per pod", fixture{annotations: `proxy.istio.io/config="holdApplicationUntilProxyStarts: true"`},
			"annotation proxy.istio.io/config: holdApplicationUntilProxyStarts: not supported by Strait yet"},
		{"unquoted annotation", fixture{annotations: "a=b"}, "annotations:1: value of \"a\" is not a quoted string"},
		{"bad drain", fixture{env: map[string]string{"MINIMUM_DRAIN_DURATION": "5"}}, `MINIMUM_DRAIN_DURATION: "5" is not a non-negative duration`},
		{"long socket", fixture{env: map[string]string{"XDS_SOCKET_PATH": "/" + strings.Repeat("x", 120)}}, "XDS_SOCKET_PATH: "},
		{"bad domain", fixture{domain: "a~b"}, "--domain"},
		{"app metrics on the status port", fixture{env: map[string]string{"ISTIO_PROMETHEUS_ANNOTATIONS": `{"port":"15020"}`}}, "ISTIO_PROMETHEUS_ANNOTATIONS: port 15020 is the agent's status port"},
		{"unknown proxy mode", fixture{env: map[string]string{"STRAIT_PROXY_MODE": "thread"}}, `STRAIT_PROXY_MODE: "thread" is not inprocess or exec`},
		{"in-process Envoy", fixture{env: map[string]string{"STRAIT_PROXY_MODE": "inprocess", "PROXY_CONFIG": `{"binaryPath":"/usr/local/bin/envoy"}`}},
			`STRAIT_PROXY_MODE=inprocess runs the agent's own strait-proxy, but ProxyConfig binaryPath names "/usr/local/bin/envoy"`},
		{"app metrics not JSON", fixture{env: map[string]string{"ISTIO_PROMETHEUS_ANNOTATIONS": "8080"}}, "ISTIO_PROMETHEUS_ANNOTATIONS: \"8080\" is not a scrape configuration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.f.load(t)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

// TestProxyMode: strait-proxy (the default binaryPath, or one that names
// it) runs in the agent's process unless STRAIT_PROXY_MODE=exec; any other
// binaryPath (Envoy) is executed.
func TestProxyMode(t *testing.T) {
	for _, tt := range []struct {
		name, mode, binaryPath string
		want                   ProxyMode
	}{
		{"default", "", "", ProxyInProcess},
		{"strait-proxy named", "", "/usr/local/bin/strait-proxy", ProxyInProcess},
		{"envoy", "", "/usr/local/bin/envoy", ProxyExec},
		{"strait-proxy executed", "exec", "", ProxyExec},
		{"envoy executed", "exec", "/usr/local/bin/envoy", ProxyExec},
		{"in-process asked", "inprocess", "/opt/strait-proxy", ProxyInProcess},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{}
			if tt.mode != "" {
				env["STRAIT_PROXY_MODE"] = tt.mode
			}
			if tt.binaryPath != "" {
				env["PROXY_CONFIG"] = `{"binaryPath":"` + tt.binaryPath + `"}`
			}
			c, err := fixture{env: env}.load(t)
			if err != nil {
				t.Fatal(err)
			}
			if c.ProxyMode != tt.want {
				t.Errorf("ProxyMode = %q, want %q", c.ProxyMode, tt.want)
			}
		})
	}
}

func TestParseDownwardAPIFile(t *testing.T) {
	got, err := ParseDownwardAPIFile("labels", []byte("app=\"reviews\"\n\nsecurity.istio.io/tlsMode=\"istio\"\nmulti=\"a\\nb=c\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got["app"] != "reviews" || got["security.istio.io/tlsMode"] != "istio" || got["multi"] != "a\nb=c" || len(got) != 3 {
		t.Errorf("got %q", got)
	}
}

// TestParseDownwardAPIFileErrors: a bad line is named by its number
// (blank lines count) and the source.
func TestParseDownwardAPIFileErrors(t *testing.T) {
	for _, tc := range []struct{ data, want string }{
		{"app=\"a\"\n\nbroken\n", `labels:3: want key="value", got "broken"`},
		{"app=unquoted\n", `labels:1: value of "app" is not a quoted string`},
	} {
		if _, err := ParseDownwardAPIFile("labels", []byte(tc.data)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err %v, want %q", tc.data, err, tc.want)
		}
	}
}

func FuzzParseDownwardAPIFile(f *testing.F) {
	f.Add([]byte("app=\"reviews\"\nx=\"a\\nb\"\n"))
	f.Add([]byte("bad"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = ParseDownwardAPIFile("fuzz", data) // must not panic
	})
}

func FuzzParseProxyConfigJSON(f *testing.F) {
	f.Add([]byte(`{"discoveryAddress":"straitd:15010","concurrency":2,"drainDuration":"45s"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		pc, err := ParseProxyConfigJSON("fuzz", data)
		if err == nil && validateProxyConfigFields(pc) != nil {
			t.Fatal("accepted a ProxyConfig that does not validate")
		}
	})
}

func TestLocalityFromLabel(t *testing.T) {
	c := &Config{Labels: map[string]string{"istio-locality": "us-east.us-east-1a.rack4"}}
	if got := c.Locality(); got != "us-east/us-east-1a/rack4" {
		t.Errorf("Locality() = %q", got)
	}
	if got := (&Config{Labels: map[string]string{"app": "x"}}).Locality(); got != "" {
		t.Errorf("without the label: %q", got)
	}
}

// TestDNSCapture: capture is on when any of Istio's ways sets it, and then
// in the node metadata (straitd sends the name table on it); false values
// leave it off; DNS_AUTO_ALLOCATE is accepted.
func TestDNSCapture(t *testing.T) {
	on := []struct {
		name string
		f    fixture
	}{
		{"environment", fixture{environ: []string{"ISTIO_META_DNS_CAPTURE=true"}}},
		{"environment 1", fixture{environ: []string{"ISTIO_META_DNS_CAPTURE=1"}}},
		{"mesh defaultConfig", fixture{meshFile: "defaultConfig:\n  proxyMetadata:\n    ISTIO_META_DNS_CAPTURE: \"true\"\n"}},
		{"PROXY_CONFIG", fixture{env: map[string]string{"PROXY_CONFIG": `{"proxyMetadata":{"ISTIO_META_DNS_CAPTURE":"true"}}`}}},
		{"annotation", fixture{annotations: `proxy.istio.io/config="proxyMetadata:\n  ISTIO_META_DNS_CAPTURE: \"True\"\n"`}},
	}
	for _, tc := range on {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tc.f.load(t)
			if err != nil {
				t.Fatal(err)
			}
			if !c.DNSCapture || c.NodeMetadata()["DNS_CAPTURE"] != "true" {
				t.Errorf("DNSCapture %v, metadata DNS_CAPTURE %q; want on", c.DNSCapture, c.NodeMetadata()["DNS_CAPTURE"])
			}
		})
	}
	for _, f := range []fixture{
		{},
		{environ: []string{"ISTIO_META_DNS_CAPTURE=false"}},
		// The environment (what the injector sets) wins over proxyMetadata.
		{environ: []string{"ISTIO_META_DNS_CAPTURE=false"}, env: map[string]string{"PROXY_CONFIG": `{"proxyMetadata":{"ISTIO_META_DNS_CAPTURE":"true"}}`}},
		{env: map[string]string{"PROXY_CONFIG": `{"proxyMetadata":{"ISTIO_META_DNS_CAPTURE":"false","OTHER":"true"}}`}},
	} {
		c, err := f.load(t)
		if err != nil {
			t.Fatal(err)
		}
		if c.DNSCapture {
			t.Errorf("%+v: DNS capture on", f)
		}
	}
	// DNS_AUTO_ALLOCATE is accepted (straitd allocates for every
	// DNS-capture proxy) and does not turn capture on by itself.
	for _, tc := range []struct {
		f       fixture
		capture bool
	}{
		{fixture{environ: []string{"ISTIO_META_DNS_CAPTURE=true", "ISTIO_META_DNS_AUTO_ALLOCATE=true"}}, true},
		{fixture{env: map[string]string{"PROXY_CONFIG": `{"proxyMetadata":{"ISTIO_META_DNS_AUTO_ALLOCATE":"true"}}`}}, false},
	} {
		c, err := tc.f.load(t)
		if err != nil || c.DNSCapture != tc.capture {
			t.Errorf("%+v: DNS capture %v, %v; want %v and no error", tc.f, c != nil && c.DNSCapture, err, tc.capture)
		}
	}
}

// TestRouterNodeID: `proxy router` makes the node id a router's, which
// straitd builds gateway listeners for; `proxy sidecar` (and no type) a
// sidecar's.
func TestRouterNodeID(t *testing.T) {
	for _, tc := range []struct {
		typ  proxypush.NodeType
		want string
	}{
		{"", "sidecar~10.1.0.2~gw-1.ingress~ingress.svc.cluster.local"},
		{proxypush.SidecarProxy, "sidecar~10.1.0.2~gw-1.ingress~ingress.svc.cluster.local"},
		{proxypush.Router, "router~10.1.0.2~gw-1.ingress~ingress.svc.cluster.local"},
	} {
		env := map[string]string{"POD_NAME": "gw-1", "POD_NAMESPACE": "ingress", "INSTANCE_IP": "10.1.0.2"}
		c, err := Load(Sources{
			LookupEnv:  func(k string) (string, bool) { v, ok := env[k]; return v, ok },
			Environ:    []string{},
			Executable: "/usr/local/bin/strait-agent",
			WorkDir:    t.TempDir(), MeshConfigFile: filepath.Join(t.TempDir(), "none"), PodInfoDir: filepath.Join(t.TempDir(), "none"),
			ProxyType: tc.typ,
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := c.NodeID(); got != tc.want {
			t.Errorf("type %q: node id %q, want %q", tc.typ, got, tc.want)
		}
		if _, err := proxypush.ParseNodeID(c.NodeID()); err != nil {
			t.Error(err)
		}
	}
}

// TestValidateProxyConfigBoundaries: the edges of each checked field
// (ports 0 and 65535 in, -1 and 65536 out; concurrency and drain
// durations 0 in, negative out; the discovery port 1–65535).
func TestValidateProxyConfigBoundaries(t *testing.T) {
	for _, tc := range []struct {
		js      string
		wantErr string // "" when valid
	}{
		{`{"proxyAdminPort":0}`, ""},
		{`{"proxyAdminPort":65535}`, ""},
		{`{"proxyAdminPort":-1}`, "proxyAdminPort: -1 is not a port"},
		{`{"statusPort":65536}`, "statusPort: 65536 is not a port"},
		{`{"concurrency":0}`, ""},
		{`{"concurrency":-1}`, "concurrency: -1 is negative"},
		{`{"drainDuration":"0s"}`, ""},
		{`{"terminationDrainDuration":"-0.000000001s"}`, "terminationDrainDuration"},
		{`{"discoveryAddress":"straitd:1"}`, ""},
		{`{"discoveryAddress":"straitd:65535"}`, ""},
		{`{"discoveryAddress":"straitd:0"}`, `has port "0"`},
		{`{"discoveryAddress":"straitd:65536"}`, `has port "65536"`},
		{`{"discoveryAddress":":15010"}`, "has an empty host"},
	} {
		_, err := ParseProxyConfigJSON("PROXY_CONFIG", []byte(tc.js))
		if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s: err = %v, want %q", tc.js, err, tc.wantErr)
		}
	}
}

// TestLoadBoundaries: the edges Load checks: a zero drain duration is
// valid and a negative one is not; a socket path one byte under the Unix
// limit is valid and one at it is not.
func TestLoadBoundaries(t *testing.T) {
	under := "/" + strings.Repeat("x", maxUnixPath-2)
	at := under + "y"
	for _, tc := range []struct {
		name    string
		env     map[string]string
		wantErr string
	}{
		{"zero drain", map[string]string{"MINIMUM_DRAIN_DURATION": "0s"}, ""},
		{"negative drain", map[string]string{"MINIMUM_DRAIN_DURATION": "-1ns"}, "MINIMUM_DRAIN_DURATION"},
		{"socket path under the limit", map[string]string{"XDS_SOCKET_PATH": under}, ""},
		{"socket path at the limit", map[string]string{"XDS_SOCKET_PATH": at}, "a Unix socket path must be under"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := fixture{env: tc.env}.load(t)
			if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}
