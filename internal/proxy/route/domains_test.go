package route

import (
	"strings"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
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
