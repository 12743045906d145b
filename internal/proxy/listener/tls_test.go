package listener

import (
	"encoding/json"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tcpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/straitmesh/strait/internal/proxy/stats"
	"github.com/straitmesh/strait/internal/proxy/tlsconf"
)

// TestPermissiveInboundChains builds the virtualInbound straitd generates
// for a workload with a sidecar (its mtls golden file) and checks Istio's
// PERMISSIVE choice on one port: a ClientHello offering an istio ALPN gets
// the chain that terminates mTLS, other TLS the passthrough chain,
// plaintext the plaintext chain.
func TestPermissiveInboundChains(t *testing.T) {
	raw, err := os.ReadFile("../../xds/gen/testdata/mtls/golden/server.listeners.json")
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
			t.Fatalf("strait-proxy refuses what straitd generates: %v", err)
		}
		if b.Name == "virtualInbound" {
			in = b
		}
	}
	if in == nil || !in.TLSInspector || !in.ContinueOnTimeout {
		t.Fatalf("virtualInbound %+v: want tls_inspector, continuing on timeout", in)
	}
	dst := netip.MustParseAddrPort("10.95.0.11:8080")
	for _, tc := range []struct {
		name     string
		in       inspection
		wantTLS  bool
		wantHTTP bool
	}{
		{"istio mTLS", inspection{transport: transportTLS, alpn: []string{"istio-peer-exchange", "istio"}}, true, true},
		{"istio-http/1.1", inspection{transport: transportTLS, alpn: []string{"istio-http/1.1"}}, true, true},
		{"application TLS", inspection{transport: transportTLS, alpn: []string{"h2"}}, false, false},
		{"TLS without ALPN", inspection{transport: transportTLS}, false, false},
		{"plaintext", inspection{transport: transportRaw}, false, true},
	} {
		c := in.match(dst, netip.Addr{}, tc.in)
		if c == nil {
			t.Errorf("%s: no chain", tc.name)
			continue
		}
		if (c.tls != nil) != tc.wantTLS || (c.http != nil) != tc.wantHTTP {
			t.Errorf("%s: chain %q terminates TLS %v, HTTP %v; want %v, %v", tc.name, c.name, c.tls != nil, c.http != nil, tc.wantTLS, tc.wantHTTP)
		}
	}
}

// TestChainTLSRefusals: chain transport socket settings strait-proxy does
// not implement are refused by name.
func TestChainTLSRefusals(t *testing.T) {
	for _, tc := range []struct {
		fc   *listenerv3.FilterChain
		want string
	}{
		{&listenerv3.FilterChain{Name: "x", TransportSocketConnectTimeout: &durationpb.Duration{Seconds: -1}}, "transport_socket_connect_timeout"},
		{&listenerv3.FilterChain{Name: "x", TransportSocket: &corev3.TransportSocket{Name: "envoy.transport_sockets.alts"}}, "envoy.transport_sockets.alts"},
	} {
		if _, err := buildChain(tc.fc, Deps{Stats: stats.New()}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want one naming %s", err, tc.want)
		}
	}
}

// TestTransportSocketConnectTimeout: the chain's timeout bounds its TLS
// handshake; without one, the default bound applies.
func TestTransportSocketConnectTimeout(t *testing.T) {
	hcmChain := func(d *durationpb.Duration) *listenerv3.FilterChain {
		return &listenerv3.FilterChain{Name: "x", TransportSocketConnectTimeout: d, Filters: []*listenerv3.Filter{tcpProxyFilter(t)}}
	}
	c, err := buildChain(hcmChain(durationpb.New(3*time.Second)), Deps{Stats: stats.New()})
	if err != nil || c.handshakeTimeout != 3*time.Second {
		t.Errorf("3s: %v, %v", c, err)
	}
	c, err = buildChain(hcmChain(nil), Deps{Stats: stats.New()})
	if err != nil || c.handshakeTimeout != defaultTLSHandshakeTimeout {
		t.Errorf("unset: %v, %v", c, err)
	}
}

func tcpProxyFilter(t *testing.T) *listenerv3.Filter {
	t.Helper()
	a, err := anypb.New(&tcpv3.TcpProxy{StatPrefix: "x", ClusterSpecifier: &tcpv3.TcpProxy_Cluster{Cluster: "c"}})
	if err != nil {
		t.Fatal(err)
	}
	return &listenerv3.Filter{Name: "envoy.filters.network.tcp_proxy", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: a}}
}
