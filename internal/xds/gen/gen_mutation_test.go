package gen_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/straitmesh/strait/internal/istioconfig"
	"github.com/straitmesh/strait/internal/mesh"
	"github.com/straitmesh/strait/internal/proxypush"
	"github.com/straitmesh/strait/internal/xds/gen"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// The tests in this file pin down generator behaviour that mutation
// testing (make mutate PKG=./internal/xds/gen) found untested: each case
// fails when the code it names is removed or inverted.

const (
	mutationDir = "testdata/mutation"
	// Nodes of the mutation scenario.
	appClient  = "sidecar~10.97.0.30~client.app~app.svc.cluster.local"
	dataClient = "sidecar~10.97.0.40~other.data~data.svc.cluster.local"
	greeterPod = "sidecar~10.97.0.20~greeter-1.app~app.svc.cluster.local"
)

// proxylessWatch is what a proxyless gRPC client in namespace app asks
// for: targets by short name and FQDN, and names that must be left out
// (unknown service, port the service lacks, no port, a port that is not a
// number, a service not visible to it).
var proxylessWatch = []string{
	"nope:80",
	"greeter:7070",
	"web.app.svc.cluster.local:80",
	"db.data.svc.cluster.local:5432",
	"greeter:9999",
	"greeter",
	"greeter:x",
	"greeter:70700",
	"private.data.svc.cluster.local:80",
}

type goldenCase struct {
	name     string // file name under golden/, without .json
	node     string
	metadata map[string]string
	typeURL  string
	watched  []string
}

var grpcMeta = map[string]string{gen.ProxylessGeneratorMetadata: gen.ProxylessGeneratorGRPC}

var mutationGoldens = []goldenCase{
	{name: "client.clusters", node: appClient, typeURL: xdsapi.ClusterType},
	{name: "client.endpoints", node: appClient, typeURL: xdsapi.EndpointType},
	{name: "client.listeners", node: appClient, typeURL: xdsapi.ListenerType},
	{name: "client.routes", node: appClient, typeURL: xdsapi.RouteType},
	{name: "client.routes-8080", node: appClient, typeURL: xdsapi.RouteType, watched: []string{"8080", "9999"}},
	{name: "client.endpoints-named", node: appClient, typeURL: xdsapi.EndpointType, watched: []string{
		"outbound|80|v1|web.app.svc.cluster.local", "outbound|80|v1|web.app.svc.cluster.local", "outbound|80||private.data.svc.cluster.local",
		"outbound|80|v3|web.app.svc.cluster.local", "outbound|81||web.app.svc.cluster.local", "inbound|80||", "outbound|80||nope.app.svc.cluster.local"}},
	{name: "other.routes", node: dataClient, typeURL: xdsapi.RouteType},
	{name: "other.endpoints", node: dataClient, typeURL: xdsapi.EndpointType},
	{name: "other.listeners", node: dataClient, typeURL: xdsapi.ListenerType},
	{name: "greeter-1.listeners", node: greeterPod, typeURL: xdsapi.ListenerType},
	{name: "greeter-1.clusters", node: greeterPod, typeURL: xdsapi.ClusterType},
	{name: "proxyless.listeners", node: appClient, metadata: grpcMeta, typeURL: xdsapi.ListenerType, watched: proxylessWatch},
	{name: "proxyless.routes", node: appClient, metadata: grpcMeta, typeURL: xdsapi.RouteType, watched: proxylessWatch},
	{name: "proxyless.clusters", node: appClient, metadata: grpcMeta, typeURL: xdsapi.ClusterType},
	{name: "proxyless.clusters-named", node: appClient, metadata: grpcMeta, typeURL: xdsapi.ClusterType, watched: []string{
		"outbound|7070||greeter.app.svc.cluster.local", "outbound|80|v1|web.app.svc.cluster.local", "outbound|80|v9|web.app.svc.cluster.local",
		"outbound|7070||greeter.app.svc.cluster.local", "outbound|81||web.app.svc.cluster.local", "bogus"}},
	{name: "proxyless.endpoints", node: appClient, metadata: grpcMeta, typeURL: xdsapi.EndpointType, watched: []string{
		"outbound|7070||greeter.app.svc.cluster.local", "outbound|80|v1|web.app.svc.cluster.local", "outbound|80||api.example.com",
		"outbound|80||private.data.svc.cluster.local"}},
}

