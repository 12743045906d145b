package route

import (
	"encoding/json"
	"os"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/straitmesh/strait/internal/proxy/filters/http/cors"
	"github.com/straitmesh/strait/internal/proxy/filters/http/fault"
	"github.com/straitmesh/strait/internal/proxy/httpfilter"
)

// TestCompileGeneratedFilters compiles the route configuration straitd
// generates for fault injection, CORS and mirroring (its golden file) and
// checks what each route asks of the filters.
func TestCompileGeneratedFilters(t *testing.T) {
	raw, err := os.ReadFile("../../xds/gen/testdata/filters/golden/client.routes.json")
	if err != nil {
		t.Fatal(err)
	}
	var docs []json.RawMessage
	if err := json.Unmarshal(raw, &docs); err != nil {
		t.Fatal(err)
	}
	routes := map[string]*Route{}
	for _, d := range docs {
		var rc routev3.RouteConfiguration
		if err := protojson.Unmarshal(d, &rc); err != nil {
			t.Fatal(err)
		}
		tab, err := CompileWith(&rc, testParsers{})
		if err != nil {
			t.Fatalf("strait-proxy refuses what straitd generates: %v", err)
		}
		for _, r := range tab.VirtualHostFor("web.app.svc.cluster.local").Routes {
			routes[r.Name] = r
		}
	}
	type want struct {
		fault, cors bool
		mirrors     []Mirror
	}
	for name, w := range map[string]want{
		"abort":       {fault: true},
		"grpc-abort":  {fault: true},
		"delay":       {fault: true},
		"delay-abort": {fault: true},
		"cors":        {cors: true},
		"mirror":      {mirrors: []Mirror{{Cluster: "outbound|80||web-shadow.app.svc.cluster.local", Fraction: httpfilter.Fraction{Num: 255000, Den: 1000000}}}},
		"mirrors": {mirrors: []Mirror{{Cluster: "outbound|80||web-shadow.app.svc.cluster.local", Fraction: httpfilter.Fraction{Num: 100, Den: 100}},
			{Cluster: "outbound|80|v2|web.app.svc.cluster.local", Fraction: httpfilter.Fraction{Num: 100000, Den: 1000000}}}},
		"app.web.7": {},
	} {
		r := routes[name]
		if r == nil {
			t.Errorf("no route %q", name)
			continue
		}
		f := r.Filters
		if w.fault == false && w.cors == false && w.mirrors == nil {
			if f != nil {
				t.Errorf("route %q: Filters %+v, want nil", name, f)
			}
			continue
		}
		if f == nil {
			t.Errorf("route %q: no Filters", name)
			continue
		}
		fp, _ := f.PerFilterConfig(fault.Name).(*fault.Policy)
		cp, _ := f.PerFilterConfig(cors.Name).(*cors.Policy)
		if (fp != nil) != w.fault || (cp != nil) != w.cors || len(f.Mirrors) != len(w.mirrors) {
			t.Errorf("route %q: fault %v cors %v mirrors %v, want %+v", name, fp != nil, cp != nil, f.Mirrors, w)
			continue
		}
		for i := range w.mirrors {
			if f.Mirrors[i] != w.mirrors[i] {
				t.Errorf("route %q mirror %d: %+v, want %+v", name, i, f.Mirrors[i], w.mirrors[i])
			}
		}
	}
}
