package listener

import (
	"strings"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	netrbacv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/rbac/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/straitmesh/strait/internal/proxy/stats"
)

// A network filter is known by its typed_config's type as well as by its
// name, as Envoy picks the factory: an RBAC filter under another name is an
// RBAC filter; a name and type it does not know are refused by name.
func TestNetworkFilterKnownByType(t *testing.T) {
	rb := networkRBAC(t, &netrbacv3.RBAC{StatPrefix: "tcp.", Rules: denyPort(9)})
	rb.Name = "istio.custom_rbac"
	c := tcpChain(t, "be", nil)
	c.Filters = append([]*listenerv3.Filter{rb}, c.Filters...)
	l, err := Build(&listenerv3.Listener{Name: "l", Address: addr("127.0.0.1:0"), FilterChains: []*listenerv3.FilterChain{c}}, Deps{Stats: stats.New()})
	if err != nil {
		t.Fatalf("RBAC filter named %q: %v", rb.Name, err)
	}
	if len(l.chains) != 1 || len(l.chains[0].rbac) != 1 {
		t.Fatalf("RBAC filter named %q: chain built without it", rb.Name)
	}

	unknown, err := anypb.New(&listenerv3.Listener{})
	if err != nil {
		t.Fatal(err)
	}
	c = tcpChain(t, "be", nil)
	c.Filters = append([]*listenerv3.Filter{{Name: "custom.filter", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: unknown}}}, c.Filters...)
	_, err = Build(&listenerv3.Listener{Name: "l", Address: addr("127.0.0.1:0"), FilterChains: []*listenerv3.FilterChain{c}}, Deps{Stats: stats.New()})
	if err == nil || !strings.Contains(err.Error(), `network filter "custom.filter" is not supported`) {
		t.Errorf("unknown filter: %v, want it refused by name", err)
	}
}
