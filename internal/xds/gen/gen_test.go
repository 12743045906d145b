package gen_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	originalsrc "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/original_src/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/straitmesh/strait/internal/golden"
	"github.com/straitmesh/strait/internal/mesh"
	"github.com/straitmesh/strait/internal/proxypush"
	"github.com/straitmesh/strait/internal/registry/file"
	"github.com/straitmesh/strait/internal/xds"
	"github.com/straitmesh/strait/internal/xds/gen"
	"github.com/straitmesh/strait/internal/xdsapi"
)

var update = flag.Bool("update", false, "rewrite the golden files")

var _ xds.Generator = (*gen.Generator)(nil)
var _ xds.EndpointsNarrower = (*gen.Generator)(nil)

var typeURLs = []struct {
	short, url string
}{
	{"clusters", xdsapi.ClusterType},
	{"endpoints", xdsapi.EndpointType},
	{"listeners", xdsapi.ListenerType},
	{"routes", xdsapi.RouteType},
}

type scenario struct {
	dir     string
	proxies []string // node ids
}

var scenarios = []scenario{
	{dir: "demo", proxies: []string{
		"sidecar~10.99.0.10~client.demo~demo.svc.cluster.local",
		"sidecar~10.99.0.11~echo-v1.demo~demo.svc.cluster.local",
	}},
	{dir: "router", proxies: []string{
		"sidecar~10.99.0.10~client.demo~demo.svc.cluster.local",
	}},
	{dir: "trafficpolicy", proxies: []string{
		"sidecar~10.99.0.10~client.demo~demo.svc.cluster.local",
	}},
	{dir: "extended", proxies: []string{
		"sidecar~10.98.0.10~productpage.shop~shop.svc.cluster.local",
		"sidecar~10.98.0.11~reviews-1.shop~shop.svc.cluster.local",
		"sidecar~10.98.0.99~stranger.other~other.svc.cluster.local",
	}},
	// Fault injection, CORS and mirroring (httpfilters.go).
	{dir: "filters", proxies: []string{
		"sidecar~10.97.0.10~client.app~app.svc.cluster.local",
		"sidecar~10.97.0.11~other.app~app.svc.cluster.local",
	}},
	// Automatic mTLS between sidecars (mtls.go).
	{dir: "mtls", proxies: []string{
		"sidecar~10.95.0.10~client.secure~secure.svc.cluster.local",
		"sidecar~10.95.0.11~server.secure~secure.svc.cluster.local",
	}},
	// AuthorizationPolicy → RBAC filters (authz.go).
	{dir: "authz", proxies: []string{
		"sidecar~10.94.0.11~server.shop~shop.svc.cluster.local",
		"sidecar~10.94.0.12~other.shop~shop.svc.cluster.local",
	}},
	// PeerAuthentication modes on the inbound side, auto mTLS off to a
	// DISABLE namespace (peerauthn.go).
	{dir: "peerauthn", proxies: []string{
		"sidecar~10.94.0.10~client.pa~pa.svc.cluster.local",
		"sidecar~10.94.0.11~strict.pa~pa.svc.cluster.local",
		"sidecar~10.94.0.12~perm.pa~pa.svc.cluster.local",
		"sidecar~10.94.0.13~plain.plain~plain.svc.cluster.local",
	}},
	// TLS origination, DestinationRule tls SIMPLE/MUTUAL (tlsorigination.go).
	{dir: "tlsorigination", proxies: []string{
		"sidecar~10.94.0.10~client.egress~egress.svc.cluster.local",
	}},
	{dir: "match", proxies: []string{
		"sidecar~10.96.0.10~canary.demo~demo.svc.cluster.local",
		"sidecar~10.96.0.11~plain.demo~demo.svc.cluster.local",
		"sidecar~10.96.0.12~other.other~other.svc.cluster.local",
	}},
	// RequestAuthentication: jwt_authn on the selected workloads'
	// inbound HTTP chains (jwt.go).
	{dir: "jwt", proxies: []string{
		"sidecar~10.94.0.10~client.auth~auth.svc.cluster.local",
		"sidecar~10.94.0.11~web.auth~auth.svc.cluster.local",
		"sidecar~10.94.0.99~stranger.other~other.svc.cluster.local",
	}},
	// Locality load balancing: priorities, distribute, failoverPriority
	// (locality.go), for a proxy in each of two localities.
	{dir: "locality", proxies: []string{
		"sidecar~10.94.0.10~client-a.geo~geo.svc.cluster.local",
		"sidecar~10.94.0.20~client-c.geo~geo.svc.cluster.local",
	}},
	{dir: "egress", proxies: []string{
		"sidecar~10.96.0.10~client.egress~egress.svc.cluster.local",
		"sidecar~10.96.0.11~outsider.open~open.svc.cluster.local",
	}},
	// An ingress gateway and a sidecar beside it (gateway.go).
	{dir: "gateway", proxies: []string{
		"router~10.92.0.10~ingressgateway.ingress~ingress.svc.cluster.local",
		"sidecar~10.92.0.11~client.demo~demo.svc.cluster.local",
	}},
	// The Sidecar resource: tcp sourceSubnet chains, inboundConnectionPool.
	{dir: "sidecar", proxies: []string{
		"sidecar~10.93.0.10~client.side~side.svc.cluster.local",
		"sidecar~10.93.0.11~server-v1.side~side.svc.cluster.local",
		"sidecar~10.93.0.12~server-v2.side~side.svc.cluster.local",
	}},
}

