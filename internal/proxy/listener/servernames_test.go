package listener

import (
	"strings"
	"testing"

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
