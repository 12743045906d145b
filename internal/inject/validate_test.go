package inject

import (
	"errors"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	istioanno "istio.io/api/annotation"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Every injection annotation istio.io/api knows has a validator, so a new
// one in a later istio.io/api cannot slip through unchecked.
func TestValidatorsCoverKnownAnnotations(t *testing.T) {
	prefixes := []string{"sidecar.istio.io/", "traffic.sidecar.istio.io/", "status.sidecar.istio.io/", "readiness.status.sidecar.istio.io/", "proxy.istio.io/"}
	n := 0
	for _, a := range istioanno.AllResourceAnnotations() {
		for _, p := range prefixes {
			if strings.HasPrefix(a.Name, p) {
				n++
				if _, ok := annotationValidators[a.Name]; !ok {
					t.Errorf("annotation %s has no validator", a.Name)
				}
			}
		}
	}
	if n < 30 {
		t.Fatalf("only %d injection annotations found in istio.io/api", n)
	}
}

func TestValidateAnnotations(t *testing.T) {
	cases := []struct {
		name, value string
		// wantErr is the whole message, or "" for a valid value.
		wantErr string
	}{
		{"sidecar.istio.io/proxyCPU", "abc", `annotation sidecar.istio.io/proxyCPU: "abc" is not a CPU quantity (e.g. "500m")`},
		{"sidecar.istio.io/proxyCPU", "500m", ""},
		{"sidecar.istio.io/proxyCPU", "-1", `annotation sidecar.istio.io/proxyCPU: "-1" is not a CPU quantity (e.g. "500m")`},
		{"sidecar.istio.io/proxyCPULimit", "3500m", ""},
		{"sidecar.istio.io/proxyMemory", "128Mi", ""},
		{"sidecar.istio.io/proxyMemoryLimit", "1Gb", `annotation sidecar.istio.io/proxyMemoryLimit: "1Gb" is not a memory quantity (e.g. "128Mi")`},
		{"sidecar.istio.io/inject", "yes", ""},
		{"sidecar.istio.io/nativeSidecar", "maybe", `annotation sidecar.istio.io/nativeSidecar: "maybe" is not a boolean ("true" or "false")`},
		{"sidecar.istio.io/interceptionMode", "TPROXY", ""},
		{"sidecar.istio.io/interceptionMode", "redirect", `annotation sidecar.istio.io/interceptionMode: "redirect" is not an interception mode ("REDIRECT", "TPROXY" or "NONE")`},
		{"status.sidecar.istio.io/port", "0", ""},
		{"status.sidecar.istio.io/port", "15020", ""},
		{"status.sidecar.istio.io/port", "x", `annotation status.sidecar.istio.io/port: "x" is not a port number from 0 to 65535 (e.g. "15020"; 0 turns the status port off)`},
		{"traffic.sidecar.istio.io/includeInboundPorts", "*", ""},
		{"traffic.sidecar.istio.io/includeInboundPorts", "80, 8080", ""},
		{"traffic.sidecar.istio.io/includeInboundPorts", "", ""},
		{"traffic.sidecar.istio.io/excludeInboundPorts", "*", `annotation traffic.sidecar.istio.io/excludeInboundPorts: "*" is not a comma-separated list of ports (e.g. "80,8080")`},
		{"traffic.sidecar.istio.io/excludeOutboundPorts", "0", `annotation traffic.sidecar.istio.io/excludeOutboundPorts: "0" is not a comma-separated list of ports (e.g. "80,8080")`},
		{"traffic.sidecar.istio.io/includeOutboundPorts", "443", ""},
		{"traffic.sidecar.istio.io/includeOutboundIPRanges", "*", ""},
		{"traffic.sidecar.istio.io/includeOutboundIPRanges", "10.0.0.0/8,fd00::/8", ""},
		{"traffic.sidecar.istio.io/excludeOutboundIPRanges", "10.0.0.1", `annotation traffic.sidecar.istio.io/excludeOutboundIPRanges: "10.0.0.1" is not a comma-separated list of CIDRs (e.g. "10.0.0.0/8,172.16.0.0/12")`},
		{"traffic.sidecar.istio.io/excludeInterfaces", "eth1,net1", ""},
		{"traffic.sidecar.istio.io/kubevirtInterfaces", "a b", `annotation traffic.sidecar.istio.io/kubevirtInterfaces: "a b" is not a comma-separated list of interface names (e.g. "eth1,net1")`},
		{"readiness.status.sidecar.istio.io/periodSeconds", "0", `annotation readiness.status.sidecar.istio.io/periodSeconds: "0" is not a positive integer (e.g. "30")`},
		{"readiness.status.sidecar.istio.io/initialDelaySeconds", "0", ""},
		{"readiness.status.sidecar.istio.io/applicationPorts", "8080", ""},
		{"sidecar.istio.io/logLevel", "warning", ""},
		{"sidecar.istio.io/logLevel", "loud", `annotation sidecar.istio.io/logLevel: "loud" is not a proxy log level ("trace", "debug", "info", "warning", "warn", "error", "critical", "off")`},
		{"sidecar.istio.io/componentLogLevel", "misc:error,upstream:debug", ""},
		{"sidecar.istio.io/componentLogLevel", "misc", `annotation sidecar.istio.io/componentLogLevel: "misc" is not a comma-separated list of component:level (e.g. "misc:error,upstream:debug")`},
		{"sidecar.istio.io/agentLogLevel", "debug", ""},
		{"sidecar.istio.io/agentLogLevel", "default:info,xds:debug", ""},
		{"sidecar.istio.io/discoveryAddress", "istiod.istio-system.svc:15012", ""},
		{"sidecar.istio.io/discoveryAddress", "istiod", `annotation sidecar.istio.io/discoveryAddress: "istiod" is not a host:port address (e.g. "istiod.istio-system.svc:15012")`},
		{"sidecar.istio.io/userVolume", `[{"name":"a","emptyDir":{}}]`, ""},
		{"sidecar.istio.io/userVolume", `{"a":{"emptyDir":{}}}`, ""},
		{"sidecar.istio.io/userVolumeMount", `{"a":{"mountPath":"/a"}}`, ""},
		{"sidecar.istio.io/userVolumeMount", `{"a":{}}`, `annotation sidecar.istio.io/userVolumeMount: "{\"a\":{}}" is not a JSON list of volume mounts or a JSON object from volume name to mount (e.g. {"certs":{"mountPath":"/etc/certs","readonly":true}})`},
		{"sidecar.istio.io/statsFlushInterval", "5s", ""},
		{"sidecar.istio.io/statsHistogramBuckets", `{"istiocustom":[1,5]}`, ""},
		{"proxy.istio.io/config", "concurrency: 2\nproxyMetadata: {ISTIO_META_X: abc}\ndrainDuration: 5s", ""},
		// Istio honours these per pod; Strait does not, and says so.
		{"proxy.istio.io/config", "concurrency: 2\nholdApplicationUntilProxyStarts: true\ntracing: {sampling: 10}",
			`annotation proxy.istio.io/config: "concurrency: 2\nholdApplicationUntilProxyStarts: true\ntracing: {sampling: 10}" is not a ProxyConfig Strait honours per pod (tracing, holdApplicationUntilProxyStarts: not supported by Strait yet in proxy.istio.io/config (per pod it honours concurrency, discoveryAddress, drainDuration, image, interceptionMode, proxyAdminPort, proxyMetadata, statusPort, terminationDrainDuration; set mesh-wide fields in the mesh config's defaultConfig))`},
		{"proxy.istio.io/config", `{"concurrency": 2}`, ""},
		{"proxy.istio.io/config", "interceptionMode: TPROXY", ""},
		{"example.com/unrelated", "anything", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name+"="+tc.value, func(t *testing.T) {
			err := ValidateAnnotations(map[string]string{tc.name: tc.value})
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || err.Error() != tc.wantErr {
				t.Fatalf("error = %v\nwant    %s", err, tc.wantErr)
			}
			var ae *AnnotationError
			if !errors.As(err, &ae) || ae.Name != tc.name || ae.Value != tc.value {
				t.Fatalf("error is not an *AnnotationError for %s: %#v", tc.name, err)
			}
		})
	}
}

func TestValidateProxyConfigNamesTheField(t *testing.T) {
	err := ValidateAnnotations(map[string]string{"proxy.istio.io/config": "concurency: 2"})
	if err == nil || !strings.Contains(err.Error(), `unknown field "concurency"`) || !strings.HasPrefix(err.Error(), "annotation proxy.istio.io/config:") {
		t.Fatalf("error = %v", err)
	}
}

func TestValidateRequestOverLimit(t *testing.T) {
	err := ValidateAnnotations(map[string]string{"sidecar.istio.io/proxyCPU": "2", "sidecar.istio.io/proxyCPULimit": "1"})
	want := `annotation sidecar.istio.io/proxyCPU: "2" is not at most sidecar.istio.io/proxyCPULimit ("1")`
	if err == nil || err.Error() != want {
		t.Fatalf("error = %v, want %s", err, want)
	}
}

// TestValidators: for every validator, values just inside and just
// outside what it accepts (the boundaries a flipped comparison or a
// swapped && / || would move). Each rejected value must come back as an
// *AnnotationError naming the annotation, with the expected form.
func TestValidators(t *testing.T) {
	cases := []struct {
		name     string
		ok, bad  []string
		expected string // the "is not ..." text of the bad values
	}{
		{"sidecar.istio.io/inject", []string{"true", " TRUE ", "y", "yes", "n", "no", "on", "off", "false"}, []string{"", "1", "maybe"},
			`a boolean ("true" or "false")`},
		{"sidecar.istio.io/nativeSidecar", []string{"false"}, []string{"1"}, `a boolean ("true" or "false")`},
		{"sidecar.istio.io/rewriteAppHTTPProbers", []string{"true"}, []string{"1"}, `a boolean ("true" or "false")`},
		{"prometheus.istio.io/merge-metrics", []string{"false"}, []string{"1"}, `a boolean ("true" or "false")`},
		{"sidecar.istio.io/interceptionMode", []string{"REDIRECT", "TPROXY", "NONE"}, []string{"", "redirect", "tproxy"},
			`an interception mode ("REDIRECT", "TPROXY" or "NONE")`},
		{"status.sidecar.istio.io/port", []string{"0", "1", "65535", " 15020 "}, []string{"-1", "65536", "", "x"},
			`a port number from 0 to 65535 (e.g. "15020"; 0 turns the status port off)`},
		{"traffic.sidecar.istio.io/includeInboundPorts", []string{"*", " * ", "", "1", "65535", "80, 8080", "80,,81"}, []string{"0", "65536", "-1", "80,x", "*,80", "**"},
			`"*" or a comma-separated list of ports (e.g. "80,8080")`},
		{"traffic.sidecar.istio.io/excludeInboundPorts", []string{"", "1", "65535", "15090,15021"}, []string{"*", "0", "65536", "80,0"},
			`a comma-separated list of ports (e.g. "80,8080")`},
		{"traffic.sidecar.istio.io/includeOutboundPorts", []string{"443"}, []string{"*"},
			`a comma-separated list of ports (e.g. "80,8080")`},
		{"traffic.sidecar.istio.io/excludeOutboundPorts", []string{"3306"}, []string{"*"},
			`a comma-separated list of ports (e.g. "80,8080")`},
		{"readiness.status.sidecar.istio.io/applicationPorts", []string{"8080,8081"}, []string{"0"},
			`a comma-separated list of ports (e.g. "80,8080")`},
		{"traffic.sidecar.istio.io/includeOutboundIPRanges", []string{"*", " * ", "", "10.0.0.0/8", "10.0.0.0/8, fd00::/8"}, []string{"10.0.0.1", "10.0.0.0/8,x", "*,10.0.0.0/8"},
			`"*" or a comma-separated list of CIDRs (e.g. "10.0.0.0/8,172.16.0.0/12")`},
		{"traffic.sidecar.istio.io/excludeOutboundIPRanges", []string{"", "10.0.0.0/8,192.168.0.0/16"}, []string{"*", "10.0.0.1"},
			`a comma-separated list of CIDRs (e.g. "10.0.0.0/8,172.16.0.0/12")`},
		{"traffic.sidecar.istio.io/excludeInterfaces", []string{"", "eth1", "eth1,net1", "a23456789012345", "veth@if3"}, []string{"a b", "a234567890123456", "eth1,a/b"},
			`a comma-separated list of interface names (e.g. "eth1,net1")`},
		{"traffic.sidecar.istio.io/kubevirtInterfaces", []string{"vnet0"}, []string{"a b"},
			`a comma-separated list of interface names (e.g. "eth1,net1")`},
		{"readiness.status.sidecar.istio.io/failureThreshold", []string{"1"}, []string{"0"},
			`a positive integer (e.g. "30")`},
		{"readiness.status.sidecar.istio.io/periodSeconds", []string{"1", "30", "2147483647"}, []string{"0", "-1", "2147483648", "x", ""},
			`a positive integer (e.g. "30")`},
		{"readiness.status.sidecar.istio.io/initialDelaySeconds", []string{"0", "1", " 5 ", "2147483647"}, []string{"-1", "2147483648", "x", ""},
			`a non-negative integer (e.g. "1")`},
		{"sidecar.istio.io/proxyCPU", []string{"1m", "500m", "2"}, []string{"0", "-1", "abc", ""},
			`a CPU quantity (e.g. "500m")`},
		{"sidecar.istio.io/proxyCPULimit", []string{"1"}, []string{"0"},
			`a CPU quantity (e.g. "500m")`},
		{"sidecar.istio.io/proxyMemory", []string{"1", "128Mi"}, []string{"0", "-128Mi", "1Gb"},
			`a memory quantity (e.g. "128Mi")`},
		{"sidecar.istio.io/proxyMemoryLimit", []string{"1Gi"}, []string{"0"},
			`a memory quantity (e.g. "128Mi")`},
		{"sidecar.istio.io/proxyImage", []string{"strait/proxy:latest", "r.io/a/b@sha256:0a", "p"}, []string{"", "-x", "a b", ":tag"},
			`an image reference (e.g. "strait/proxy:latest")`},
		{"sidecar.istio.io/proxyImageType", []string{"default", "debug", "distroless"}, []string{"", "Debug", "distroless ", "slim"},
			`one of "default", "debug", "distroless"`},
		{"sidecar.istio.io/statsCompression", []string{"gzip", "zstd", "brotli", "none"}, []string{"", "lz4", "GZIP"},
			`one of "gzip", "zstd", "brotli", "none"`},
		{"sidecar.istio.io/logLevel", []string{"trace", "off", "warn"}, []string{"", "loud", "INFO"},
			`a proxy log level ("trace", "debug", "info", "warning", "warn", "error", "critical", "off")`},
		{"sidecar.istio.io/componentLogLevel", []string{"misc:error", "misc:error, upstream:debug", "a_b:off"}, []string{"", ",", "misc", "misc:loud", "mi-sc:error", "misc:error,upstream"},
			`a comma-separated list of component:level (e.g. "misc:error,upstream:debug")`},
		{"sidecar.istio.io/agentLogLevel", []string{"debug", "none", "default:info,xds:debug", "xds:fatal"}, []string{"", ",", "loud", "xds:loud", "bad scope:info", "xds:info,trace"},
			`a log level or a comma-separated list of scope:level (e.g. "default:info,xds:debug")`},
		{"sidecar.istio.io/bootstrapOverride", []string{"my-bootstrap", "a", "a.b-c"}, []string{"", "My_Bootstrap", "-a", "a b"},
			`a ConfigMap name (e.g. "my-bootstrap")`},
		{"sidecar.istio.io/discoveryAddress", []string{"istiod:15012", "h:1", "h:65535"}, []string{"", "h", ":15012", "h:0", "h:65536", "h:x", "a b:80", "a/b:80", "a\tb:80"},
			`a host:port address (e.g. "istiod.istio-system.svc:15012")`},
		{"sidecar.istio.io/extraStatTags", []string{"", "a", "destination_port,_x1"}, []string{"1a", "a-b", "a,b c"},
			`a comma-separated list of tag names (e.g. "destination_port,request_protocol")`},
		{"sidecar.istio.io/statsInclusionRegexps", []string{"", "http.*", "a.*,b+"}, []string{"(", "a,[b"},
			`a comma-separated list of regular expressions (e.g. "http.*\.rq_total")`},
		{"sidecar.istio.io/statsHistogramBuckets", []string{`{}`, `{"istiocustom":[1,5,10]}`}, []string{"", "[1]", `{"a":["x"]}`},
			`a JSON object from stat prefix to bucket list (e.g. {"istiocustom":[1,5,10,50]})`},
		{"sidecar.istio.io/statsHistogramBins", []string{"1"}, []string{"0"},
			`a positive integer (e.g. "30")`},
		{"sidecar.istio.io/statsFlushInterval", []string{"1ns", "5s", "1m30s"}, []string{"0", "0s", "-1s", "5", ""},
			`a duration (e.g. "30s")`},
		{"sidecar.istio.io/statsEvictionInterval", []string{"1ns"}, []string{"0s"},
			`a duration (e.g. "30s")`},
		{"sidecar.istio.io/userVolume", []string{"", `[]`, `[{"name":"a","emptyDir":{}}]`, `{"a":{"emptyDir":{}}}`}, []string{"{", `[{"emptyDir":{}}]`},
			`a JSON list of volumes or a JSON object from volume name to volume (e.g. {"certs":{"secret":{"secretName":"certs"}}})`},
		{"sidecar.istio.io/userVolumeMount", []string{"", `[{"name":"a","mountPath":"/a"}]`, `{"a":{"mountPath":"/a"}}`}, []string{`{"a":{}}`},
			`a JSON list of volume mounts or a JSON object from volume name to mount (e.g. {"certs":{"mountPath":"/etc/certs","readonly":true}})`},
	}
	seen := map[string]bool{}
	for _, tc := range cases {
		seen[tc.name] = true
		for _, v := range tc.ok {
			if err := ValidateAnnotations(map[string]string{tc.name: v}); err != nil {
				t.Errorf("%s=%q: unexpected error: %v", tc.name, v, err)
			}
		}
		for _, v := range tc.bad {
			err := ValidateAnnotations(map[string]string{tc.name: v})
			want := (&AnnotationError{Name: tc.name, Value: v, Expected: tc.expected}).Error()
			if err == nil || err.Error() != want {
				t.Errorf("%s=%q: error = %v\nwant %s", tc.name, v, err, want)
			}
		}
	}
	// Every validator that can refuse something is in the table (the
	// ProxyConfig one has its own test).
	for name, v := range annotationValidators {
		if !seen[name] && name != annoProxyConfig && v("\x00 ( {") != "" {
			t.Errorf("validator of %s has no table case", name)
		}
	}
}

// TestValidateRequestAndLimit: a request equal to its limit is fine, above
// it is an error naming the request; CPU and memory are checked apart, and
// an unparsable value is reported once, by its own validator.
func TestValidateRequestAndLimit(t *testing.T) {
	cases := []struct {
		annotations map[string]string
		want        string
	}{
		{map[string]string{"sidecar.istio.io/proxyCPU": "1", "sidecar.istio.io/proxyCPULimit": "1000m"}, ""},
		{map[string]string{"sidecar.istio.io/proxyCPU": "999m", "sidecar.istio.io/proxyCPULimit": "1"}, ""},
		{map[string]string{"sidecar.istio.io/proxyCPU": "1001m", "sidecar.istio.io/proxyCPULimit": "1"},
			`annotation sidecar.istio.io/proxyCPU: "1001m" is not at most sidecar.istio.io/proxyCPULimit ("1")`},
		{map[string]string{"sidecar.istio.io/proxyCPU": "2"}, ""},
		{map[string]string{"sidecar.istio.io/proxyCPULimit": "1", "sidecar.istio.io/proxyMemory": "2"}, ""},
		{map[string]string{"sidecar.istio.io/proxyMemory": "128Mi", "sidecar.istio.io/proxyMemoryLimit": "128Mi"}, ""},
		{map[string]string{"sidecar.istio.io/proxyMemory": "129Mi", "sidecar.istio.io/proxyMemoryLimit": "128Mi"},
			`annotation sidecar.istio.io/proxyMemory: "129Mi" is not at most sidecar.istio.io/proxyMemoryLimit ("128Mi")`},
		{map[string]string{"sidecar.istio.io/proxyMemory": "2Gi", "sidecar.istio.io/proxyCPULimit": "1"}, ""},
		{map[string]string{"sidecar.istio.io/proxyCPU": "x", "sidecar.istio.io/proxyCPULimit": "1"},
			`annotation sidecar.istio.io/proxyCPU: "x" is not a CPU quantity (e.g. "500m")`},
		{map[string]string{"sidecar.istio.io/proxyCPU": "2", "sidecar.istio.io/proxyCPULimit": "x"},
			`annotation sidecar.istio.io/proxyCPULimit: "x" is not a CPU quantity (e.g. "500m")`},
		// Every problem is reported, in annotation order.
		{map[string]string{"sidecar.istio.io/proxyCPU": "2", "sidecar.istio.io/proxyCPULimit": "1", "sidecar.istio.io/logLevel": "loud"},
			`annotation sidecar.istio.io/logLevel: "loud" is not a proxy log level ("trace", "debug", "info", "warning", "warn", "error", "critical", "off")` + "\n" +
				`annotation sidecar.istio.io/proxyCPU: "2" is not at most sidecar.istio.io/proxyCPULimit ("1")`},
	}
	for _, tc := range cases {
		err := ValidateAnnotations(tc.annotations)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("%v:\nerror = %s\nwant    %s", tc.annotations, got, tc.want)
		}
	}
}

