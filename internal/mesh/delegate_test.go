package mesh

import (
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/straitmesh/strait/internal/istioconfig"
	"github.com/straitmesh/strait/internal/meshconfig"
	"github.com/straitmesh/strait/internal/proxypush"
)

// vsConfig builds a VirtualService from protojson, bypassing the config
// validation (which, like Istio's without delegation, wants hosts).
func vsConfig(t *testing.T, ns, name, spec string) *istioconfig.Config {
	t.Helper()
	vs := &networking.VirtualService{}
	if err := protojson.Unmarshal([]byte(spec), vs); err != nil {
		t.Fatal(err)
	}
	return &istioconfig.Config{Meta: istioconfig.Meta{Kind: istioconfig.KindVirtualService, Name: name, Namespace: ns}, Spec: vs}
}

func storeOf(t *testing.T, cs ...*istioconfig.Config) *istioconfig.Store {
	t.Helper()
	st := istioconfig.NewStore()
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
	    {"name": "first", "match": [{"uri": {"prefix": "/first"}}], "route": [{"destination": {"host": "first"}}]},
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
	later := vsConfig(t, "zzz", "later", `{"hosts": ["later.example.com"], "http": [{"route": [{"destination": {"host": "x"}}]}]}`)
	s, problems := Build(storeOf(t, root, api, hidden, later), BuildOptions{})
	if len(s.VirtualServices("later.example.com")) != 1 {
		t.Error("a VirtualService listed after the delegates is missing")
	}

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
		"first: /first -> first",
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
		"spec.http[2].delegate: VirtualService front/nope not found",
		"spec.http[3].delegate: VirtualService team-a/hidden is not exported to namespace front",
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
	if n := len(vssHTTP(s.VirtualServices("shop.example.com")[0])); n != 2 {
		t.Errorf("with defaultVirtualServiceExportTo [.], the root keeps %d routes, want only its own", n)
	}
}

func vssHTTP(c *istioconfig.Config) []*networking.HTTPRoute { return c.VirtualService().GetHttp() }

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
	if !matchConflict(gw("mesh"), gw("gw")) || matchConflict(gw("mesh", "gw"), gw("gw")) || matchConflict(gw(), gw("gw")) || matchConflict(gw("gw"), gw()) {
		t.Error("gateway conflicts wrong")
	}
}

// TestDelegateChangePushesRootHosts: a change of a delegate concerns the
// hosts of the VirtualServices that delegate to it.
func TestDelegateChangePushesRootHosts(t *testing.T) {
	root := vsConfig(t, "front", "root", `{"hosts": ["shop.example.com"], "http": [{"delegate": {"name": "api", "namespace": "team-a"}}]}`)
	api := vsConfig(t, "team-a", "api", `{"http": [{"route": [{"destination": {"host": "api"}}]}]}`)
	s, _ := Build(storeOf(t, root, api), BuildOptions{})
	req := PushRequestFor(s, s, map[proxypush.ConfigKey]struct{}{api.Key(): {}}, time.Now())
	if _, ok := req.ServicesUpdated["shop.example.com"]; !ok {
		t.Errorf("ServicesUpdated = %v, want the root's host", req.ServicesUpdated)
	}
}

