package route

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/types/known/durationpb"
)

func TestHashPolicy(t *testing.T) {
	hp, err := compileHashPolicy([]*routev3.RouteAction_HashPolicy{
		{PolicySpecifier: &routev3.RouteAction_HashPolicy_Header_{Header: &routev3.RouteAction_HashPolicy_Header{HeaderName: "X-User"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	in := func(h http.Header, q string) HashInput {
		return HashInput{Headers: HTTPHeader(h), Query: q, Source: netip.MustParseAddrPort("10.0.0.1:1234")}
	}
	a, ok, _ := hp.Hash(in(http.Header{"X-User": {"alice"}}, ""))
	b, _, _ := hp.Hash(in(http.Header{"X-User": {"bob"}}, ""))
	a2, _, _ := hp.Hash(in(http.Header{"X-User": {"alice"}}, ""))
	if !ok || a != a2 || a == b {
		t.Errorf("header hash: alice %x %x, bob %x, ok %v", a, a2, b, ok)
	}
	if _, ok, _ := hp.Hash(in(http.Header{}, "")); ok {
		t.Error("no header: want no hash")
	}

	q, _ := compileHashPolicy([]*routev3.RouteAction_HashPolicy{
		{PolicySpecifier: &routev3.RouteAction_HashPolicy_QueryParameter_{QueryParameter: &routev3.RouteAction_HashPolicy_QueryParameter{Name: "id"}}},
	})
	x, ok1, _ := q.Hash(in(nil, "?a=1&id=7"))
	y, ok2, _ := q.Hash(in(nil, "id=7"))
	if !ok1 || !ok2 || x != y {
		t.Errorf("query hash differs for the same id: %x %x", x, y)
	}

	src, _ := compileHashPolicy([]*routev3.RouteAction_HashPolicy{
		{PolicySpecifier: &routev3.RouteAction_HashPolicy_ConnectionProperties_{ConnectionProperties: &routev3.RouteAction_HashPolicy_ConnectionProperties{SourceIp: true}}},
	})
	s1, _, _ := src.Hash(HashInput{Source: netip.MustParseAddrPort("10.0.0.1:1")})
	s2, _, _ := src.Hash(HashInput{Source: netip.MustParseAddrPort("10.0.0.1:2")})
	s3, _, _ := src.Hash(HashInput{Source: netip.MustParseAddrPort("10.0.0.2:1")})
	if s1 != s2 || s1 == s3 {
		t.Errorf("source IP hash: same IP %x %x, other %x", s1, s2, s3)
	}
	// The request's remote address (from x-forwarded-for) is what
	// source_ip hashes, not the connection's peer.
	r1, _, _ := src.Hash(HashInput{Source: netip.MustParseAddrPort("10.0.0.1:1"), Remote: netip.MustParseAddrPort("10.0.0.2:0")})
	if r1 != s3 {
		t.Errorf("source IP hash with remote 10.0.0.2: %x, want 10.0.0.2's %x", r1, s3)
	}

	ck, _ := compileHashPolicy([]*routev3.RouteAction_HashPolicy{
		{PolicySpecifier: &routev3.RouteAction_HashPolicy_Cookie_{Cookie: &routev3.RouteAction_HashPolicy_Cookie{Name: "s", Path: "/", Ttl: durationpb.New(time.Hour)}}},
	})
	h1, ok, set := ck.Hash(in(http.Header{}, ""))
	if !ok || !strings.HasPrefix(set, `s="`) || !strings.Contains(set, "; Max-Age=3600; Path=/; HttpOnly") {
		t.Fatalf("no cookie: hash %v, Set-Cookie %q", ok, set)
	}
	val := strings.TrimSuffix(strings.TrimPrefix(strings.SplitN(set, ";", 2)[0], `s="`), `"`)
	h2, ok, set2 := ck.Hash(in(http.Header{"Cookie": {"other=1; s=" + val}}, ""))
	if !ok || set2 != "" || h1 != h2 {
		t.Errorf("with the generated cookie: hash %x vs %x, Set-Cookie %q", h2, h1, set2)
	}
	attr, _ := compileHashPolicy([]*routev3.RouteAction_HashPolicy{
		{PolicySpecifier: &routev3.RouteAction_HashPolicy_Cookie_{Cookie: &routev3.RouteAction_HashPolicy_Cookie{Name: "s", Ttl: durationpb.New(0),
			Attributes: []*routev3.RouteAction_HashPolicy_CookieAttribute{{Name: "SameSite", Value: "Strict"}, {Name: "Secure"}}}}},
	})
	if _, _, set := attr.Hash(in(http.Header{}, "")); !strings.HasSuffix(set, `"; SameSite=Strict; Secure; HttpOnly`) || strings.Contains(set, "Max-Age") {
		t.Errorf("session cookie with attributes: Set-Cookie %q", set)
	}
	if _, err := compileHashPolicy([]*routev3.RouteAction_HashPolicy{{PolicySpecifier: &routev3.RouteAction_HashPolicy_FilterState_{}}}); err == nil {
		t.Error("filter_state hash policy: want an error")
	}
}