func newGenerator(t *testing.T, dir string) (*gen.Generator, *file.Registry) {
	t.Helper()
	r, err := file.New(file.Options{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return gen.NewWithOptions(r, gen.Options{KeySets: testKeySets{}}), r
}

// testKeySets answers the golden scenarios' jwksUri: one key set for
// https://keys.test/jwks.json, a failure for any other.
type testKeySets struct{}

const testFetchedJWKS = `{"keys":[{"kty":"EC","crv":"P-256","kid":"fetched","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}]}`

func (testKeySets) Lookup(_ context.Context, issuer, uri string, _ time.Duration) (string, error) {
	if uri == "https://keys.test/jwks.json" {
		return testFetchedJWKS, nil
	}
	return "", fmt.Errorf("fetch %s: unreachable", uri)
}

// TestGolden compares every resource type for every scenario proxy with
// testdata/DIR/golden/POD.TYPE.json. Run with -update to rewrite them.
func TestGolden(t *testing.T) {
	for _, sc := range scenarios {
		g := staticGenerator(t, filepath.Join("testdata", sc.dir))
		for _, id := range sc.proxies {
			proxy, err := proxypush.ParseNodeID(id)
			if err != nil {
				t.Fatal(err)
			}
			for _, tu := range typeURLs {
				name := filepath.Join("testdata", sc.dir, "golden", proxy.PodName+"."+tu.short+".json")
				t.Run(strings.TrimPrefix(name, "testdata/"), func(t *testing.T) {
					res, err := g.Generate(proxy, tu.url, nil, &proxypush.PushRequest{Full: true})
					if err != nil {
						t.Fatal(err)
					}
					got := render(t, res)
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
					if d := golden.Diff(want, got); d != "" {
						t.Errorf("%s differs from the generated resources (run go test -update and review the diff):\n%s", name, d)
					}
				})
			}
		}
	}
}

// render returns the resources as an indented JSON array of protojson
// objects, stable across runs.
func render(t *testing.T, res []*discovery.Resource) []byte {
	t.Helper()
	var buf bytes.Buffer
	buf.WriteString("[")
	for i, r := range res {
		m, err := r.Resource.UnmarshalNew()
		if err != nil {
			t.Fatal(err)
		}
		js, err := protojson.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			buf.WriteString(",")
		}
		buf.Write(js)
	}
	buf.WriteString("]")
	var compact, out bytes.Buffer
	if err := json.Compact(&compact, buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	if err := json.Indent(&out, compact.Bytes(), "", "  "); err != nil {
		t.Fatal(err)
	}
	out.WriteString("\n")
	return out.Bytes()
}

type validator interface {
	proto.Message
	ValidateAll() error
}

// TestValidateAll checks that every generated resource passes the protos'
// own validation, for the golden scenarios and for examples/demo.
func TestValidateAll(t *testing.T) {
	dirs := map[string][]string{filepath.Join("..", "..", "..", "examples", "demo"): scenarios[0].proxies}
	for _, sc := range scenarios {
		dirs[filepath.Join("testdata", sc.dir)] = sc.proxies
	}
	for dir, proxies := range dirs {
		g := staticGenerator(t, dir)
		for _, id := range proxies {
			proxy, err := proxypush.ParseNodeID(id)
			if err != nil {
				t.Fatal(err)
			}
			for _, tu := range typeURLs {
				res, err := g.Generate(proxy, tu.url, nil, &proxypush.PushRequest{Full: true})
				if err != nil {
					t.Fatal(err)
				}
				if len(res) == 0 && tu.short != "endpoints" {
					t.Errorf("%s %s: no %s", dir, id, tu.short)
				}
				for _, r := range res {
					m, err := r.Resource.UnmarshalNew()
					if err != nil {
						t.Fatal(err)
					}
					v, ok := m.(validator)
					if !ok {
						t.Fatalf("%T has no ValidateAll", m)
					}
					if err := v.ValidateAll(); err != nil {
						t.Errorf("%s %s %s %s: %v", dir, id, tu.short, r.Name, err)
					}
					// ValidateAll does not look inside Any fields; Envoy does.
					for _, err := range validateNested(m) {
						t.Errorf("%s %s %s %s: %v", dir, id, tu.short, r.Name, err)
					}
					if r.Name == "" {
						t.Errorf("%s %s: resource without name", dir, tu.short)
					}
				}
			}
		}
	}
}

// validateNested unpacks every Any inside m and validates it, recursively.
func validateNested(m proto.Message) []error {
	var errs []error
	var walk func(protoreflect.Message)
	walk = func(msg protoreflect.Message) {
		if a, ok := msg.Interface().(*anypb.Any); ok {
			inner, err := a.UnmarshalNew()
			if err != nil {
				errs = append(errs, err)
				return
			}
			if v, ok := inner.(validator); ok {
				if err := v.ValidateAll(); err != nil {
					errs = append(errs, err)
				}
			}
			walk(inner.ProtoReflect())
			return
		}
		msg.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			switch {
			case fd.IsList() && fd.Message() != nil:
				for i := 0; i < v.List().Len(); i++ {
					walk(v.List().Get(i).Message())
				}
			case fd.IsMap() && fd.MapValue().Message() != nil:
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					walk(mv.Message())
					return true
				})
			case !fd.IsList() && !fd.IsMap() && fd.Message() != nil:
				walk(v.Message())
			}
			return true
		})
	}
	walk(m.ProtoReflect())
	return errs
}

