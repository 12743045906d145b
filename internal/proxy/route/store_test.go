package route

import (
	"strings"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
)

func storeConfig(name, cluster string) *routev3.RouteConfiguration {
	return &routev3.RouteConfiguration{Name: name, VirtualHosts: []*routev3.VirtualHost{
		{Name: "vh", Domains: []string{"*"}, Routes: []*routev3.Route{to(cluster, prefix("/"))}},
	}}
}

func clusterOf(t *testing.T, s *Store, name string) string {
	t.Helper()
	tb := s.Get(name)
	if tb == nil {
		return ""
	}
	r := tb.Match("any", "/", nil)
	if r == nil {
		t.Fatalf("table %s: no route for /", name)
	}
	return r.Cluster
}

// Apply merges: named configurations are replaced, the others kept; a
// configuration that does not compile leaves the store as it was.
func TestStoreApply(t *testing.T) {
	s := NewStore()
	if s.Get("a") != nil || !s.Has(nil) || s.Has([]string{"a"}) {
		t.Fatal("empty store: want no tables")
	}
	if err := s.Apply("1", []*routev3.RouteConfiguration{storeConfig("b", "cb"), storeConfig("a", "ca")}); err != nil {
		t.Fatal(err)
	}
	if got := clusterOf(t, s, "a") + "," + clusterOf(t, s, "b"); got != "ca,cb" {
		t.Errorf("after version 1: clusters %s, want ca,cb", got)
	}
	if !s.Has([]string{"a", "b"}) || s.Has([]string{"a", "c"}) {
		t.Error("Has: want a and b, not c")
	}
	ta := s.Get("a")

	// Version 2 names only b (changed) and a, unchanged: a keeps its table.
	if err := s.Apply("2", []*routev3.RouteConfiguration{storeConfig("a", "ca"), storeConfig("b", "cb2")}); err != nil {
		t.Fatal(err)
	}
	if s.Get("a") != ta {
		t.Error("an unchanged configuration was compiled again")
	}
	if got := clusterOf(t, s, "b"); got != "cb2" {
		t.Errorf("b after version 2: cluster %s, want cb2", got)
	}

	bad := storeConfig("c", "cc")
	bad.VirtualHosts = append(bad.VirtualHosts, bad.VirtualHosts[0]) // "*" twice
	err := s.Apply("3", []*routev3.RouteConfiguration{storeConfig("a", "ca3"), bad})
	if err == nil || !strings.Contains(err.Error(), `"c"`) {
		t.Fatalf("Apply of a bad configuration: error %v, want one naming c", err)
	}
	v, cfgs := s.Snapshot()
	if v != "2" || len(cfgs) != 2 || cfgs[0].GetName() != "a" || cfgs[1].GetName() != "b" || clusterOf(t, s, "a") != "ca" || s.Get("c") != nil {
		t.Errorf("after a refused update: version %q, %d configurations, a's cluster %s; want version 2, a and b as they were", v, len(cfgs), clusterOf(t, s, "a"))
	}
}

// Snapshot lists the configurations sorted by name, whatever the order of
// the updates.
func TestStoreSnapshotSorted(t *testing.T) {
	s := NewStore()
	for i, n := range []string{"m", "c", "x", "a", "q"} {
		if err := s.Apply(string(rune('1'+i)), []*routev3.RouteConfiguration{storeConfig(n, "c")}); err != nil {
			t.Fatal(err)
		}
	}
	v, cfgs := s.Snapshot()
	var names []string
	for _, c := range cfgs {
		names = append(names, c.GetName())
	}
	if v != "5" || strings.Join(names, ",") != "a,c,m,q,x" {
		t.Errorf("Snapshot: version %q, names %v; want 5 and a,c,m,q,x", v, names)
	}
}

func TestValidate(t *testing.T) {
	if err := NewStore().Validate(storeConfig("ok", "c")); err != nil {
		t.Errorf("valid configuration: %v", err)
	}
	bad := storeConfig("bad", "c")
	bad.VirtualHosts[0].Routes[0].Match = &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{}}
	if err := NewStore().Validate(bad); err == nil || !strings.Contains(err.Error(), `route_config "bad"`) {
		t.Errorf("invalid configuration: error %v, want one naming route_config \"bad\"", err)
	}
}