// TestMergeHTTPRouteInheritsRootSettings: each setting the delegate route
// leaves unset comes from the root route; a set one stays the delegate's.
func TestMergeHTTPRouteInheritsRootSettings(t *testing.T) {
	s, _ := Build(nil, BuildOptions{})
	root := &networking.HTTPRoute{}
	if err := protojson.Unmarshal([]byte(`{
	  "name": "root",
	  "rewrite": {"uri": "/r"}, "directResponse": {"status": 200}, "timeout": "1s",
	  "retries": {"attempts": 3}, "fault": {"abort": {"httpStatus": 500}},
	  "mirror": {"host": "m.root.svc.cluster.local"}, "mirrorPercentage": {"value": 5},
	  "corsPolicy": {"allowMethods": ["GET"]},
	  "mirrors": [{"destination": {"host": "ms.root.svc.cluster.local"}}],
	  "headers": {"request": {"set": {"x-root": "1"}}}
	}`), root); err != nil {
		t.Fatal(err)
	}
	got := s.mergeHTTPRoute(root, &networking.HTTPRoute{}, "team")
	if got.Name != "root" || got.Rewrite.GetUri() != "/r" || got.DirectResponse.GetStatus() != 200 ||
		got.Timeout.AsDuration() != time.Second || got.Retries.GetAttempts() != 3 || got.Fault.GetAbort().GetHttpStatus() != 500 ||
		got.Mirror.GetHost() != "m.root.svc.cluster.local" || got.MirrorPercentage.GetValue() != 5 ||
		len(got.CorsPolicy.GetAllowMethods()) != 1 || len(got.Mirrors) != 1 || got.Headers.GetRequest().GetSet()["x-root"] != "1" {
		t.Errorf("delegate without settings: %v", got)
	}
	own := &networking.HTTPRoute{}
	if err := protojson.Unmarshal([]byte(`{
	  "name": "own",
	  "rewrite": {"uri": "/d"}, "directResponse": {"status": 201}, "timeout": "2s",
	  "retries": {"attempts": 1}, "fault": {"abort": {"httpStatus": 503}},
	  "mirror": {"host": "dm"}, "mirrorPercentage": {"value": 50},
	  "corsPolicy": {"allowMethods": ["GET", "PUT"]},
	  "mirrors": [{"destination": {"host": "dms"}}, {"destination": {"host": "dms2"}}],
	  "headers": {"request": {"set": {"x-own": "1"}}},
	  "route": [{"destination": {"host": "d"}}]
	}`), own); err != nil {
		t.Fatal(err)
	}
	got = s.mergeHTTPRoute(root, own, "team")
	if got.Name != "root-own" || got.Rewrite.GetUri() != "/d" || got.DirectResponse.GetStatus() != 201 ||
		got.Timeout.AsDuration() != 2*time.Second || got.Retries.GetAttempts() != 1 || got.Fault.GetAbort().GetHttpStatus() != 503 ||
		got.Mirror.GetHost() != "dm.team.svc.cluster.local" || got.MirrorPercentage.GetValue() != 50 ||
		len(got.CorsPolicy.GetAllowMethods()) != 2 || len(got.Mirrors) != 2 || got.Mirrors[1].GetDestination().GetHost() != "dms2.team.svc.cluster.local" ||
		got.Headers.GetRequest().GetSet()["x-own"] != "1" || got.Route[0].GetDestination().GetHost() != "d.team.svc.cluster.local" {
		t.Errorf("delegate with its own settings: %v", got)
	}
	if own.Mirror.GetHost() != "dm" {
		t.Error("the delegate's config was modified")
	}
	root.Name = ""
	if got := s.mergeHTTPRoute(root, own, "team"); got.Name != "own" {
		t.Errorf("unnamed root: name %q, want the delegate's", got.Name)
	}
}