// TestGoldenMutation compares the resources of the mutation scenario
// (testdata/mutation: pseudo-header matches, gateway- and port-bound
// rules, a proxyless gRPC client, ...) with testdata/mutation/golden.
// Run with -update to rewrite them, and review the diff.
func TestGoldenMutation(t *testing.T) {
	g := staticGenerator(t, mutationDir)
	for _, gc := range mutationGoldens {
		t.Run(gc.name, func(t *testing.T) {
			proxy, err := proxypush.ParseNodeID(gc.node)
			if err != nil {
				t.Fatal(err)
			}
			proxy.Metadata = gc.metadata
			res, err := g.Generate(proxy, gc.typeURL, gc.watched, &proxypush.PushRequest{Full: true})
			if err != nil {
				t.Fatal(err)
			}
			checkValid(t, res)
			got := render(t, res)
			name := filepath.Join(mutationDir, "golden", gc.name+".json")
			if *update {
				if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(name, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(name)
			if err != nil {
				t.Fatalf("%v (run go test -update)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from the generated resources (run go test -update and review the diff):\n%s", name, got)
			}
		})
	}
}

// checkValid runs the protos' validation over every resource, and that of
// the messages in their Any fields, and checks names and versions.
func checkValid(t *testing.T, res []*discovery.Resource) {
	t.Helper()
	for _, r := range res {
		m, err := r.Resource.UnmarshalNew()
		if err != nil {
			t.Fatal(err)
		}
		if err := m.(validator).ValidateAll(); err != nil {
			t.Errorf("%s: %v", r.Name, err)
		}
		for _, err := range validateNested(m) {
			t.Errorf("%s: %v", r.Name, err)
		}
		if r.Name == "" || len(r.Version) != 24 {
			t.Errorf("resource %q has version %q", r.Name, r.Version)
		}
	}
}

// TestPseudoHeaderMatches checks, without golden files, that method,
// authority and scheme matches become :method, :authority and :scheme
// header matchers (Envoy's names for them), after the lower-cased header
// matches in name order.
func TestPseudoHeaderMatches(t *testing.T) {
	g := staticGenerator(t, mutationDir)
	proxy, _ := proxypush.ParseNodeID(appClient)
	var rt *route.Route
	for _, rc := range g.BuildRoutes(proxy, []string{"80"}) {
		for _, vh := range rc.VirtualHosts {
			for _, r := range vh.Routes {
				if r.Name == "pseudo-headers" {
					rt = r
				}
			}
		}
	}
	if rt == nil {
		t.Fatal("no route pseudo-headers on port 80")
	}
	var got []string
	for _, h := range rt.Match.Headers {
		sm := h.GetStringMatch()
		got = append(got, fmt.Sprintf("%s=%s%s%s", h.Name, sm.GetExact(), sm.GetPrefix(), sm.GetSafeRegex().GetRegex()))
	}
	// Istio's order: header matches by name, then :method, :authority
	// and :scheme (route.TranslateRouteMatch).
	want := []string{"x-beta=1", "x-user=^a.*", ":method=POST", ":authority=admin.", ":scheme=https"}
	if !slices.Equal(got, want) {
		t.Errorf("header matchers %q, want %q", got, want)
	}
	if rt.Match.GetSafeRegex().GetRegex() != "/api/v[0-9]+" || rt.Match.CaseSensitive == nil || rt.Match.CaseSensitive.Value {
		t.Errorf("path match %v", rt.Match)
	}
}

// TestProxylessOnlyByMetadata checks that only GENERATOR=grpc selects the
// proxyless shapes: a sidecar with other metadata, or none, gets capture
// listeners, and a nil proxy is a sidecar too.
func TestProxylessOnlyByMetadata(t *testing.T) {
	g := staticGenerator(t, mutationDir)
	for _, tc := range []struct {
		meta      map[string]string
		proxyless bool
	}{
		{nil, false},
		{map[string]string{gen.ProxylessGeneratorMetadata: "GRPC"}, false},
		{map[string]string{gen.ProxylessGeneratorMetadata: "envoy"}, false},
		{map[string]string{"OTHER": gen.ProxylessGeneratorGRPC}, false},
		{grpcMeta, true},
	} {
		proxy, _ := proxypush.ParseNodeID(appClient)
		proxy.Metadata = tc.meta
		res, err := g.Generate(proxy, xdsapi.ListenerType, []string{"greeter:7070"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, r := range res {
			names = append(names, r.Name)
		}
		hasCapture := slices.Contains(names, gen.VirtualOutboundListener)
		if hasCapture == tc.proxyless || slices.Equal(names, []string{"greeter:7070"}) != tc.proxyless {
			t.Errorf("metadata %v: listeners %q, proxyless %v", tc.meta, names, tc.proxyless)
		}
	}
	res, err := g.Generate(nil, xdsapi.ListenerType, nil, nil)
	if err != nil || len(res) == 0 {
		t.Fatalf("nil proxy: %d listeners, %v", len(res), err)
	}
	proxy, _ := proxypush.ParseNodeID(appClient)
	proxy.Metadata = grpcMeta
	if _, err := g.Generate(proxy, "type.googleapis.com/bogus", nil, nil); err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Fatalf("proxyless, unknown type: %v", err)
	}
}

// staticGenerator serves the YAML of a scenario directory. The golden
// scenarios set fields that are still refused at load (endpoint weights,
// DNS resolution), to cover what the generator emits for them, so they are
// loaded with KeepRefused rather than through the file registry.
func staticGenerator(t *testing.T, dir string) *gen.Generator {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no YAML in %s: %v", dir, err)
	}
	var docs []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(b))
	}
	snap := build(t, storeOf(t, docs...), mesh.BuildOptions{})
	return gen.NewWithOptions(gen.SourceFunc(func() *mesh.Snapshot { return snap }), gen.Options{KeySets: testKeySets{}})
}

