package listener

import (
	"encoding/json"
	"log/slog"
	"net/netip"
	"os"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	origdstv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/original_dst/v3"
	netrbacv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/rbac/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/rbac"
	"github.com/straitmesh/strait/internal/proxy/route"
	"github.com/straitmesh/strait/internal/proxy/stats"
	"github.com/straitmesh/strait/internal/proxy/tlsconf"
)

func networkRBAC(t *testing.T, cfg *netrbacv3.RBAC) *listenerv3.Filter {
	t.Helper()
	a, err := anypb.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &listenerv3.Filter{Name: "envoy.filters.network.rbac", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: a}}
}

// denyPort denies connections to a destination port.
func denyPort(port uint32) *rbacv3.RBAC {
	return &rbacv3.RBAC{Action: rbacv3.RBAC_DENY, Policies: map[string]*rbacv3.Policy{"p": {
		Permissions: []*rbacv3.Permission{{Rule: &rbacv3.Permission_DestinationPort{DestinationPort: port}}},
		Principals:  []*rbacv3.Principal{{Identifier: &rbacv3.Principal_DirectRemoteIp{DirectRemoteIp: &corev3.CidrRange{AddressPrefix: "127.0.0.0", PrefixLen: wrapperspb.UInt32(8)}}}},
	}}}
}

// TestNetworkRBAC: a connection the network RBAC filter denies is closed
// before tcp_proxy connects upstream; others pass; shadow rules never
// close anything.
func TestNetworkRBAC(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	st := stats.New()
	cm := cluster.NewManager(log, st)
	be := nameServer(t, "be")
	if err := cm.AddStatic([]*clusterv3.Cluster{staticCluster("be", be)}); err != nil {
		t.Fatal(err)
	}
	od := &fakeOrigDst{}
	m := NewManager(Options{Logger: log, Stats: st, Routes: route.NewStore(), Clusters: cm, OriginalDst: od.get, Workers: 2})
	t.Cleanup(m.Close)
	chain := func(port uint32, filters ...*listenerv3.Filter) *listenerv3.FilterChain {
		c := tcpChain(t, "be", &listenerv3.FilterChainMatch{DestinationPort: wrapperspb.UInt32(port)})
		c.Filters = append(filters, c.Filters...)
		return c
	}
	odAny, _ := anypb.New(&origdstv3.OriginalDst{})
	ls := []*listenerv3.Listener{{Name: "virtualInbound", Address: addr("127.0.0.1:0"),
		ListenerFilters: []*listenerv3.ListenerFilter{{Name: "envoy.filters.listener.original_dst",
			ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: odAny}}},
		FilterChains: []*listenerv3.FilterChain{
			chain(9001, networkRBAC(t, &netrbacv3.RBAC{StatPrefix: "tcp.", Rules: denyPort(9001)})),
			chain(9002, networkRBAC(t, &netrbacv3.RBAC{StatPrefix: "tcp.", Rules: denyPort(9001)})),
			chain(9003, networkRBAC(t, &netrbacv3.RBAC{StatPrefix: "tcp.", ShadowRules: denyPort(9003), ShadowRulesStatPrefix: "istio_dry_run_deny_"})),
		}}}
	if _, err := m.ApplyLDS("1", ls); err != nil {
		t.Fatal(err)
	}
	in, _ := m.Addr("virtualInbound")
	for _, tc := range []struct {
		dst, want string
	}{
		{"10.0.0.1:9001", "closed"},
		{"10.0.0.1:9002", "be 127.0.0.1"},
		{"10.0.0.1:9003", "be 127.0.0.1"},
	} {
		od.set(tc.dst)
		if got := dialLine(t, in.String()); got != tc.want {
			t.Errorf("to %s: %q, want %q", tc.dst, got, tc.want)
		}
	}
	for name, want := range map[string]uint64{"tcp.rbac.denied": 1, "tcp.rbac.allowed": 1, "tcp.rbac.istio_dry_run_deny_shadow_denied": 1} {
		if n := st.Counter(name).Load(); n != want {
			t.Errorf("%s = %d, want %d", name, n, want)
		}
	}
}