// TestGenerateWhileReloading runs generators for several proxies while the
// registry applies file changes; run it with -race.
// liveDemo copies the demo mesh into a temporary directory and returns a
// generator over a running file registry of it, the directory, and the
// registry's push requests.
func liveDemo(t *testing.T) (*gen.Generator, string, <-chan *proxypush.PushRequest) {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"mesh.yaml", "destinationrule.yaml", "virtualservice.yaml"} {
		b, err := os.ReadFile(filepath.Join("testdata", "demo", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	g, r := newGenerator(t, dir)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	pushes := make(chan *proxypush.PushRequest, 64)
	go func() { _ = r.Run(ctx, func(p *proxypush.PushRequest) { pushes <- p }) }()
	return g, dir, pushes
}

func TestGenerateWhileReloading(t *testing.T) {
	g, dir, pushes := liveDemo(t)

	routing, _ := os.ReadFile(filepath.Join("testdata", "demo", "virtualservice.yaml"))
	var wg sync.WaitGroup
	for _, id := range scenarios[0].proxies {
		proxy, _ := proxypush.ParseNodeID(id)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				for _, tu := range typeURLs {
					if _, err := g.Generate(proxy, tu.url, nil, &proxypush.PushRequest{Full: true}); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	for _, w := range []string{"50", "100", "80"} {
		other := "50"
		switch w {
		case "100":
			other = "0"
		case "80":
			other = "20"
		}
		content := strings.NewReplacer("weight: 80", "weight: "+w, "weight: 20", "weight: "+other).Replace(string(routing))
		if err := os.WriteFile(filepath.Join(dir, "virtualservice.yaml"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		select {
		case <-pushes:
		case <-time.After(5 * time.Second):
			t.Fatal("no push within 5s")
		}
	}
	wg.Wait()
	proxy, _ := proxypush.ParseNodeID(scenarios[0].proxies[0])
	routes := g.BuildRoutes(proxy, []string{"80"})
	wc := routes[0].VirtualHosts[0].Routes[0].GetRoute().GetWeightedClusters()
	if wc == nil || wc.Clusters[0].Weight.GetValue() != 80 {
		t.Fatalf("final routes = %v", routes[0])
	}
	if got := g.BuildRoutes(proxy, []string{"9999"}); len(got) != 0 {
		t.Fatalf("unknown route name generated %v", got)
	}
	if _, err := g.Generate(proxy, "type.googleapis.com/bogus", nil, nil); err == nil {
		t.Fatal("unknown type URL: no error")
	}
}

// In TPROXY mode the inbound listener is transparent and carries
// original_src with the capture mark; in REDIRECT mode it does neither.
func TestVirtualInboundTProxy(t *testing.T) {
	g, _ := newGenerator(t, filepath.Join("..", "..", "..", "examples", "demo"))
	for _, mode := range []string{"", "REDIRECT", "TPROXY", "tproxy"} {
		proxy, err := proxypush.ParseNodeID("sidecar~10.99.0.11~echo-v1.demo~demo.svc.cluster.local")
		if err != nil {
			t.Fatal(err)
		}
		proxy.Metadata = map[string]string{"INTERCEPTION_MODE": mode}
		var inbound *listener.Listener
		for _, l := range g.BuildListeners(proxy) {
			if l.Name == gen.VirtualInboundListener {
				inbound = l
			}
		}
		if inbound == nil {
			t.Fatalf("mode %q: no %s", mode, gen.VirtualInboundListener)
		}
		if err := inbound.ValidateAll(); err != nil {
			t.Fatalf("mode %q: %v", mode, err)
		}
		for _, err := range validateNested(inbound) {
			t.Errorf("mode %q: %v", mode, err)
		}
		tproxy := strings.EqualFold(mode, "TPROXY")
		if got := inbound.GetTransparent().GetValue(); got != tproxy {
			t.Errorf("mode %q: transparent = %v, want %v", mode, got, tproxy)
		}
		var src *originalsrc.OriginalSrc
		for _, f := range inbound.ListenerFilters {
			if f.Name == "envoy.filters.listener.original_src" {
				src = &originalsrc.OriginalSrc{}
				if err := f.GetTypedConfig().UnmarshalTo(src); err != nil {
					t.Fatal(err)
				}
			}
		}
		switch {
		case tproxy && (src == nil || src.Mark != gen.TProxyMark):
			t.Errorf("mode %q: original_src = %v, want mark %d", mode, src, gen.TProxyMark)
		case !tproxy && src != nil:
			t.Errorf("mode %q: unexpected original_src", mode)
		}
	}
}

// An endpoints push for named clusters after a new snapshot builds the
// changed load assignment only, not the scope's listeners and routes.
func TestEndpointsPushBuildsNoScope(t *testing.T) {
	g, dir, pushes := liveDemo(t)

	proxy, _ := proxypush.ParseNodeID(scenarios[0].proxies[0])
	var edsNames []string
	for _, tu := range typeURLs {
		res, err := g.Generate(proxy, tu.url, nil, &proxypush.PushRequest{Full: true})
		if err != nil {
			t.Fatal(err)
		}
		if tu.url == xdsapi.EndpointType {
			for _, r := range res {
				edsNames = append(edsNames, r.Name)
			}
		}
	}
	if len(edsNames) == 0 {
		t.Fatal("no load assignments")
	}
	before := g.Builds()

	mesh, _ := os.ReadFile(filepath.Join(dir, "mesh.yaml"))
	moved := strings.Replace(string(mesh), "address: 10.99.0.12", "address: 10.99.0.13", 1)
	if moved == string(mesh) {
		t.Fatal("test mesh has no workload at 10.99.0.12")
	}
	// Atomically, as editors do: the push taken below is then the one of
	// the new content.
	tmp := filepath.Join(dir, ".mesh.yaml.tmp")
	if err := os.WriteFile(tmp, []byte(moved), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "mesh.yaml")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-pushes:
	case <-time.After(5 * time.Second):
		t.Fatal("no push within 5s")
	}
	res, err := g.Generate(proxy, xdsapi.EndpointType, edsNames, &proxypush.PushRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(render(t, res), []byte("10.99.0.13")) {
		t.Fatal("the load assignments do not have the moved endpoint")
	}
	after := g.Builds()
	for _, kind := range []string{"listener", "route", "cluster"} {
		if after[kind] != before[kind] {
			t.Errorf("%s builds %d → %d: an endpoints push built the scope", kind, before[kind], after[kind])
		}
	}
	if after["eds"] <= before["eds"] {
		t.Error("no load assignment was rebuilt")
	}
}

func TestChangedEndpoints(t *testing.T) {
	g := gen.New(gen.SourceFunc(func() *mesh.Snapshot { return nil }))
	watched := []string{"outbound|80||a.demo.svc.cluster.local", "outbound|80|v1|a.demo.svc.cluster.local", "outbound|90||b.demo.svc.cluster.local", "inbound|80||"}
	eds := func(hosts ...string) *proxypush.PushRequest {
		r := &proxypush.PushRequest{ServicesUpdated: map[string]struct{}{}}
		for _, h := range hosts {
			r.ServicesUpdated[h] = struct{}{}
		}
		return r
	}
	tests := []struct {
		name   string
		req    *proxypush.PushRequest
		want   []string
		wantOK bool
	}{
		{"one host, every subset of it", eds("a.demo.svc.cluster.local"), watched[:2], true},
		{"a host nobody watches", eds("c.demo.svc.cluster.local"), nil, true},
		{"a full push cannot be narrowed", &proxypush.PushRequest{Full: true, ServicesUpdated: map[string]struct{}{"a.demo.svc.cluster.local": {}}}, nil, false},
		{"a request naming no host cannot be narrowed", eds(), nil, false},
	}
	for _, tt := range tests {
		got, ok := g.ChangedEndpoints(nil, watched, tt.req)
		if ok != tt.wantOK || !slices.Equal(got, tt.want) {
			t.Errorf("%s: got %q, %v; want %q, %v", tt.name, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestParseOutboundClusterName(t *testing.T) {
	tests := []struct {
		name         string
		port         uint32
		subset, host string
		ok           bool
	}{
		{"outbound|80||a.demo.svc.cluster.local", 80, "", "a.demo.svc.cluster.local", true},
		{"outbound|9080|v1|reviews.shop.svc.cluster.local", 9080, "v1", "reviews.shop.svc.cluster.local", true},
		{"outbound|80||", 0, "", "", false},
		{"outbound|80|a|b|c", 0, "", "", false},
		{"outbound|0||a", 0, "", "", false},
		{"outbound|x||a", 0, "", "", false},
		{"outbound|80|a", 0, "", "", false},
		{"inbound|80||", 0, "", "", false},
		{"outbound", 0, "", "", false},
	}
	for _, tt := range tests {
		port, subset, host, ok := gen.ParseOutboundClusterName(tt.name)
		if ok != tt.ok || port != tt.port || subset != tt.subset || host != tt.host {
			t.Errorf("ParseOutboundClusterName(%q) = %d, %q, %q, %v; want %d, %q, %q, %v", tt.name, port, subset, host, ok, tt.port, tt.subset, tt.host, tt.ok)
		}
	}
}
