package inject

import (
	"bytes"
	"strings"
	"testing"
)

// TestIntoResourceFileEdges: documents kube-inject passes through or
// refuses, and how it names what it refuses.
func TestIntoResourceFileEdges(t *testing.T) {
	inj := New(DefaultSettings(), Options{})
	pod := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  namespace: ns\nspec:\n  containers:\n  - name: app\n    image: app\n"
	cases := []struct {
		name, in string
		injected int    // how many istio-proxy containers come out
		same     bool   // the output is the input, documents separated by ---
		err      string // error text, "" = none
	}{
		{"empty", "", 0, true, ""},
		{"only comments and separators", "# a\n---\n  # b\n---\n", 0, true, ""},
		{"scalar document", "hello\n", 0, true, ""},
		{"top-level list", "- a\n- b\n", 0, true, ""},
		{"other kind", "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n", 0, true, ""},
		{"pod of another apiVersion", "apiVersion: v2\nkind: Pod\nmetadata: {name: p}\n", 0, true, ""},
		{"deployment of another apiVersion", "apiVersion: extensions/v1beta1\nkind: Deployment\nmetadata: {name: d}\n", 0, true, ""},
		{"pod", pod, 1, false, ""},
		{"pod without a trailing newline", strings.TrimSuffix(pod, "\n"), 1, false, ""},
		{"two pods", pod + "---\n" + pod, 2, false, ""},
		{"PodList", "apiVersion: v1\nkind: PodList\nitems:\n- " + strings.ReplaceAll(strings.TrimSuffix(pod, "\n"), "\n", "\n  ") + "\n", 1, false, ""},
		{"List without items", "apiVersion: v1\nkind: List\n", 0, true, ""},
		{"List with bad items", "apiVersion: v1\nkind: List\nitems: 3\n", 0, true, ""},
		{"List with nothing to inject", "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Service, metadata: {name: s}}\n", 0, true, ""},
		{"XList of another apiVersion is no list", "apiVersion: x/v1\nkind: ThingList\nitems: []\n", 0, true, ""},
		{"misspelt field", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containres: []}\n", 0, false, `Pod: json: unknown field "containres"`},
		{"bad annotation names the object", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d, namespace: shop}\nspec:\n  template:\n    metadata:\n      annotations: {sidecar.istio.io/proxyCPU: x}\n    spec: {containers: [{name: a, image: a}]}\n",
			0, false, `Deployment shop/d: annotation sidecar.istio.io/proxyCPU: "x" is not a CPU quantity (e.g. "500m")`},
		{"generated name", "apiVersion: v1\nkind: Pod\nmetadata: {generateName: g-, annotations: {sidecar.istio.io/proxyCPU: x}}\nspec: {containers: [{name: a, image: a}]}\n",
			0, false, `Pod g-: annotation sidecar.istio.io/proxyCPU: "x" is not a CPU quantity (e.g. "500m")`},
		{"bad item in a List", "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Service}\n- {apiVersion: v1, kind: Pod, metadata: {name: p, annotations: {sidecar.istio.io/proxyCPU: x}}, spec: {containers: [{name: a, image: a}]}}\n",
			0, false, `List item 1: Pod p: annotation sidecar.istio.io/proxyCPU: "x" is not a CPU quantity (e.g. "500m")`},
		{"not YAML", "a: [\n", 0, false, "parse YAML: "},
		{"replication controller without a template", "apiVersion: v1\nkind: ReplicationController\nmetadata: {name: rc}\n", 1, false, ""},
	}
	for _, tc := range cases {
		var out bytes.Buffer
		err := inj.IntoResourceFile(strings.NewReader(tc.in), &out)
		if tc.err != "" {
			if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
				t.Errorf("%s: error = %v, want %q...", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		got := out.String()
		if n := strings.Count(got, "name: "+ProxyContainerName+"\n"); n != tc.injected {
			t.Errorf("%s: %d proxies injected, want %d:\n%s", tc.name, n, tc.injected, got)
		}
		if tc.same {
			want := ""
			if !isBlankYAML([]byte(tc.in)) {
				want = tc.in + "---\n"
			}
			if got != want {
				t.Errorf("%s: output\n%q\nwant\n%q", tc.name, got, want)
			}
		}
		if tc.injected > 0 && (!strings.HasSuffix(got, "\n---\n") || strings.Count(got, "---\n") != strings.Count(tc.in, "---\n")+1) {
			t.Errorf("%s: documents not separated:\n%s", tc.name, got)
		}
	}
}
