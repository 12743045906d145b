package inject

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the golden files testdata/inject/*.injected")

// goldenSettings names the files under testdata/settings a golden input is
// injected with; inputs not listed use the shipped defaults.
type goldenSettings struct {
	config, values, mesh string
	opts                 Options
}

var goldenCases = map[string]goldenSettings{
	"values.yaml":          {values: "values.yaml", mesh: "mesh.yaml", opts: Options{Revision: "canary"}},
	"config-disabled.yaml": {config: "config-disabled.yaml"},
}

func readSettings(t testing.TB, g goldenSettings) *Settings {
	t.Helper()
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("testdata", "settings", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cfg := DefaultConfig()
	var values Values
	var err error
	if g.config != "" {
		if cfg, err = ParseConfig(read(g.config)); err != nil {
			t.Fatal(err)
		}
	}
	if g.values != "" {
		if values, err = ParseValues(read(g.values)); err != nil {
			t.Fatal(err)
		}
	}
	s, err := NewSettings(cfg, values, nil)
	if err != nil {
		t.Fatal(err)
	}
	if g.mesh != "" {
		m, err := ParseMeshConfig(read(g.mesh))
		if err != nil {
			t.Fatal(err)
		}
		if s, err = NewSettings(cfg, values, m); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func kubeInject(inj *Injector, in []byte) []byte {
	var out bytes.Buffer
	if err := inj.IntoResourceFile(bytes.NewReader(in), &out); err != nil {
		return []byte("error: " + err.Error() + "\n")
	}
	return out.Bytes()
}

// TestGolden injects every testdata/inject/*.yaml and compares the result
// with NAME.injected (refresh with go test ./internal/inject -update). An
// input that must fail has the error as its golden output.
func TestGolden(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join("testdata", "inject", "*.yaml"))
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no golden inputs: %v", err)
	}
	for _, in := range inputs {
		name := filepath.Base(in)
		t.Run(strings.TrimSuffix(name, ".yaml"), func(t *testing.T) {
			g := goldenCases[name]
			inj := New(readSettings(t, g), g.opts)
			src, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			got := kubeInject(inj, src)
			golden := strings.TrimSuffix(in, ".yaml") + ".injected"
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("kube-inject %s differs from %s (run with -update and review the diff):\n%s", in, golden, lineDiff(string(want), string(got)))
			}
			// Injecting the output again changes nothing: injected pods
			// carry the status annotation and are skipped.
			if !bytes.HasPrefix(got, []byte("error: ")) {
				if again := kubeInject(inj, got); !bytes.Equal(again, got) {
					t.Errorf("injecting the output again changed it:\n%s", lineDiff(string(got), string(again)))
				}
			}
		})
	}
}

// TestSeedNginx is the acceptance check: testdata/seed/nginx.yaml injected
// with the default values and the mesh config of testdata/seed gives the
// pod that Istio's injector made of it (testdata/seed/nginx.injected, as
// read back from a real cluster), field for field, except that the
// images are ours and the capture step is strait-agent's `iptables`
// subcommand where Istio's pilot-agent has `istio-iptables`.
func TestSeedNginx(t *testing.T) {
	src, err := os.ReadFile("testdata/seed/nginx.yaml")
	if err != nil {
		t.Fatal(err)
	}
	mesh, err := os.ReadFile("testdata/seed/mesh.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m, err := ParseMeshConfig(mesh)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSettings(nil, nil, m)
	if err != nil {
		t.Fatal(err)
	}
	out := kubeInject(New(s, Options{}), src)
	wantYAML, err := os.ReadFile("testdata/seed/nginx.injected")
	if err != nil {
		t.Fatal(err)
	}
	got, want := decodePod(t, out), decodePod(t, wantYAML)
	if got.Spec.InitContainers[0].Args[0] != "iptables" || want.Spec.InitContainers[0].Args[0] != "istio-iptables" {
		t.Fatalf("capture step: got %q, seed %q", got.Spec.InitContainers[0].Args[0], want.Spec.InitContainers[0].Args[0])
	}
	for _, p := range []*corev1.Pod{got, want} {
		p.Spec.InitContainers[0].Args[0] = "CAPTURE"
		for i := range p.Spec.InitContainers {
			p.Spec.InitContainers[i].Image = "IMAGE"
		}
		for i := range p.Spec.Containers {
			if p.Spec.Containers[i].Name == ProxyContainerName {
				p.Spec.Containers[i].Image = "IMAGE"
			}
		}
	}
	gj, _ := json.MarshalIndent(got, "", "  ")
	wj, _ := json.MarshalIndent(want, "", "  ")
	if !bytes.Equal(gj, wj) {
		t.Errorf("injected nginx differs from the seed's:\n%s", lineDiff(string(wj), string(gj)))
	}
}

func decodePod(t *testing.T, y []byte) *corev1.Pod {
	t.Helper()
	doc, _, _ := strings.Cut(string(y), "\n---")
	var lines []string
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	p := &corev1.Pod{}
	if err := yaml.UnmarshalStrict([]byte(strings.Join(lines, "\n")), p); err != nil {
		t.Fatalf("decode pod: %v\n%s", err, y)
	}
	return p
}

// lineDiff is a small line-oriented diff for failure messages.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	i, j := 0, 0
	for i < len(w) || j < len(g) {
		switch {
		case i < len(w) && j < len(g) && w[i] == g[j]:
			i++
			j++
		case j < len(g) && (i >= len(w) || !contains(w[i:], g[j])):
			b.WriteString("+ " + g[j] + "\n")
			j++
		default:
			b.WriteString("- " + w[i] + "\n")
			i++
		}
	}
	return b.String()
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}
