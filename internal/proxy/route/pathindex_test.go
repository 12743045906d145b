package route

import (
	"fmt"
	"math/rand/v2"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// gatewayRoutes is the virtual host of an ingress gateway with n prefix
// routes /r0/ … /r{n-1}/ (bench/http/gateway.sh).
func gatewayRoutes(n int) *routev3.RouteConfiguration {
	vh := &routev3.VirtualHost{Name: "gw", Domains: []string{"*"}}
	for i := range n {
		vh.Routes = append(vh.Routes, to(fmt.Sprintf("c%d", i), &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: fmt.Sprintf("/r%d/", i)}}))
	}
	return &routev3.RouteConfiguration{VirtualHosts: []*routev3.VirtualHost{vh}}
}

func TestPathIndexGateway(t *testing.T) {
	tb, err := Compile(gatewayRoutes(100))
	if err != nil {
		t.Fatal(err)
	}
	if tb.any.index == nil {
		t.Fatal("100 prefix routes are not indexed")
	}
	for _, c := range []struct{ path, want string }{
		{"/r0/", "c0"}, {"/r7/x", "c7"}, {"/r57/a/b", "c57"}, {"/r99/", "c99"},
		{"/r100/", ""}, {"/r5", ""}, {"/", ""}, {"", ""}, {"/R5/", ""},
	} {
		got := ""
		if r := tb.Route(req("GET " + c.path)); r != nil {
			got = r.PickCluster()
		}
		if got != c.want {
			t.Errorf("%q → %q, want %q", c.path, got, c.want)
		}
	}
}

// TestPathIndexSameAsScan compares the index's answer with the linear
// scan's on random route tables (prefixes, paths, path_separated_prefixes,
// regexes, case-insensitive matches, header and query conditions, routes
// that shadow each other) and random paths made of the same pieces.
func TestPathIndexSameAsScan(t *testing.T) {
	pieces := []string{"/", "/a", "/a/", "/ab", "/a/b", "/A", "/api", "/api/", "/api/v1", "/r1", "/r1/", "/r10/", "b", "x/", ""}
	rnd := rand.New(rand.NewPCG(1, 2))
	pick := func() string { return pieces[rnd.IntN(len(pieces))] }
	lit := func() string {
		s := pick() + pick()
		if len(s) == 0 || s[0] != '/' {
			s = "/" + s
		}
		return s
	}
	indexed := 0
	for table := range 400 {
		vh := &routev3.VirtualHost{Name: "v", Domains: []string{"*"}}
		n := minIndexRoutes + rnd.IntN(40)
		for i := range n {
			m := &routev3.RouteMatch{}
			switch rnd.IntN(10) {
			case 0:
				m.PathSpecifier = &routev3.RouteMatch_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: "/a.*"}}
			case 1:
				m.PathSpecifier = &routev3.RouteMatch_Path{Path: lit()}
			case 2:
				p := lit()
				for len(p) > 1 && p[len(p)-1] == '/' {
					p = p[:len(p)-1]
				}
				m.PathSpecifier = &routev3.RouteMatch_PathSeparatedPrefix{PathSeparatedPrefix: p}
			default:
				m.PathSpecifier = &routev3.RouteMatch_Prefix{Prefix: lit()}
			}
			if rnd.IntN(8) == 0 {
				m.CaseSensitive = wrapperspb.Bool(false)
			}
			if rnd.IntN(6) == 0 {
				m.Headers = append(m.Headers, hdr("x-v", exact("1")))
			}
			if rnd.IntN(8) == 0 {
				m.QueryParameters = append(m.QueryParameters, query("q", exact("1")))
			}
			vh.Routes = append(vh.Routes, to(fmt.Sprintf("t%dr%d", table, i), m))
		}
		tb, err := Compile(&routev3.RouteConfiguration{VirtualHosts: []*routev3.VirtualHost{vh}})
		if err != nil {
			t.Fatal(err)
		}
		v := tb.any
		if v.index == nil {
			continue
		}
		indexed++
		for range 200 {
			path := pick() + pick() + pick()
			var headers []string
			if rnd.IntN(2) == 0 {
				headers = append(headers, "x-v: 1")
			}
			line := "GET " + path
			if rnd.IntN(2) == 0 {
				line += "?q=1"
			}
			r := req(line, headers...)
			if got, want := v.index.first(v.Routes, r), firstMatch(v.Routes, r); got != want {
				t.Fatalf("table %d, %q %v: index found %v, the scan %v", table, line, headers, name(got), name(want))
			}
		}
	}
	if indexed < 50 {
		t.Fatalf("only %d of 400 tables indexed", indexed)
	}
}

func name(r *Route) string {
	if r == nil {
		return "none"
	}
	return r.PickCluster()
}

// TestPathIndexNotBuilt: few routes, or literals of many lengths, are
// scanned.
func TestPathIndexNotBuilt(t *testing.T) {
	tb, err := Compile(gatewayRoutes(minIndexRoutes - 1))
	if err != nil {
		t.Fatal(err)
	}
	if tb.any.index != nil {
		t.Error("indexed fewer than minIndexRoutes routes")
	}
	vh := &routev3.VirtualHost{Name: "v", Domains: []string{"*"}}
	p := "/"
	for i := range 40 {
		p += "a"
		vh.Routes = append(vh.Routes, to(fmt.Sprint(i), &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: p}}))
	}
	if tb, err = Compile(&routev3.RouteConfiguration{VirtualHosts: []*routev3.VirtualHost{vh}}); err != nil {
		t.Fatal(err)
	}
	if tb.any.index != nil {
		t.Error("indexed 40 literals of 40 lengths")
	}
}

func BenchmarkRouteGateway(b *testing.B) {
	tb, err := Compile(gatewayRoutes(100))
	if err != nil {
		b.Fatal(err)
	}
	reqs := make([]*Request, 100)
	for i := range reqs {
		reqs[i] = &Request{Host: "gateway.bench", Path: fmt.Sprintf("/r%d/", i), Method: "GET", Scheme: "https"}
	}
	b.Run("index", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if tb.Route(reqs[i%100]) == nil {
				b.Fatal("no route")
			}
		}
	})
	b.Run("scan", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if firstMatch(tb.any.Routes, reqs[i%100]) == nil {
				b.Fatal("no route")
			}
		}
	})
}