// TestMergeHTTPMatchFields: a delegate match keeps what it sets and takes
// the root's other conditions; maps are merged, the delegate's entries
// winning.
func TestMergeHTTPMatchFields(t *testing.T) {
	root := &networking.HTTPMatchRequest{}
	if err := protojson.Unmarshal([]byte(`{
	  "name": "r", "uri": {"prefix": "/a"}, "scheme": {"exact": "http"}, "method": {"exact": "GET"}, "authority": {"exact": "h"},
	  "headers": {"x": {"exact": "1"}, "y": {"exact": "root"}}, "withoutHeaders": {"w": {"exact": "1"}},
	  "queryParams": {"q": {"exact": "1"}}, "sourceLabels": {"app": "a"}, "port": 80, "sourceNamespace": "ns",
	  "gateways": ["mesh"], "statPrefix": "sp"
	}`), root); err != nil {
		t.Fatal(err)
	}
	got := mergeHTTPMatch(root, &networking.HTTPMatchRequest{})
	if got.Name != "r" || got.Uri.GetPrefix() != "/a" || got.Scheme.GetExact() != "http" || got.Method.GetExact() != "GET" ||
		got.Authority.GetExact() != "h" || len(got.Headers) != 2 || len(got.WithoutHeaders) != 1 || len(got.QueryParams) != 1 ||
		got.SourceLabels["app"] != "a" || got.Port != 80 || got.SourceNamespace != "ns" || len(got.Gateways) != 1 || got.StatPrefix != "sp" {
		t.Errorf("empty delegate match: %v", got)
	}
	leaf := &networking.HTTPMatchRequest{}
	if err := protojson.Unmarshal([]byte(`{
	  "name": "l", "uri": {"prefix": "/a/b"}, "scheme": {"exact": "https"}, "method": {"exact": "PUT"}, "authority": {"exact": "h2"},
	  "headers": {"y": {"exact": "leaf"}, "z": {"exact": "1"}}, "port": 81, "sourceNamespace": "ns2", "gateways": ["gw"], "statPrefix": "lp"
	}`), leaf); err != nil {
		t.Fatal(err)
	}
	got = mergeHTTPMatch(root, leaf)
	if got.Name != "r-l" || got.Uri.GetPrefix() != "/a/b" || got.Scheme.GetExact() != "https" || got.Method.GetExact() != "PUT" ||
		got.Authority.GetExact() != "h2" || got.Headers["y"].GetExact() != "leaf" || got.Headers["x"].GetExact() != "1" || len(got.Headers) != 3 ||
		got.Port != 81 || got.SourceNamespace != "ns2" || got.Gateways[0] != "gw" || got.StatPrefix != "lp" {
		t.Errorf("delegate match with its own conditions: %v", got)
	}
	if got := mergeHTTPMatch(&networking.HTTPMatchRequest{}, &networking.HTTPMatchRequest{Name: "l"}); got.Name != "l" || got.Headers != nil {
		t.Errorf("unnamed root: %v", got)
	}
	// Several root matches: a delegate match narrower than two of them
	// gives two merged matches; one that fits none conflicts.
	prefix := func(p string) *networking.HTTPMatchRequest {
		return &networking.HTTPMatchRequest{Uri: &networking.StringMatch{MatchType: &networking.StringMatch_Prefix{Prefix: p}}}
	}
	out, conflict := mergeHTTPMatches([]*networking.HTTPMatchRequest{prefix("/c"), prefix("/a"), prefix("/a/b")}, []*networking.HTTPMatchRequest{prefix("/a/b/c")})
	if conflict || len(out) != 2 {
		t.Errorf("merged %v (conflict %v), want two matches", out, conflict)
	}
	if _, conflict := mergeHTTPMatches([]*networking.HTTPMatchRequest{prefix("/a")}, []*networking.HTTPMatchRequest{prefix("/a/x"), prefix("/z")}); !conflict {
		t.Error("a delegate match outside every root match must conflict")
	}
	if out, conflict := mergeHTTPMatches(nil, []*networking.HTTPMatchRequest{prefix("/z")}); conflict || out[0].Uri.GetPrefix() != "/z" {
		t.Error("without root matches the delegate's stand")
	}
	if out, conflict := mergeHTTPMatches([]*networking.HTTPMatchRequest{prefix("/a")}, nil); conflict || out[0].Uri.GetPrefix() != "/a" {
		t.Error("without delegate matches the root's stand")
	}
}

