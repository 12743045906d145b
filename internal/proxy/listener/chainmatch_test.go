package listener

import (
	"net/netip"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"

	"github.com/straitmesh/strait/internal/proxy/stats"
)

// server_names holds names and "*." wildcards with one '*' (Envoy's
// FilterChainMatch: "*.example.com" and the like); anything else is refused
// by name when the listener is built.
func TestServerNamesRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"a.example.com", true},
		{"*.example.com", true},
		{"*.B.Example.com", true},
		{"", false},
		{"a*.example.com", false},
		{"*example.com", false},
		{"*.*.example.com", false},
		{"a.*.com", false},
		{"*", false},
	} {
		_, err := Build(&listenerv3.Listener{Name: "sni", Address: addr("127.0.0.1:1"), FilterChains: []*listenerv3.FilterChain{
			namedChain(t, "c", &listenerv3.FilterChainMatch{ServerNames: []string{"ok.example.com", tc.name}}),
		}}, Deps{Stats: stats.New()})
		switch {
		case tc.ok && err != nil:
			t.Errorf("server_names %q: %v", tc.name, err)
		case !tc.ok && (err == nil || !strings.Contains(err.Error(), "filter_chain_match.server_names "+`"`+strings.ToLower(tc.name)+`"`)):
			t.Errorf("server_names %q: error %v, want one naming it", tc.name, err)
		}
	}
}

// A "*." wildcard needs at least one character before its dot: the SNI
// ".example.com" is not under "*.example.com".
func TestServerNameWildcardNeedsALabel(t *testing.T) {
	l := &Listener{
		chains:       []*filterChain{{name: "wild", serverNames: []string{"*.example.com"}}},
		defaultChain: &filterChain{name: "default"},
	}
	dst := netip.MustParseAddrPort("240.0.0.1:443")
	for sni, want := range map[string]string{"a.example.com": "wild", ".example.com": "default", "example.com": "default"} {
		if got := l.match(dst, netip.Addr{}, inspection{sni: sni, transport: transportTLS}); got == nil || got.name != want {
			t.Errorf("SNI %q matched %v, want %s", sni, got, want)
		}
	}
}

// A present but empty filter_chain_match is no match at all: two chains
// with none, either way, are refused.
func TestTwoChainsWithoutMatchRefused(t *testing.T) {
	for name, ms := range map[string][2]*listenerv3.FilterChainMatch{
		"both empty":     {{}, {}},
		"empty and none": {{}, nil},
	} {
		_, err := Build(&listenerv3.Listener{Name: "two", Address: addr("127.0.0.1:1"), FilterChains: []*listenerv3.FilterChain{
			namedChain(t, "a", ms[0]), namedChain(t, "b", ms[1]),
		}}, Deps{Stats: stats.New()})
		if err == nil || !strings.Contains(err.Error(), "more than one filter chain without filter_chain_match") {
			t.Errorf("%s: error %v, want the chains without a match refused", name, err)
		}
	}
	// One chain with only source ranges next to one without a match is fine.
	if _, err := Build(&listenerv3.Listener{Name: "src", Address: addr("127.0.0.1:1"), FilterChains: []*listenerv3.FilterChain{
		namedChain(t, "a", &listenerv3.FilterChainMatch{SourcePrefixRanges: []*corev3.CidrRange{cidr("10.0.0.0", 8)}}), namedChain(t, "b", &listenerv3.FilterChainMatch{}),
	}}, Deps{Stats: stats.New()}); err != nil {
		t.Errorf("source ranges and an empty match: %v", err)
	}
}
