package gen_test

import (
	"path/filepath"
	"slices"
	"testing"

	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"

	"github.com/straitmesh/strait/internal/proxypush"
	"github.com/straitmesh/strait/internal/xdsapi"
)

const (
	canaryProxy = "sidecar~10.96.0.10~canary.demo~demo.svc.cluster.local"
	plainProxy  = "sidecar~10.96.0.11~plain.demo~demo.svc.cluster.local"
	otherProxy  = "sidecar~10.96.0.12~other.other~other.svc.cluster.local"
)

// TestSourceMatches: sourceLabels and sourceNamespace are evaluated per
// proxy, match.port per listener port, and gateways for "mesh"; a rule
// whose matches all drop out leaves no route (it does not become a
// catch-all).
func TestSourceMatches(t *testing.T) {
	g := staticGenerator(t, filepath.Join("testdata", "match"))
	names := func(id, port string) []string {
		t.Helper()
		proxy, err := proxypush.ParseNodeID(id)
		if err != nil {
			t.Fatal(err)
		}
		res, err := g.Generate(proxy, xdsapi.RouteType, []string{port}, &proxypush.PushRequest{Full: true})
		if err != nil || len(res) != 1 {
			t.Fatalf("routes %s for %s: %d, %v", port, id, len(res), err)
		}
		rc := &route.RouteConfiguration{}
		if err := proto.Unmarshal(res[0].Resource.Value, rc); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range rc.VirtualHosts[0].Routes {
			out = append(out, r.Name)
		}
		return out
	}
	common := []string{"query.v2", "query.beta", "without", "presence", "pseudo"}
	for _, tc := range []struct {
		proxy, port string
		want        []string
	}{
		{canaryProxy, "80", append(slices.Clone(common), "source", "gateways", "rest")},
		{plainProxy, "80", append(slices.Clone(common), "gateways", "rest")},
		{otherProxy, "80", append(slices.Clone(common), "source", "source.from-other", "gateways", "rest")},
		{plainProxy, "8080", append(slices.Clone(common), "gateways", "port", "rest")},
	} {
		if got := names(tc.proxy, tc.port); !slices.Equal(got, tc.want) {
			t.Errorf("%s port %s: routes %q, want %q", tc.proxy, tc.port, got, tc.want)
		}
	}
	// The plain proxy asked again (and another canary-like proxy) reuse
	// what was built: one build per variant, not per proxy.
	before := g.Builds()["route"]
	names(plainProxy, "80")
	names(canaryProxy, "80")
	if after := g.Builds()["route"]; after != before {
		t.Errorf("route builds went from %d to %d for proxies already served", before, after)
	}
}