func TestValidateProxyConfig(t *testing.T) {
	for _, v := range []string{"", "null", "{}", "concurrency: 2", `{"concurrency": 2}`} {
		if err := ValidateAnnotations(map[string]string{"proxy.istio.io/config": v}); err != nil {
			t.Errorf("%q: %v", v, err)
		}
	}
	for _, v := range []string{"concurrency: x", "[", "concurency: 2", "- 1"} {
		err := ValidateAnnotations(map[string]string{"proxy.istio.io/config": v})
		if err == nil || !strings.HasPrefix(err.Error(), "annotation proxy.istio.io/config: "+strconv.Quote(v)+" is not a ProxyConfig in YAML or JSON (") {
			t.Errorf("%q: error = %v", v, err)
		}
	}
}

// FuzzValidateAnnotations: whatever the value, each annotation either
// validates, and then the injector accepts the pod that carries it and
// what the injector reads from it round-trips, or is refused with one
// *AnnotationError that names that annotation and quotes the value.
func FuzzValidateAnnotations(f *testing.F) {
	for _, s := range []string{"abc", "500m", "0", "1", "65535", "65536", "-1", "*", "10.0.0.0/8", "concurrency: 2", "{", `{"a":{"mountPath":"/a"}}`,
		"true", "TPROXY", "debug", "gzip", "my-bootstrap", "h:80", "5s", "misc:error", "[]", `{"a":[1]}`, "eth0", "a_b", ""} {
		f.Add(s)
	}
	s, err := NewSettings(nil, nil, nil)
	if err != nil {
		f.Fatal(err)
	}
	inj := New(s, Options{})
	f.Fuzz(func(t *testing.T, v string) {
		accepted, refused := map[string]string{}, map[string]string{}
		for _, name := range sortedKeys(annotationValidators) {
			if name == annoSidecarStatus || name == istioanno.SidecarInject.Name {
				continue // they decide whether the pod is injected at all
			}
			err := ValidateAnnotations(map[string]string{name: v})
			if err == nil {
				accepted[name] = v
				checkRoundTrip(t, name, v)
				continue
			}
			refused[name] = v
			var ae *AnnotationError
			if !errors.As(err, &ae) || ae.Name != name || ae.Value != v || ae.Expected == "" {
				t.Fatalf("%s=%q: error %v is not an *AnnotationError naming the annotation", name, v, err)
			}
			if want := "annotation " + name + ": " + strconv.Quote(v) + " is not "; !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("%s=%q: error %q, want one error starting %q", name, v, err, want)
			}
		}
		// The injector accepts a pod with every accepted value (the same
		// value in a request and its limit is within the limit) ...
		res, err := inj.Inject(Request{Pod: fuzzPod(accepted)})
		if err != nil || res.Pod == nil {
			t.Fatalf("%q validates for %v, but Inject fails: %v (skipped: %q)", v, sortedKeys(accepted), err, res.Skipped)
		}
		for name := range accepted {
			if got := res.Pod.Annotations[name]; got != v {
				t.Fatalf("%s=%q: the injected pod carries %q", name, v, got)
			}
		}
		// ... and refuses one with the refused values, with every error.
		if len(refused) > 0 {
			want := ValidateAnnotations(refused)
			if _, err := inj.Inject(Request{Pod: fuzzPod(refused)}); want == nil || err == nil || err.Error() != want.Error() {
				t.Fatalf("%q: Inject error = %v, want %v", v, err, want)
			}
			if n := strings.Count(want.Error(), "\n") + 1; n != len(refused) {
				t.Fatalf("%q: %d errors for %d refused annotations: %v", v, n, len(refused), want)
			}
		}
	})
}

