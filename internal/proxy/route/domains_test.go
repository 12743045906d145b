package route

import (
	"net/http"
	"strings"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
)

// Envoy's RouteMatcher refuses a domain that appears twice, wildcards
// included ("Only unique values for domains are permitted"), in two virtual
// hosts or in one.
func TestDuplicateDomainsRefused(t *testing.T) {
	vh := func(name string, domains ...string) *routev3.VirtualHost {
		return &routev3.VirtualHost{Name: name, Domains: domains, Routes: []*routev3.Route{to(name, prefix("/"))}}
	}
	for _, tc := range []struct {
		name string
		vhs  []*routev3.VirtualHost
		dup  string // "" means accepted
	}{
		{"exact", []*routev3.VirtualHost{vh("a", "a.example"), vh("b", "A.example")}, "a.example"},
		{"suffix", []*routev3.VirtualHost{vh("a", "*.example.com"), vh("b", "*.Example.com")}, "*.example.com"},
		{"prefix", []*routev3.VirtualHost{vh("a", "api.*"), vh("b", "api.*")}, "api.*"},
		{"any", []*routev3.VirtualHost{vh("a", "*"), vh("b", "*")}, "*"},
		{"suffix in one virtual host", []*routev3.VirtualHost{vh("a", "*.x.com", "*.x.com")}, "*.x.com"},
		{"same length, different", []*routev3.VirtualHost{vh("a", "*.a.com", "api.*"), vh("b", "*.b.com", "web.*")}, ""},
		{"suffix and exact of one name", []*routev3.VirtualHost{vh("a", "*.example.com"), vh("b", ".example.com"), vh("c", "example.*")}, ""},
	} {
		_, err := Compile(&routev3.RouteConfiguration{Name: "r", VirtualHosts: tc.vhs})
		switch {
		case tc.dup == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.dup != "" && (err == nil || !strings.Contains(err.Error(), `domain "`+tc.dup+`" appears in more than one virtual host`)):
			t.Errorf("%s: error %v, want one naming domain %q", tc.name, err, tc.dup)
		}
	}
}

// A wildcard matches only a host longer than its fixed part, and a host
// that matches no domain goes to "*" whatever its length (Envoy's
// RouteMatcher::findWildcardVirtualHost).
func TestWildcardDomainNeedsALongerHost(t *testing.T) {
	tb, err := Compile(&routev3.RouteConfiguration{Name: "r", VirtualHosts: []*routev3.VirtualHost{
		{Name: "suffix", Domains: []string{"*.example.com"}, Routes: []*routev3.Route{to("s", prefix("/"))}},
		{Name: "prefix", Domains: []string{"api.*"}, Routes: []*routev3.Route{to("p", prefix("/"))}},
		{Name: "any", Domains: []string{"*"}, Routes: []*routev3.Route{to("a", prefix("/"))}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]string{
		"a.example.com":                     "suffix",
		".example.com":                      "any", // the suffix needs one more character
		"api.":                              "any",
		"api.x":                             "prefix",
		"a-long-host-name.other.org":        "any",
		"another-long-host.example.org":     "any",
		"a-very-long-host-name.example.com": "suffix",
		"x":                                 "any",
	} {
		if vh := tb.VirtualHostFor(host); vh == nil || vh.Name != want {
			t.Errorf("host %q selects %v, want %s", host, vh, want)
		}
	}
}

// CompileHeaderMatch, which the RBAC filter uses, compiles a route header
// matcher (pseudo-headers included) and refuses what compileHeader refuses.
func TestCompileHeaderMatch(t *testing.T) {
	hm, err := CompileHeaderMatch(&routev3.HeaderMatcher{Name: ":method", HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{
		StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "GET"}}}})
	if err != nil || hm == nil {
		t.Fatalf("CompileHeaderMatch(:method exact GET) = %v, %v", hm, err)
	}
	if !hm.Matches(&Request{Method: "GET"}) || hm.Matches(&Request{Method: "POST"}) {
		t.Error(":method exact GET: want GET matched and POST not")
	}
	if hm, err := CompileHeaderMatch(&routev3.HeaderMatcher{Name: ":status"}); err == nil || hm != nil {
		t.Errorf("CompileHeaderMatch(:status) = %v, %v; want an error", hm, err)
	}
	if _, err := CompileHeaderMatch(&routev3.HeaderMatcher{}); err == nil {
		t.Error("CompileHeaderMatch without a name: want an error")
	}
	p, err := CompileHeaderMatch(&routev3.HeaderMatcher{Name: "x-user"})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Matches(&Request{Headers: HTTPHeader(http.Header{"X-User": {""}})}) || p.Matches(&Request{}) {
		t.Error("x-user without a specifier: want presence matched")
	}
}

// With ignore_port_in_host_matching a Host that is only ":port" is the
// empty host, as Envoy's HeaderUtility::getPortStart finds the port at
// index 0; the empty domain is a domain Envoy accepts.
func TestIgnorePortLeavesEmptyHost(t *testing.T) {
	tb, err := Compile(&routev3.RouteConfiguration{Name: "r", IgnorePortInHostMatching: true, VirtualHosts: []*routev3.VirtualHost{
		{Name: "empty", Domains: []string{""}, Routes: []*routev3.Route{to("e", prefix("/"))}},
		{Name: "any", Domains: []string{"*"}, Routes: []*routev3.Route{to("a", prefix("/"))}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]string{":80": "empty", "": "empty", "x:80": "any"} {
		if vh := tb.VirtualHostFor(host); vh == nil || vh.Name != want {
			t.Errorf("host %q selects %v, want %s", host, vh, want)
		}
	}
}
