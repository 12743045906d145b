package listener

import (
	"strings"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"

	"github.com/straitmesh/strait/internal/proxy/route"
	"github.com/straitmesh/strait/internal/proxy/stats"
)

// TestUnknownNetworkFilterRefused: a network filter Strait does not run,
// Istio's telemetry filters included, is refused by name, never skipped.
func TestUnknownNetworkFilterRefused(t *testing.T) {
	deps := Deps{Stats: stats.New(), Routes: route.NewStore()}
	for _, name := range []string{"istio.stats", "istio.metadata_exchange", "envoy.filters.network.ext_authz"} {
		chain := tcpChain(t, "InboundPassthroughCluster", nil)
		chain.Filters = append([]*listenerv3.Filter{{Name: name}}, chain.Filters...)
		l := &listenerv3.Listener{Name: "virtualInbound", Address: addr("0.0.0.0:15006"), FilterChains: []*listenerv3.FilterChain{chain}}
		if _, err := Build(l, deps); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: err = %v; want one naming the filter", name, err)
		}
	}
}