// checkRoundTrip: a value that validates parses, in the form the injector
// reads it, to something that prints back to the same value.
func checkRoundTrip(t *testing.T, name, v string) {
	t.Helper()
	switch name {
	case annoProxyCPU, annoProxyCPULimit, annoProxyMemory, annoProxyMemoryLimit:
		q, err := resource.ParseQuantity(v)
		if err != nil || q.Sign() <= 0 {
			t.Fatalf("%s=%q validates but is not a positive quantity: %v", name, v, err)
		}
		if back := resource.MustParse(q.String()); back.Cmp(q) != 0 {
			t.Fatalf("%s=%q: %s does not parse back to the same quantity", name, v, q.String())
		}
	case annoStatusPort:
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 0 || n > 65535 {
			t.Fatalf("%s=%q validates but is not a port", name, v)
		}
	case istioanno.SidecarTrafficIncludeInboundPorts.Name, istioanno.SidecarTrafficExcludeInboundPorts.Name,
		istioanno.SidecarTrafficIncludeOutboundPorts.Name, istioanno.SidecarTrafficExcludeOutboundPorts.Name,
		istioanno.SidecarStatusReadinessApplicationPorts.Name:
		if strings.TrimSpace(v) == "*" {
			return
		}
		for _, p := range splitList(v) {
			if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
				t.Fatalf("%s=%q validates but %q is not a port 1-65535", name, v, p)
			}
		}
	case istioanno.SidecarTrafficIncludeOutboundIPRanges.Name, istioanno.SidecarTrafficExcludeOutboundIPRanges.Name:
		if strings.TrimSpace(v) == "*" {
			return
		}
		for _, c := range splitList(v) {
			p, err := netip.ParsePrefix(c)
			if err != nil || p.String() != c {
				t.Fatalf("%s=%q validates but %q is not a CIDR that prints back the same (%v)", name, v, c, p)
			}
		}
	case istioanno.SidecarStatsFlushInterval.Name, istioanno.SidecarStatsEvictionInterval.Name:
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("%s=%q validates but is not a positive duration", name, v)
		}
		if back, _ := time.ParseDuration(d.String()); back != d {
			t.Fatalf("%s=%q: %s does not parse back", name, v, d)
		}
	case annoProxyConfig:
		pc, err := parseProxyConfig(v)
		if err != nil {
			t.Fatalf("%s=%q validates but does not parse: %v", name, v, err)
		}
		js, err := protojson.Marshal(pc)
		if err != nil {
			t.Fatal(err)
		}
		again, err := parseProxyConfig(string(js))
		if err != nil || !proto.Equal(again, pc) {
			t.Fatalf("%s=%q: %s does not parse back to the same ProxyConfig (%v)", name, v, js, err)
		}
	}
}

// fuzzPod is a pod with one container and the annotations.
func fuzzPod(annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", Annotations: annotations},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}},
	}
}
