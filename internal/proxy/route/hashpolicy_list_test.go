package route

import (
	"net/http"
	"strings"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
)

func headerHash(name string, terminal bool) *routev3.RouteAction_HashPolicy {
	return &routev3.RouteAction_HashPolicy{
		Terminal:        terminal,
		PolicySpecifier: &routev3.RouteAction_HashPolicy_Header_{Header: &routev3.RouteAction_HashPolicy_Header{HeaderName: name}},
	}
}

func cookieHash(name string) *routev3.RouteAction_HashPolicy {
	return &routev3.RouteAction_HashPolicy{
		PolicySpecifier: &routev3.RouteAction_HashPolicy_Cookie_{Cookie: &routev3.RouteAction_HashPolicy_Cookie{Name: name}},
	}
}

func mustHashPolicy(t *testing.T, ps ...*routev3.RouteAction_HashPolicy) *HashPolicy {
	t.Helper()
	hp, err := compileHashPolicy(ps)
	if err != nil {
		t.Fatal(err)
	}
	return hp
}

// A policy that yields nothing is skipped and the later ones still hash; a
// terminal policy that yields a value ends the list (Envoy's
// HashPolicyImpl::generateHash).
func TestHashPolicyListSkipsAndStops(t *testing.T) {
	both := HashInput{Headers: HTTPHeader(http.Header{"X-A": {"a"}, "X-B": {"b"}})}
	onlyB := HashInput{Headers: HTTPHeader(http.Header{"X-B": {"b"}})}

	aThenB := mustHashPolicy(t, headerHash("x-a", false), headerHash("x-b", false))
	justA := mustHashPolicy(t, headerHash("x-a", false))
	justB := mustHashPolicy(t, headerHash("x-b", false))
	wantB, _, _ := justB.Hash(onlyB)
	if h, ok, _ := aThenB.Hash(onlyB); !ok || h != wantB {
		t.Errorf("x-a absent, x-b present: hash %x ok %v, want x-b's hash %x", h, ok, wantB)
	}
	wantA, _, _ := justA.Hash(both)
	combined, ok, _ := aThenB.Hash(both)
	if !ok || combined == wantA || combined == wantB {
		t.Errorf("both present, neither terminal: hash %x ok %v, want a combination of %x and %x", combined, ok, wantA, wantB)
	}

	terminalA := mustHashPolicy(t, headerHash("x-a", true), headerHash("x-b", false))
	if h, ok, _ := terminalA.Hash(both); !ok || h != wantA {
		t.Errorf("terminal x-a present: hash %x ok %v, want x-a's alone %x", h, ok, wantA)
	}
	// A terminal policy that yields nothing does not end the list.
	if h, ok, _ := terminalA.Hash(onlyB); !ok || h != wantB {
		t.Errorf("terminal x-a absent: hash %x ok %v, want x-b's %x", h, ok, wantB)
	}
}

// The Cookie header is split on ';' and ',' (several headers joined), empty
// parts skipped, quotes removed.
func TestHashCookieLookup(t *testing.T) {
	hp := mustHashPolicy(t, cookieHash("s"))
	in := func(cookie string) HashInput {
		return HashInput{Headers: HTTPHeader(http.Header{"Cookie": {cookie}})}
	}
	want, ok, _ := hp.Hash(in("s=v"))
	if !ok {
		t.Fatal(`"s=v": no hash`)
	}
	for _, c := range []string{"a=1;;s=v", "a=1;,s=v", ";s=v", "a=1, s=v", `s="v"`, "a=1; s=v; b=2"} {
		if h, ok, _ := hp.Hash(in(c)); !ok || h != want {
			t.Errorf("Cookie %q: hash %x ok %v, want s=v's %x", c, h, ok, want)
		}
	}
	quoted, _, _ := hp.Hash(in(`s=""`))
	empty, _, _ := hp.Hash(in("s="))
	abc, _, _ := hp.Hash(in("s=abc"))
	b, _, _ := hp.Hash(in("s=b"))
	if quoted != empty || abc == b {
		t.Errorf(`s="" hashes %x, s= %x (want equal); s=abc %x, s=b %x (want different)`, quoted, empty, abc, b)
	}
	for _, c := range []string{"a=1", "a=1; b=2", "ss=v", "s", ""} {
		if h, ok, set := hp.Hash(in(c)); ok || set != "" {
			t.Errorf("Cookie %q without s: hash %x ok %v Set-Cookie %q, want none (no ttl)", c, h, ok, set)
		}
	}
}

func TestHashCookieAttributesRefused(t *testing.T) {
	for _, a := range []*routev3.RouteAction_HashPolicy_CookieAttribute{
		{Value: "x"},
		{Name: "Same;Site", Value: "Lax"},
		{Name: "SameSite", Value: "Lax\r\nX-Evil: 1"},
	} {
		p := cookieHash("s")
		p.GetCookie().Attributes = []*routev3.RouteAction_HashPolicy_CookieAttribute{{Name: "Secure"}, a}
		_, err := compileHashPolicy([]*routev3.RouteAction_HashPolicy{p})
		if err == nil || !strings.Contains(err.Error(), "cookie.attributes[1]") {
			t.Errorf("attribute %q=%q: error %v, want one naming cookie.attributes[1]", a.GetName(), a.GetValue(), err)
		}
	}
}

// query_parameter hashes the first value of the parameter, name and value
// URL-decoded (Envoy's QueryParameterHashMethod).
func TestHashQueryParameter(t *testing.T) {
	hp := mustHashPolicy(t, &routev3.RouteAction_HashPolicy{
		PolicySpecifier: &routev3.RouteAction_HashPolicy_QueryParameter_{QueryParameter: &routev3.RouteAction_HashPolicy_QueryParameter{Name: "id"}},
	})
	hash := func(q string) (uint64, bool) {
		h, ok, _ := hp.Hash(HashInput{Query: q})
		return h, ok
	}
	must := func(h uint64, _ bool) uint64 { return h }
	want, ok := hash("id=a b")
	if !ok {
		t.Fatal(`"id=a b": no hash`)
	}
	for _, q := range []string{"id=a%20b", "?id=a+b", "x=1&i%64=a%20b", "id=a+b&id=c"} {
		if h, ok := hash(q); !ok || h != want {
			t.Errorf("query %q: hash %x ok %v, want id=\"a b\"'s %x", q, h, ok, want)
		}
	}
	// An escape that does not decode is hashed as it stands: %zz is
	// what %25zz decodes to.
	if raw, ok := hash("id=%zz"); !ok || raw != must(hash("id=%25zz")) {
		t.Errorf("id=%%zz: hash %x ok %v, want id=%%25zz's", raw, ok)
	}
	for _, q := range []string{"", "?", "x=1", "idx=1&xid=2", "i%zz=1"} {
		if h, ok := hash(q); ok {
			t.Errorf("query %q without id: hash %x, want none", q, h)
		}
	}
}
