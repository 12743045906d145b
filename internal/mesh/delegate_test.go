package mesh

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/straitmesh/strait/internal/config"
	"github.com/straitmesh/strait/internal/meshconfig"
	"github.com/straitmesh/strait/internal/model"
)

// vsConfig builds a VirtualService from protojson, bypassing the config
// validation (which, like Istio's without delegation, wants hosts).
func vsConfig(t *testing.T, ns, name, spec string) *config.Config {
	t.Helper()
	vs := &networking.VirtualService{}
	if err := protojson.Unmarshal([]byte(spec), vs); err != nil {
		t.Fatal(err)
	}
	return &config.Config{Meta: config.Meta{Kind: config.KindVirtualService, Name: name, Namespace: ns}, Spec: vs}
}

func storeOf(t *testing.T, cs ...*config.Config) *config.Store {
	t.Helper()
	st := config.NewStore()
	for _, c := range cs {
		if err := st.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

func routeSummary(r *networking.HTTPRoute) string {
	var b strings.Builder
	b.WriteString(r.GetName() + ":")
	for _, m := range r.GetMatch() {
		b.WriteString(" " + m.GetUri().GetPrefix() + m.GetUri().GetExact())
		for k, v := range m.GetHeaders() {
			b.WriteString(" " + k + "=" + v.GetExact())
		}
	}
	for _, d := range r.GetRoute() {
		b.WriteString(" -> " + d.GetDestination().GetHost())
	}
	return b.String()
}

// TestDelegateRoutesMergedUnderRoot: the root's delegating route is
// replaced by the delegate's routes, their matches narrowed by the root's
// (Istio's mergeHTTPRoute); a conflicting delegate route, a missing
// delegate and one not exported to the root's namespace drop their routes
// with a problem; delegates themselves serve no host.
func TestDelegateRoutesMergedUnderRoot(t *testing.T) {
	root := vsConfig(t, "front", "root", `{
	  "hosts": ["shop.example.com"],
	  "http": [
	    {"name": "api", "match": [{"uri": {"prefix": "/api"}, "headers": {"x-team": {"exact": "a"}}}], "timeout": "2s", "delegate": {"name": "api", "namespace": "team-a"}},
	    {"name": "missing", "delegate": {"name": "nope"}},
	    {"name": "hidden", "delegate": {"name": "hidden", "namespace": "team-a"}},
	    {"name": "rest", "route": [{"destination": {"host": "web"}}]}
	  ]}`)
	api := vsConfig(t, "team-a", "api", `{
	  "http": [
	    {"name": "v2", "match": [{"uri": {"prefix": "/api/v2"}}], "route": [{"destination": {"host": "api-v2"}}]},
	    {"name": "outside", "match": [{"uri": {"prefix": "/other"}}], "route": [{"destination": {"host": "api-v1"}}]},
	    {"route": [{"destination": {"host": "api-v1.team-a.svc.cluster.local"}}], "timeout": "5s"}
	  ]}`)
	hidden := vsConfig(t, "team-a", "hidden", `{"exportTo": ["."], "http": [{"route": [{"destination": {"host": "x"}}]}]}`)
	s, problems := Build(storeOf(t, root, api, hidden), BuildOptions{})

	vss := s.VirtualServices("shop.example.com")
	if len(vss) != 1 {
		t.Fatalf("VirtualServices(shop.example.com) = %d, want the merged root", len(vss))
	}
	var got []string
	for _, r := range vss[0].VirtualService().GetHttp() {
		got = append(got, routeSummary(r))
	}
	want := []string{
		"api-v2: /api/v2 x-team=a -> api-v2.team-a.svc.cluster.local",
		"api: /api x-team=a -> api-v1.team-a.svc.cluster.local",
		"rest: -> web",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("merged routes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	http := vssHTTP(vss[0])
	if http[0].GetTimeout().AsDuration() != 2*time.Second || http[1].GetTimeout().AsDuration() != 5*time.Second {
		t.Errorf("timeouts %v, %v: want the root's 2s where the delegate has none, else the delegate's 5s", http[0].GetTimeout(), http[1].GetTimeout())
	}
	if root.VirtualService().GetHttp()[0].GetDelegate() == nil || api.VirtualService().GetHttp()[0].GetRoute()[0].GetDestination().GetHost() != "api-v2" {
		t.Error("merging modified the configs of the store")
	}
	var msgs []string
	for _, p := range problems {
		msgs = append(msgs, p.Error())
	}
	all := strings.Join(msgs, "\n")
	for _, w := range []string{
		"spec.http[0].delegate: route 1 of VirtualService team-a/api matches outside",
		"spec.http[1].delegate: VirtualService front/nope not found",
		"spec.http[2].delegate: VirtualService team-a/hidden is not exported to namespace front",
	} {
		if !strings.Contains(all, w) {
			t.Errorf("problems lack %q:\n%s", w, all)
		}
	}
	// With delegates exported nowhere by default, the api delegate is
	// hidden too.
	m := meshconfig.Default()
	m.DefaultVirtualServiceExportTo = []string{"."}
	s, _ = Build(storeOf(t, root, api, hidden), BuildOptions{Mesh: m})
	if n := len(vssHTTP(s.VirtualServices("shop.example.com")[0])); n != 1 {
		t.Errorf("with defaultVirtualServiceExportTo [.], the root keeps %d routes, want only its own", n)
	}
}

func vssHTTP(c *config.Config) []*networking.HTTPRoute { return c.VirtualService().GetHttp() }

func TestMatchConflicts(t *testing.T) {
	sm := func(kind, v string) *networking.StringMatch {
		switch kind {
		case "exact":
			return &networking.StringMatch{MatchType: &networking.StringMatch_Exact{Exact: v}}
		case "prefix":
			return &networking.StringMatch{MatchType: &networking.StringMatch_Prefix{Prefix: v}}
		}
		return &networking.StringMatch{MatchType: &networking.StringMatch_Regex{Regex: v}}
	}
	for _, tc := range []struct {
		root, leaf *networking.StringMatch
		conflict   bool
	}{
		{nil, sm("exact", "/a"), false},
		{sm("prefix", "/a"), nil, false},
		{sm("prefix", "/a"), sm("prefix", "/a/b"), false},
		{sm("prefix", "/a/b"), sm("prefix", "/a"), true},
		{sm("prefix", "/a"), sm("exact", "/a/x"), false},
		{sm("prefix", "/a"), sm("exact", "/b"), true},
		{sm("exact", "/a"), sm("exact", "/a"), false},
		{sm("exact", "/a"), sm("exact", "/b"), true},
		{sm("exact", "/a"), sm("prefix", "/a"), true},
		{sm("regex", "/a.*"), sm("prefix", "/a"), true},
		{sm("prefix", "/a"), sm("regex", "/a.*"), true},
	} {
		if got := stringMatchConflict(tc.root, tc.leaf); got != tc.conflict {
			t.Errorf("conflict(%v, %v) = %v, want %v", tc.root, tc.leaf, got, tc.conflict)
		}
	}
	port := func(p uint32) *networking.HTTPMatchRequest { return &networking.HTTPMatchRequest{Port: p} }
	if !matchConflict(port(80), port(81)) || matchConflict(port(80), port(0)) || matchConflict(port(0), port(81)) {
		t.Error("port conflicts wrong")
	}
	ns := func(n string) *networking.HTTPMatchRequest { return &networking.HTTPMatchRequest{SourceNamespace: n} }
	if !matchConflict(ns("a"), ns("b")) || !matchConflict(ns("a"), ns("")) || matchConflict(ns(""), ns("b")) {
		t.Error("sourceNamespace conflicts wrong")
	}
	if !matchConflict(&networking.HTTPMatchRequest{IgnoreUriCase: true}, &networking.HTTPMatchRequest{}) {
		t.Error("ignoreUriCase difference must conflict")
	}
	gw := func(g ...string) *networking.HTTPMatchRequest { return &networking.HTTPMatchRequest{Gateways: g} }
	if !matchConflict(gw("mesh"), gw("gw")) || matchConflict(gw("mesh", "gw"), gw("gw")) {
		t.Error("gateway conflicts wrong")
	}
}

// TestDelegateChangePushesRootHosts: a change of a delegate concerns the
// hosts of the VirtualServices that delegate to it.
func TestDelegateChangePushesRootHosts(t *testing.T) {
	root := vsConfig(t, "front", "root", `{"hosts": ["shop.example.com"], "http": [{"delegate": {"name": "api", "namespace": "team-a"}}]}`)
	api := vsConfig(t, "team-a", "api", `{"http": [{"route": [{"destination": {"host": "api"}}]}]}`)
	s, _ := Build(storeOf(t, root, api), BuildOptions{})
	req := PushRequestFor(s, s, map[model.ConfigKey]struct{}{api.Key(): {}}, time.Now())
	if _, ok := req.ServicesUpdated["shop.example.com"]; !ok {
		t.Errorf("ServicesUpdated = %v, want the root's host", req.ServicesUpdated)
	}
}
