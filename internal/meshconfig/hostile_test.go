package meshconfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestParseHostile: mistakes in a mesh config file are refused with what
// is wrong and how to fix it, never read as an empty (default) config.
func TestParseHostile(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"duplicate key", "trustDomain: a.org\ntrustDomain: b.org\n", `mesh config: not YAML: line 2: key "trustDomain" already set in map (a key may appear once in a mapping; remove or merge the repeated one)`},
		{"tab", "defaultConfig:\n\tconcurrency: 2\n", "mesh config: not YAML: line 2: found character that cannot start any token (indent with spaces: YAML does not allow tabs)"},
		{"ConfigMap without mesh", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio}\ndata: {meshNetworks: x}\n",
			"mesh config: data.mesh: the ConfigMap has no mesh key; the istio ConfigMap holds the mesh config under data.mesh"},
		{"ConfigMap mesh not a string", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio}\ndata:\n  mesh: {trustDomain: a.org}\n",
			`mesh config: data.mesh: must be a string (write "mesh: |" and the mesh config indented below it)`},
		{"ConfigMap mesh duplicate key", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio}\ndata:\n  mesh: |\n    trustDomain: a.org\n    trustDomain: b.org\n",
			`mesh config: data.mesh: not YAML: line 2: key "trustDomain" already set in map`},
		{"not a mesh config", "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: a}\nspec: {}\n",
			`mesh config: this is a networking.istio.io/v1 ServiceEntry, not a mesh config; give Istio's MeshConfig YAML (e.g. "trustDomain: cluster.local") or the istio ConfigMap`},
		{"too large", "# " + strings.Repeat("x", MaxBytes) + "\n", "mesh config: larger than 2 MiB (a ConfigMap holds at most 1 MiB); is this the right file?"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.in))
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) || c != nil {
				t.Errorf("Parse = %v, %v\nwant error %s", c, err, tc.want)
			}
		})
	}
	// The ConfigMap form still loads.
	c, err := Parse([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio}\ndata:\n  mesh: |\n    trustDomain: a.org\n"))
	if err != nil || c.TrustDomain != "a.org" {
		t.Errorf("ConfigMap: %v, %v", c, err)
	}
}

// TestLoadBounded: Load reads no more than MaxBytes, so a wrong path (a
// device that never ends) is an error, not all of memory.
func TestLoadBounded(t *testing.T) {
	if _, err := Load("/dev/zero"); err == nil || !strings.Contains(err.Error(), "larger than 2 MiB") {
		t.Errorf("Load(/dev/zero) = %v", err)
	}
	path := filepath.Join(t.TempDir(), "mesh.yaml")
	if err := os.WriteFile(path, []byte("trustDomain: a.org\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err := Load(path); err != nil || c.TrustDomain != "a.org" {
		t.Errorf("Load = %v, %v", c, err)
	}
}

// FuzzParse: whatever the bytes, Parse returns a config or an error that
// starts with "mesh config: ", and a config it returns is complete.
func FuzzParse(f *testing.F) {
	seeds := []string{
		"",
		"trustDomain: example.org\nrootNamespace: mesh-root\nenableAutoMtls: false\n",
		"outboundTrafficPolicy: {mode: REGISTRY_ONLY}\ndnsRefreshRate: 5s\nconnectTimeout: 2s\n",
		"defaultConfig: {drainDuration: 10s, terminationDrainDuration: 3s, concurrency: 2, proxyAdminPort: 15000}\n",
		"defaultServiceExportTo: ['*']\ndefaultVirtualServiceExportTo: ['.']\ndefaultDestinationRuleExportTo: ['.', team-a]\n",
		"localityLbSetting: {enabled: true, distribute: [{from: 'us/*', to: {us/a: 10, us/b: 90}}]}\n",
		"localityLbSetting: {failover: [{from: us, to: eu}], failoverPriority: [topology.kubernetes.io/region]}\n",
		"accessLogFile: /dev/stdout\naccessLogEncoding: JSON\naccessLogFormat: '{\"a\": \"%START_TIME%\"}'\n",
		"accessLogFile: /dev/stdout\naccessLogFormat: \"[%START_TIME%] %REQ(:METHOD)%\\n\"\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio}\ndata:\n  mesh: |\n    trustDomain: a.org\n",
		"enableTracing: true\n",
		"a: &a [x, x]\nb: [*a, *a]\n",
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	if paths, _ := filepath.Glob("../../test/e2e/testdata/*/mesh.yaml"); len(paths) > 0 {
		for _, p := range paths {
			if b, err := os.ReadFile(p); err == nil {
				f.Add(b)
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			if c != nil || !strings.HasPrefix(err.Error(), "mesh config: ") {
				t.Fatalf("Parse = %v, %v", c, err)
			}
			return
		}
		if c.Mesh == nil || c.TrustDomain == "" || c.DNSRefreshRate <= 0 || c.ConnectTimeout <= 0 {
			t.Fatalf("incomplete config: %+v", c)
		}
		_ = c.String()
	})
}
