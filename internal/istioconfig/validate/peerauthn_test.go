package validate_test

import (
	"strings"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/istioconfig"
)

func TestPeerAuthenticationLoad(t *testing.T) {
	const y = `apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: strict, namespace: demo, creationTimestamp: "2026-01-02T03:04:05Z"}
spec:
  selector: {matchLabels: {app: echo}}
  mtls: {mode: STRICT}
  portLevelMtls:
    8080: {mode: DISABLE}
---
apiVersion: security.istio.io/v1beta1
kind: PeerAuthentication
metadata: {name: default, namespace: istio-system}
spec: {}
---
apiVersion: extensions.istio.io/v1alpha1
kind: WasmPlugin
metadata: {name: skipped}
spec: {}
`
	res := istioconfig.ParseFile("pa.yaml", []byte(y))
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if len(res.Configs) != 2 {
		t.Fatalf("configs %d, want 2", len(res.Configs))
	}
	c := res.Configs[0]
	pa := c.PeerAuthentication()
	if c.Kind != istioconfig.KindPeerAuthentication || pa.GetMtls().GetMode().String() != "STRICT" || pa.GetPortLevelMtls()[8080].GetMode().String() != "DISABLE" ||
		pa.GetSelector().GetMatchLabels()["app"] != "echo" {
		t.Errorf("parsed %v", pa)
	}
	if want := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC); !c.CreationTime.Equal(want) {
		t.Errorf("creation time %v, want %v", c.CreationTime, want)
	}
	if !res.Configs[1].CreationTime.IsZero() || res.Configs[1].Namespace != "istio-system" {
		t.Errorf("second: %+v", res.Configs[1].Meta)
	}
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "document 3: skipping extensions.istio.io/v1alpha1 WasmPlugin: only networking.istio.io, security.istio.io and telemetry.istio.io kinds are supported") {
		t.Errorf("warnings %q", res.Warnings)
	}

	// The same config recreated later is a different config: the oldest
	// wins among equal policies.
	later := istioconfig.ParseFile("pa.yaml", []byte(strings.Replace(y, "03:04:05", "03:04:06", 1))).Configs[0]
	if c.Equal(later) {
		t.Error("configs with different creation times are Equal")
	}
}

func TestPeerAuthenticationInvalid(t *testing.T) {
	pa := func(spec string) string {
		return "apiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata: {name: p, namespace: demo}\nspec:\n" + spec
	}
	for _, tc := range []struct{ name, yaml, want string }{
		{"port level without selector", pa("  mtls: {mode: STRICT}\n  portLevelMtls: {8080: {mode: DISABLE}}\n"),
			"spec.portLevelMtls: a mesh or namespace PeerAuthentication (no selector.matchLabels) cannot have port-level mTLS"},
		{"empty port level", pa("  selector: {matchLabels: {app: a}}\n  portLevelMtls: {}\n"),
			"spec.portLevelMtls: is empty; list at least one port"},
		{"port zero", pa("  selector: {matchLabels: {app: a}}\n  portLevelMtls: {0: {mode: DISABLE}}\n"),
			"spec.portLevelMtls[0]: port 0 is not in 1..65535"},
		{"bad label", pa("  selector: {matchLabels: {app: 'a b'}}\n"),
			`spec.selector.matchLabels[app]: "a b" is not a valid label value`},
		{"unknown mode", pa("  mtls: {mode: SOMETIMES}\n"), "spec.mtls.mode"},
		{"networking group", strings.Replace(pa("  mtls: {mode: STRICT}\n"), "security.istio.io", "networking.istio.io", 1),
			"apiVersion: PeerAuthentication is in security.istio.io, not networking.istio.io"},
		{"bad version", strings.Replace(pa("  mtls: {mode: STRICT}\n"), "/v1", "/v1alpha3", 1),
			`apiVersion: "security.istio.io/v1alpha3" is not supported; use security.istio.io/v1 or v1beta1`},
	} {
		res := istioconfig.ParseFile("p.yaml", []byte(tc.yaml))
		if tc.want == "" {
			if res.Err != nil || len(res.Configs) != 0 || len(res.Warnings) != 1 {
				t.Errorf("%s: want skipped with a warning, got %v %q", tc.name, res.Err, res.Warnings)
			}
			continue
		}
		if res.Err == nil || !strings.Contains(res.Err.Error(), tc.want) || len(res.Configs) != 0 {
			t.Errorf("%s: err %v, want %q", tc.name, res.Err, tc.want)
		}
	}
}
