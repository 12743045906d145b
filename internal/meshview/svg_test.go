package meshview

import (
	"flag"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/straitmesh/strait/internal/golden"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// TestRenderSVGGolden: the graph of four workloads (a failing edge, the
// healthy reply edge beside it, a degraded one, a TCP one and one without
// traffic)
// drawn as testdata/graph.svg.golden.
func TestRenderSVGGolden(t *testing.T) {
	client, server, db := Workload{"demo", "client"}, Workload{"demo", "server"}, Workload{"data", "db"}
	unknown := Workload{"unknown", "unknown"}
	g := Graph{
		Nodes: []Workload{db, client, server, unknown},
		Edges: []Edge{
			{EdgeKey: EdgeKey{client, server}, Reporter: "destination", Requests: 50, ServerErrors: 10, Window: 10 * time.Second, Rate: 5, P99: 24.75, Services: []string{"server"}},
			{EdgeKey: EdgeKey{server, client}, Reporter: "destination", Requests: 100, Window: 10 * time.Second, Rate: 10, P99: 2, Services: []string{"client"}},
			{EdgeKey: EdgeKey{server, db}, Reporter: "source", Requests: 100, ServerErrors: 2, Window: 10 * time.Second, Rate: 10, P99: math.NaN(), Services: []string{"db"}},
			{EdgeKey: EdgeKey{unknown, server}, Reporter: "destination", Window: 10 * time.Second, P99: math.NaN()},
			{EdgeKey: EdgeKey{client, db}, Reporter: "destination", Window: 10 * time.Second, P99: math.NaN(), TCPBytes: 25000, TCPConnections: 5, ByteRate: 2500, ConnectionRate: 0.5},
		},
	}
	got, err := RenderSVG(g, "Strait mesh <test> & co")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "graph.svg.golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if d := golden.Diff(want, []byte(got)); d != "" {
		t.Errorf("%s differs (go test -update rewrites it):\n%s", path, d)
	}
}

func TestLayout(t *testing.T) {
	two := Layout(2)
	if two[0].Y != two[1].Y || two[0].X >= two[1].X {
		t.Errorf("two nodes: %v, want the first on the left, level with the second", two)
	}
	for n := 1; n <= 12; n++ {
		for _, p := range Layout(n) {
			if p.X < NodeRadius || p.X > CanvasWidth-NodeRadius || p.Y < 40+NodeRadius || p.Y > CanvasHeight-NodeRadius-40 {
				t.Errorf("Layout(%d): %v is off the canvas (or under the title or without room for its name)", n, p)
			}
		}
	}
}