func TestNetworkRBACRefusals(t *testing.T) {
	for _, tc := range []struct {
		name    string
		filters func(t *testing.T) []*listenerv3.Filter
		want    string
	}{
		{"no stat_prefix", func(t *testing.T) []*listenerv3.Filter {
			return []*listenerv3.Filter{networkRBAC(t, &netrbacv3.RBAC{})}
		}, "stat_prefix"},
		{"continuous", func(t *testing.T) []*listenerv3.Filter {
			return []*listenerv3.Filter{networkRBAC(t, &netrbacv3.RBAC{StatPrefix: "x", EnforcementType: netrbacv3.RBAC_CONTINUOUS})}
		}, "enforcement_type"},
		{"delay_deny", func(t *testing.T) []*listenerv3.Filter {
			return []*listenerv3.Filter{networkRBAC(t, &netrbacv3.RBAC{StatPrefix: "x", DelayDeny: durationpb.New(1)})}
		}, "delay_deny"},
		{"bad rules", func(t *testing.T) []*listenerv3.Filter {
			return []*listenerv3.Filter{networkRBAC(t, &netrbacv3.RBAC{StatPrefix: "x", Rules: &rbacv3.RBAC{Policies: map[string]*rbacv3.Policy{"p": {}}}})}
		}, "rules.policies[p].permissions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tcpChain(t, "be", nil)
			c.Filters = append(tc.filters(t), c.Filters...)
			_, err := Build(&listenerv3.Listener{Name: "l", Address: addr("127.0.0.1:0"), FilterChains: []*listenerv3.FilterChain{c}}, Deps{Stats: stats.New()})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "envoy.filters.network.rbac") {
				t.Errorf("Build: %v, want an error naming envoy.filters.network.rbac and %q", err, tc.want)
			}
		})
	}
	// Last in the chain, it is not a terminal filter.
	_, err := Build(&listenerv3.Listener{Name: "l", Address: addr("127.0.0.1:0"), FilterChains: []*listenerv3.FilterChain{{
		Filters: []*listenerv3.Filter{networkRBAC(t, &netrbacv3.RBAC{StatPrefix: "x"})}}}}, Deps{Stats: stats.New()})
	if err == nil || !strings.Contains(err.Error(), "before a terminal filter") {
		t.Errorf("rbac alone: %v", err)
	}
}

// TestGeneratedAuthzListeners: strait-proxy builds the RBAC filters
// straitd generates from AuthorizationPolicies (the authz golden files),
// and their decision on a TCP chain is Istio's: the mesh-wide DENY policy
// whose only condition is a request header denies every TCP connection.
func TestGeneratedAuthzListeners(t *testing.T) {
	for _, pod := range []string{"server", "other"} {
		raw, err := os.ReadFile("../../xds/gen/testdata/authz/golden/" + pod + ".listeners.json")
		if err != nil {
			t.Fatal(err)
		}
		var docs []json.RawMessage
		if err := json.Unmarshal(raw, &docs); err != nil {
			t.Fatal(err)
		}
		prov := tlsconf.NewProvider(tlsconf.ProviderOptions{})
		defer prov.Close()
		var in *Listener
		for _, d := range docs {
			var l listenerv3.Listener
			if err := protojson.Unmarshal(d, &l); err != nil {
				t.Fatal(err)
			}
			b, err := Build(&l, Deps{Stats: stats.New(), Secrets: prov})
			if err != nil {
				t.Fatalf("%s: strait-proxy refuses what straitd generates: %v", pod, err)
			}
			if b.Name == "virtualInbound" {
				in = b
			}
		}
		// A plaintext connection to a port no service declares.
		pass := in.match(netip.MustParseAddrPort("10.94.0.11:7777"), netip.MustParseAddr("10.94.0.10"), inspection{transport: transportRaw})
		if pass == nil || len(pass.rbac) != 2+btoi(pod == "server") {
			t.Fatalf("%s: passthrough chain %+v", pod, pass)
		}
		c := &rbac.Connection{Source: netip.MustParseAddrPort("10.94.0.10:1234"), Destination: netip.MustParseAddrPort("10.94.0.11:7777")}
		if ok, _ := authorizeConnection(pass, c); ok {
			t.Errorf("%s: a TCP connection passed the header-only DENY policy", pod)
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
