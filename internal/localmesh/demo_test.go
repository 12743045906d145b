package localmesh

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The demo rewrites examples/demo/virtualservice.yaml from a template: the
// file must be what the template renders for the weights the demo assumes.
func TestExampleVirtualServiceMatchesTemplate(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "examples", "demo", DemoVirtualServiceFile))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(data), string(DemoVirtualService(80, 20)); got != want {
		t.Fatalf("examples/demo/%s differs from DemoVirtualService(80, 20):\n%s\nwant:\n%s", DemoVirtualServiceFile, got, want)
	}
}

func TestExampleMeshHasDemoWorkloads(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "examples", "demo", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range DemoWorkloads() {
		if !strings.Contains(string(data), "address: "+w.ConfigIP+"\n") {
			t.Errorf("mesh.yaml has no WorkloadEntry with address %s for pod %s", w.ConfigIP, w.Name)
		}
	}
	for _, s := range []string{DemoHost, DemoVIP} {
		if !strings.Contains(string(data), s) {
			t.Errorf("mesh.yaml does not mention %s", s)
		}
	}
}

func TestCheckSplit(t *testing.T) {
	tests := []struct {
		name    string
		split   Split
		weights [2]int
		wantErr string
	}{
		{"within tolerance", Split{Total: 200, Counts: map[string]int{"v1": 150, "v2": 50}}, [2]int{80, 20}, ""},
		{"too far", Split{Total: 200, Counts: map[string]int{"v1": 100, "v2": 100}}, [2]int{80, 20}, "v1 got 50.0%"},
		{"failures", Split{Total: 200, Counts: map[string]int{"v1": 160, "v2": 39}, Failures: 1, FirstError: "boom"}, [2]int{80, 20}, "1 of 200 requests failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkSplit(tt.split, tt.weights, 10)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestCollectWeights(t *testing.T) {
	doc := map[string]any{"configs": []any{map[string]any{"weighted_clusters": map[string]any{"clusters": []any{
		map[string]any{"name": "outbound|80|v1|h", "weight": float64(30)},
		map[string]any{"name": "outbound|80|v2|h", "weight": float64(70)},
		map[string]any{"name": "other", "weight": float64(1)},
	}}}}}
	got := map[string]uint32{}
	collectWeights(doc, got)
	if len(got) != 2 || got["outbound|80|v1|h"] != 30 || got["outbound|80|v2|h"] != 70 {
		t.Fatalf("weights = %v", got)
	}
}
