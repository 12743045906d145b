package gen_test

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/straitmesh/strait/internal/proxypush"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// TestBuildsCollector: strait_generator_builds_total reports what Builds
// counts, per type.
func TestBuildsCollector(t *testing.T) {
	g, _ := newGenerator(t, filepath.Join("testdata", scenarios[0].dir))
	reg := prometheus.NewRegistry()
	reg.MustRegister(g.Collector())
	if n, err := testutil.GatherAndCount(reg, "strait_generator_builds_total"); err != nil || n != 0 {
		t.Fatalf("before any build: %d series, %v", n, err)
	}
	proxy, err := proxypush.ParseNodeID(scenarios[0].proxies[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{xdsapi.ClusterType, xdsapi.ListenerType} {
		if _, err := g.Generate(proxy, typ, nil, &proxypush.PushRequest{Full: true}); err != nil {
			t.Fatal(err)
		}
	}
	want := g.Builds()["cluster"]
	if want == 0 {
		t.Fatal("no cluster built")
	}
	exp := "# HELP strait_generator_builds_total Resources the xDS generator built (cache misses), by type (cluster, eds, listener, route).\n" +
		"# TYPE strait_generator_builds_total counter\n"
	for _, typ := range []string{"cluster", "eds", "listener", "route"} {
		if n, ok := g.Builds()[typ]; ok {
			exp += "strait_generator_builds_total{type=\"" + typ + "\"} " + strconv.Itoa(n) + "\n"
		}
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(exp), "strait_generator_builds_total"); err != nil {
		t.Fatal(err)
	}
}