func TestMatchConflictMaps(t *testing.T) {
	exact := func(v string) *networking.StringMatch {
		return &networking.StringMatch{MatchType: &networking.StringMatch_Exact{Exact: v}}
	}
	for _, tc := range []struct {
		name       string
		root, leaf *networking.HTTPMatchRequest
		conflict   bool
	}{
		{"same header", &networking.HTTPMatchRequest{Headers: map[string]*networking.StringMatch{"x": exact("1")}}, &networking.HTTPMatchRequest{Headers: map[string]*networking.StringMatch{"x": exact("1")}}, false},
		{"other header value", &networking.HTTPMatchRequest{Headers: map[string]*networking.StringMatch{"x": exact("1")}}, &networking.HTTPMatchRequest{Headers: map[string]*networking.StringMatch{"x": exact("2")}}, true},
		{"new header", &networking.HTTPMatchRequest{}, &networking.HTTPMatchRequest{Headers: map[string]*networking.StringMatch{"x": exact("2")}}, false},
		{"withoutHeaders", &networking.HTTPMatchRequest{WithoutHeaders: map[string]*networking.StringMatch{"x": exact("1")}}, &networking.HTTPMatchRequest{WithoutHeaders: map[string]*networking.StringMatch{"x": exact("2")}}, true},
		{"queryParams", &networking.HTTPMatchRequest{QueryParams: map[string]*networking.StringMatch{"q": exact("1")}}, &networking.HTTPMatchRequest{QueryParams: map[string]*networking.StringMatch{"q": exact("2")}}, true},
		{"sourceLabels differ", &networking.HTTPMatchRequest{SourceLabels: map[string]string{"a": "1"}}, &networking.HTTPMatchRequest{SourceLabels: map[string]string{"a": "2"}}, true},
		{"sourceLabels narrower", &networking.HTTPMatchRequest{SourceLabels: map[string]string{"a": "1"}}, &networking.HTTPMatchRequest{SourceLabels: map[string]string{"a": "1", "b": "2"}}, false},
		{"method", &networking.HTTPMatchRequest{Method: exact("GET")}, &networking.HTTPMatchRequest{Method: exact("PUT")}, true},
		{"scheme", &networking.HTTPMatchRequest{Scheme: exact("http")}, &networking.HTTPMatchRequest{Scheme: exact("https")}, true},
		{"authority", &networking.HTTPMatchRequest{Authority: exact("a")}, &networking.HTTPMatchRequest{Authority: exact("b")}, true},
		{"same sourceNamespace", &networking.HTTPMatchRequest{SourceNamespace: "a"}, &networking.HTTPMatchRequest{SourceNamespace: "a"}, false},
	} {
		if got := matchConflict(tc.root, tc.leaf); got != tc.conflict {
			t.Errorf("%s: conflict %v, want %v", tc.name, got, tc.conflict)
		}
	}
}

// TestDelegatingHosts: only roots that name the delegate (by name and
// namespace, the root's own when unset) are found.
func TestDelegatingHosts(t *testing.T) {
	same := vsConfig(t, "team", "same-ns", `{"hosts": ["a.example.com"], "http": [{"delegate": {"name": "d"}}]}`)
	explicit := vsConfig(t, "front", "explicit", `{"hosts": ["b.example.com", "c"], "http": [{"route": [{"destination": {"host": "x"}}]}, {"delegate": {"name": "d", "namespace": "team"}}, {"delegate": {"name": "d", "namespace": "team"}}]}`)
	otherNS := vsConfig(t, "front", "other-ns", `{"hosts": ["e.example.com"], "http": [{"delegate": {"name": "d"}}]}`)
	otherName := vsConfig(t, "team", "other-name", `{"hosts": ["f.example.com"], "http": [{"delegate": {"name": "x"}}]}`)
	d := vsConfig(t, "team", "d", `{"http": [{"route": [{"destination": {"host": "api"}}]}]}`)
	s, _ := Build(storeOf(t, same, explicit, otherNS, otherName, d), BuildOptions{})
	got := s.delegatingHosts(d)
	slices.Sort(got)
	want := []string{"a.example.com", "b.example.com", "c.front.svc.cluster.local"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("delegatingHosts = %v, want %v", got, want)
	}
}