// storeOf parses YAML documents into a store (fields Strait still refuses
// included).
func storeOf(t *testing.T, docs ...string) *istioconfig.Store {
	t.Helper()
	store := istioconfig.NewStore()
	for i, d := range docs {
		res := istioconfig.ParseFileWith(fmt.Sprintf("doc%d.yaml", i), []byte(d), istioconfig.ParseOptions{KeepRefused: true})
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		for _, c := range res.Configs {
			if err := store.Add(c); err != nil {
				t.Fatal(err)
			}
		}
	}
	return store
}

func build(t *testing.T, store *istioconfig.Store, opts mesh.BuildOptions) *mesh.Snapshot {
	t.Helper()
	snap, errs := mesh.Build(store, opts)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return snap
}

func readTestdata(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(mutationDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// dataSidecar limits the data namespace's proxies to the db service.
const dataSidecar = `apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: data}
spec:
  egress:
  - hosts: ["./db.data.svc.cluster.local"]
`

func TestNeedsPush(t *testing.T) {
	snap := build(t, storeOf(t, readTestdata(t, "mesh.yaml"), readTestdata(t, "routing.yaml"), dataSidecar), mesh.BuildOptions{Version: 1})
	g := gen.New(gen.SourceFunc(func() *mesh.Snapshot { return snap }))
	app, _ := proxypush.ParseNodeID(appClient)
	data, _ := proxypush.ParseNodeID(dataClient)
	key := func(kind proxypush.Kind, ns, name string) map[proxypush.ConfigKey]struct{} {
		return map[proxypush.ConfigKey]struct{}{{Kind: kind, Namespace: ns, Name: name}: {}}
	}
	hosts := func(hs ...string) map[string]struct{} {
		m := map[string]struct{}{}
		for _, h := range hs {
			m[h] = struct{}{}
		}
		return m
	}
	const (
		web  = "web.app.svc.cluster.local"
		db   = "db.data.svc.cluster.local"
		gone = "gone.app.svc.cluster.local"
	)
	tests := []struct {
		name string
		req  *proxypush.PushRequest
		// want per proxy: app, data, nil
		app, data, none bool
	}{
		{name: "global", req: &proxypush.PushRequest{Full: true}, app: true, data: true, none: true},
		{name: "global endpoints", req: &proxypush.PushRequest{}, app: true, data: true, none: true},
		{name: "own address", req: &proxypush.PushRequest{AddressesUpdated: hosts("10.97.0.30")}, app: true},
		{name: "own address, full", req: &proxypush.PushRequest{Full: true, AddressesUpdated: hosts("10.97.0.40")}, data: true},
		{name: "sidecar in data", req: &proxypush.PushRequest{Full: true, ConfigsUpdated: key(istioconfig.KindSidecar, "data", "default")}, data: true, none: true},
		{name: "sidecar in root namespace", req: &proxypush.PushRequest{Full: true, ConfigsUpdated: key(istioconfig.KindSidecar, mesh.DefaultRootNamespace, "default")}, app: true, data: true, none: true},
		{name: "sidecar elsewhere", req: &proxypush.PushRequest{Full: true, ConfigsUpdated: key(istioconfig.KindSidecar, "other", "default")}, none: true},
		{name: "telemetry in data", req: &proxypush.PushRequest{Full: true, ConfigsUpdated: key(istioconfig.KindTelemetry, "data", "default")}, data: true, none: true},
		{name: "telemetry in root namespace", req: &proxypush.PushRequest{Full: true, ConfigsUpdated: key(istioconfig.KindTelemetry, mesh.DefaultRootNamespace, "default")}, app: true, data: true, none: true},
		{name: "telemetry elsewhere", req: &proxypush.PushRequest{Full: true, ConfigsUpdated: key(istioconfig.KindTelemetry, "other", "default")}, none: true},
		{name: "other kind", req: &proxypush.PushRequest{Full: true, ConfigsUpdated: key("Gateway", "app", "gw")}, app: true, data: true, none: true},
		{name: "virtual service alone", req: &proxypush.PushRequest{Full: true, ConfigsUpdated: key(istioconfig.KindVirtualService, "app", "web")}},
		{name: "each covered kind", req: &proxypush.PushRequest{Full: true, ConfigsUpdated: map[proxypush.ConfigKey]struct{}{
			{Kind: istioconfig.KindServiceEntry, Namespace: "app", Name: "web"}: {}, {Kind: istioconfig.KindWorkloadEntry, Namespace: "app", Name: "client"}: {},
			{Kind: istioconfig.KindDestinationRule, Namespace: "app", Name: "web"}: {}}}},
		{name: "web changed", req: &proxypush.PushRequest{ConfigsUpdated: key(istioconfig.KindServiceEntry, "app", "web"), ServicesUpdated: hosts(web)}, app: true, none: true},
		{name: "db changed", req: &proxypush.PushRequest{ServicesUpdated: hosts(db)}, app: true, data: true, none: true},
		{name: "web and db changed", req: &proxypush.PushRequest{ServicesUpdated: hosts(web, db)}, app: true, data: true, none: true},
		{name: "removed service", req: &proxypush.PushRequest{ServicesUpdated: hosts(gone)}, app: true, none: true},
		{name: "other proxy's address", req: &proxypush.PushRequest{AddressesUpdated: hosts("10.97.0.99"), ServicesUpdated: hosts(web)}, app: true, none: true},
	}
	for _, tc := range tests {
		for _, p := range []struct {
			name  string
			proxy *proxypush.Proxy
			want  bool
		}{{"app", app, tc.app}, {"data", data, tc.data}, {"nil", nil, tc.none}} {
			full := tc.req.Full
			got, ok := g.NeedsPush(p.proxy, tc.req)
			if ok != p.want {
				t.Errorf("%s, %s proxy: NeedsPush = %v, want %v", tc.name, p.name, ok, p.want)
				continue
			}
			if tc.req.Full != full {
				t.Fatalf("%s: NeedsPush modified the request", tc.name)
			}
			switch {
			case !ok && got != nil:
				t.Errorf("%s, %s proxy: no push but a request %v", tc.name, p.name, got)
			case ok && p.proxy != nil && len(tc.req.AddressesUpdated) > 0 && slices.Contains(keys(tc.req.AddressesUpdated), p.proxy.IP):
				// The proxy's own inbound side changed: a full push.
				if !got.Full || (full && got != tc.req) || (!full && got == tc.req) {
					t.Errorf("%s, %s proxy: got %+v, want a full push", tc.name, p.name, got)
				}
				if got.AddressesUpdated == nil || len(got.AddressesUpdated) != len(tc.req.AddressesUpdated) {
					t.Errorf("%s: the full push lost the request's fields", tc.name)
				}
			case ok && got != tc.req:
				t.Errorf("%s, %s proxy: got a different request %+v", tc.name, p.name, got)
			}
		}
	}
}

// TestSidecarScope checks that a Sidecar's egress hosts limit what a
// proxy gets by name: load assignments and proxyless targets outside them
// are left out.
func TestSidecarScope(t *testing.T) {
	snap := build(t, storeOf(t, readTestdata(t, "mesh.yaml"), readTestdata(t, "routing.yaml"), dataSidecar), mesh.BuildOptions{Version: 1})
	g := gen.New(gen.SourceFunc(func() *mesh.Snapshot { return snap }))
	data, _ := proxypush.ParseNodeID(dataClient)
	names := func(res []*discovery.Resource) []string {
		var out []string
		for _, r := range res {
			out = append(out, r.Name)
		}
		return out
	}
	res, err := g.Generate(data, xdsapi.EndpointType, []string{"outbound|5432||db.data.svc.cluster.local", "outbound|80||web.app.svc.cluster.local", "outbound|80||private.data.svc.cluster.local"}, nil)
	if err != nil || !slices.Equal(names(res), []string{"outbound|5432||db.data.svc.cluster.local"}) {
		t.Errorf("sidecar-scoped EDS: %q, %v", names(res), err)
	}
	data.Metadata = grpcMeta
	res, err = g.Generate(data, xdsapi.ListenerType, []string{"db:5432", "web.app.svc.cluster.local:80", "private:80"}, nil)
	if err != nil || !slices.Equal(names(res), []string{"db:5432"}) {
		t.Errorf("sidecar-scoped proxyless listeners: %q, %v", names(res), err)
	}
}

func keys(m map[string]struct{}) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestChangedEndpointsEdges(t *testing.T) {
	g := gen.New(gen.SourceFunc(func() *mesh.Snapshot { return nil }))
	req := &proxypush.PushRequest{ServicesUpdated: map[string]struct{}{"a.demo.svc.cluster.local": {}}}
	if got, ok := g.ChangedEndpoints(nil, nil, req); ok || got != nil {
		t.Errorf("nothing watched: %q, %v; want nil, false", got, ok)
	}
	got, ok := g.ChangedEndpoints(nil, []string{"bogus", "outbound|80||a.demo.svc.cluster.local", "outbound|x||a.demo.svc.cluster.local"}, req)
	if !ok || !slices.Equal(got, []string{"outbound|80||a.demo.svc.cluster.local"}) {
		t.Errorf("got %q, %v", got, ok)
	}
}

func TestNames(t *testing.T) {
	if got := gen.OutboundClusterName(9080, "v1", "r.shop.svc.cluster.local"); got != "outbound|9080|v1|r.shop.svc.cluster.local" {
		t.Errorf("OutboundClusterName = %q", got)
	}
	if got := gen.InboundClusterName(8080); got != "inbound|8080||" {
		t.Errorf("InboundClusterName = %q", got)
	}
	if got := gen.RouteName(65535); got != "65535" {
		t.Errorf("RouteName = %q", got)
	}
	for _, name := range []string{"outbound|65535||h", "outbound|1|s|h"} {
		if _, _, _, ok := gen.ParseOutboundClusterName(name); !ok {
			t.Errorf("ParseOutboundClusterName(%q) failed", name)
		}
	}
	if _, _, _, ok := gen.ParseOutboundClusterName("outbound|65536||h"); ok {
		t.Error("port 65536 accepted")
	}
}

// TestBuildHelpers checks the Build* entry points, which the admin and
// debug paths use, against Generate.
func TestBuildHelpers(t *testing.T) {
	g := staticGenerator(t, mutationDir)
	proxy, _ := proxypush.ParseNodeID(appClient)
	clusters := g.BuildClusters(proxy)
	var eds []string
	for i, c := range clusters {
		if i > 0 && clusters[i-1].Name >= c.Name {
			t.Errorf("clusters not sorted and unique at %s", c.Name)
		}
		if c.GetType() == cluster.Cluster_EDS {
			eds = append(eds, c.Name)
		}
	}
	all := g.BuildEndpoints(proxy, nil)
	if len(all) != len(eds) {
		t.Fatalf("%d load assignments for %d EDS clusters", len(all), len(eds))
	}
	named := g.BuildEndpoints(proxy, []string{"outbound|80|v1|web.app.svc.cluster.local", "outbound|80|v1|web.app.svc.cluster.local", "outbound|80|v7|web.app.svc.cluster.local", "nope"})
	if len(named) != 1 || len(named[0].Endpoints) != 1 || len(named[0].Endpoints[0].LbEndpoints) != 4 {
		t.Fatalf("v1 endpoints: %v", named)
	}
	// Sorted by address, then port; the weight is kept (1 when unset, as
	// Istio sets it).
	var got []string
	for _, lb := range named[0].Endpoints[0].LbEndpoints {
		sa := lb.GetEndpoint().GetAddress().GetSocketAddress()
		got = append(got, fmt.Sprintf("%s:%d/%d", sa.GetAddress(), sa.GetPortValue(), lb.GetLoadBalancingWeight().GetValue()))
	}
	if want := []string{"10.97.0.11:80/1", "10.97.0.11:80/5", "10.97.0.11:9081/2", "10.97.0.9:9080/1"}; !slices.Equal(got, want) {
		t.Fatalf("v1 endpoints %q, want %q", got, want)
	}
	listeners := g.BuildListeners(proxy)
	for i := 1; i < len(listeners); i++ {
		if listeners[i-1].Name >= listeners[i].Name {
			t.Errorf("listeners not sorted at %s", listeners[i].Name)
		}
	}
	routes := g.BuildRoutes(proxy, nil)
	var names []string
	for _, rc := range routes {
		names = append(names, rc.Name)
		last := rc.VirtualHosts[len(rc.VirtualHosts)-1]
		if last.Name != "allow_any" || !slices.Equal(last.Domains, []string{"*"}) {
			t.Errorf("route %s: last virtual host %v", rc.Name, last)
		}
	}
	if !slices.Equal(names, []string{"80", "7070", "8080", "9091"}) { // by port
		t.Errorf("route names %q", names)
	}

	if got := g.BuildRoutes(proxy, []string{"9999", "8080"}); len(got) != 1 || got[0].Name != "8080" {
		t.Errorf("BuildRoutes(8080) = %v", got)
	}

	// Each Build* helper returns what Generate does.
	for _, tu := range typeURLs {
		res, err := g.Generate(proxy, tu.url, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		var built []string
		switch tu.url {
		case xdsapi.ClusterType:
			for _, c := range clusters {
				built = append(built, c.Name)
			}
		case xdsapi.EndpointType:
			for _, c := range all {
				built = append(built, c.ClusterName)
			}
		case xdsapi.ListenerType:
			for _, l := range listeners {
				built = append(built, l.Name)
			}
		case xdsapi.RouteType:
			built = names
		}
		var generated []string
		for _, r := range res {
			generated = append(generated, r.Name)
		}
		if !slices.Equal(built, generated) {
			t.Errorf("%s: Build* returns %q, Generate %q", tu.short, built, generated)
		}
	}
}

// TestCache checks what the cache rebuilds: nothing for a second proxy of
// the same scope, only the changed service for a new snapshot, nothing
// for an older snapshot still being served, and a service again after it
// was removed and came back.
func TestCache(t *testing.T) {
	store1 := storeOf(t, readTestdata(t, "mesh.yaml"), readTestdata(t, "routing.yaml"))
	v1 := build(t, store1, mesh.BuildOptions{Version: 1})
	current := v1
	g := gen.New(gen.SourceFunc(func() *mesh.Snapshot { return current }))
	app, _ := proxypush.ParseNodeID(appClient)
	app2, _ := proxypush.ParseNodeID("sidecar~10.97.0.31~client-2.app~app.svc.cluster.local")
	gen1 := func(p *proxypush.Proxy) map[string][]*discovery.Resource {
		out := map[string][]*discovery.Resource{}
		for _, tu := range typeURLs {
			res, err := g.Generate(p, tu.url, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			out[tu.short] = res
		}
		return out
	}
	first := gen1(app)
	b1 := g.Builds()
	if b1["cluster"] == 0 || b1["eds"] == 0 || b1["listener"] == 0 || b1["route"] == 0 {
		t.Fatalf("builds after the first proxy: %v", b1)
	}
	second := gen1(app2)
	if b := g.Builds(); !mapsEqual(b, b1) {
		t.Fatalf("a second proxy of the same scope built %v (before %v)", b, b1)
	}
	if !sameResources(first["routes"], second["routes"]) || !sameResources(first["endpoints"], second["endpoints"]) {
		t.Fatal("proxies of one scope got different shared resources")
	}

	// v2: db's endpoint moved; the other services keep their *Service.
	dbKey := proxypush.ConfigKey{Kind: istioconfig.KindServiceEntry, Namespace: "data", Name: "db"}
	movedDB := storeOf(t, strings.Replace(configYAML(t, store1.Get(dbKey)), "10.97.1.1", "10.97.1.2", 1)).Get(dbKey)
	store2 := store1.With(map[proxypush.ConfigKey]*istioconfig.Config{dbKey: movedDB})
	v2 := build(t, store2, mesh.BuildOptions{Version: 2, Previous: v1})
	current = v2
	gen1(app)
	b2 := g.Builds()
	if b2["eds"] != b1["eds"]+1 {
		t.Errorf("eds builds %d → %d, want one more (db's)", b1["eds"], b2["eds"])
	}
	if b2["cluster"] != b1["cluster"] {
		t.Errorf("cluster builds %d → %d for an endpoints-only change", b1["cluster"], b2["cluster"])
	}

	// v1 again (an older generation still running): right content, and it
	// does not evict v2's entries.
	current = v1
	old := gen1(app)
	if !sameResources(old["endpoints"], first["endpoints"]) || !sameResources(old["listeners"], first["listeners"]) {
		t.Fatal("the older snapshot's resources differ from before")
	}
	current = v2
	b3 := g.Builds()
	gen1(app)
	if b4 := g.Builds(); b4["route"] != b3["route"] || b4["listener"] != b3["listener"] {
		t.Errorf("v2 rebuilt its scope after an older snapshot was served: %v → %v", b3, b4)
	}

	// Another snapshot object with v2's version replaces v2's entry: a
	// second generation from it builds nothing.
	v2b := build(t, store2, mesh.BuildOptions{Version: 2, Previous: v2})
	current = v2b
	gen1(app)
	b4b := g.Builds()
	gen1(app)
	if b := g.Builds(); b["route"] != b4b["route"] || b["listener"] != b4b["listener"] {
		t.Errorf("a snapshot of the same version is not cached: %v → %v", b4b, b)
	}

	// v3 drops db; v4 brings back v2's db (same *Service): the cache
	// dropped it with v3, so it is built again.
	v3 := build(t, store1.With(map[proxypush.ConfigKey]*istioconfig.Config{dbKey: nil}), mesh.BuildOptions{Version: 3, Previous: v2})
	current = v3
	gen1(app)
	if v3.Service("db.data.svc.cluster.local") != nil {
		t.Fatal("db still in v3")
	}
	v4 := build(t, store2, mesh.BuildOptions{Version: 4, Previous: v2})
	if v4.Service("db.data.svc.cluster.local") != v2.Service("db.data.svc.cluster.local") {
		t.Fatal("v4 does not share db's *Service with v2")
	}
	current = v4
	b5 := g.Builds()
	gen1(app)
	b6 := g.Builds()
	if b6["cluster"] != b5["cluster"]+1 || b6["eds"] != b5["eds"]+1 {
		t.Errorf("db after coming back: builds %v → %v, want one more cluster and load assignment", b5, b6)
	}

	// v5: web's DestinationRule selects other endpoints for subset v1;
	// its load assignment must follow, not come from the cache.
	drKey := proxypush.ConfigKey{Kind: istioconfig.KindDestinationRule, Namespace: "app", Name: "web"}
	drV2 := storeOf(t, `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: web, namespace: app}
spec:
  host: web
  subsets:
  - {name: v1, labels: {version: v2}}
  - {name: v2, labels: {version: v1}}
`).Get(drKey)
	store5 := store2.With(map[proxypush.ConfigKey]*istioconfig.Config{drKey: drV2})
	current = build(t, store5, mesh.BuildOptions{Version: 5, Previous: v4})
	v1Subset := "outbound|80|v1|web.app.svc.cluster.local"
	res, err := g.Generate(app, xdsapi.EndpointType, []string{v1Subset}, nil)
	if err != nil || len(res) != 1 || !bytes.Contains(render(t, res), []byte("10.97.0.12")) || bytes.Contains(render(t, res), []byte("10.97.0.11")) {
		t.Errorf("after the DestinationRule changed, %s is %s (%v)", v1Subset, render(t, res), err)
	}
	gen1(app)

	// v6: web gets another port; its clusters must follow.
	webKey := proxypush.ConfigKey{Kind: istioconfig.KindServiceEntry, Namespace: "app", Name: "web"}
	webYAML := configYAML(t, store5.Get(webKey))
	wider := storeOf(t, strings.Replace(webYAML, `"ports":[`, `"ports":[{"number":81,"name":"http-81"},`, 1)).Get(webKey)
	current = build(t, store5.With(map[proxypush.ConfigKey]*istioconfig.Config{webKey: wider}), mesh.BuildOptions{Version: 6, Previous: current})
	res, err = g.Generate(app, xdsapi.ClusterType, nil, nil)
	if err != nil || !slices.ContainsFunc(res, func(r *discovery.Resource) bool { return r.Name == "outbound|81||web.app.svc.cluster.local" }) {
		t.Errorf("after web got port 81: clusters %v, %v", len(res), err)
	}
}

// configYAML writes a ServiceEntry config back out as YAML.
func configYAML(t *testing.T, c *istioconfig.Config) string {
	t.Helper()
	spec, err := protojson.Marshal(c.Spec)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("apiVersion: networking.istio.io/v1\nkind: %s\nmetadata: {name: %s, namespace: %s}\nspec: %s\n", c.Kind, c.Name, c.Namespace, spec)
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func sameResources(a, b []*discovery.Resource) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].Version != b[i].Version {
			return false
		}
	}
	return true
}
