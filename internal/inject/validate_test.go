package inject

import (
	"errors"
	"strings"
	"testing"

	istioanno "istio.io/api/annotation"
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
		{"proxy.istio.io/config", "concurrency: 2\nholdApplicationUntilProxyStarts: true", ""},
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

func FuzzValidateAnnotations(f *testing.F) {
	for _, s := range []string{"abc", "500m", "*", "10.0.0.0/8", "concurrency: 2", "{", `{"a":{"mountPath":"/a"}}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		m := map[string]string{}
		for name := range annotationValidators {
			m[name] = v
		}
		_ = ValidateAnnotations(m)
	})
}
