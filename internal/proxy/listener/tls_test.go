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
// PERMISSIVE choice: a ClientHello offering an istio ALPN gets the chain
// that terminates mTLS, plaintext the plaintext chain; other TLS is passed
// through on a TCP port and matches nothing (the connection is closed) on
// an HTTP port, where the chains of the port hide the passthrough chains
// (Envoy's matcher does not back track to chains without a port).
func TestPermissiveInboundChains(t *testing.T) {
	in := generatedInbound(t, "mtls", "server")
	if !in.TLSInspector || !in.ContinueOnTimeout {
		t.Fatalf("virtualInbound %+v: want tls_inspector, continuing on timeout", in)
	}
	http := netip.MustParseAddrPort("10.95.0.11:8080")
	tcp := netip.MustParseAddrPort("10.95.0.11:9000")
	other := netip.MustParseAddrPort("10.95.0.11:7777")
	for _, tc := range []struct {
		name     string
		dst      netip.AddrPort
		in       inspection
		wantName string // "" when no chain may match
		wantTLS  bool
		wantHTTP bool
	}{
		{"istio mTLS", http, inspection{transport: transportTLS, alpn: []string{"istio-peer-exchange", "istio"}}, "inbound|8080||", true, true},
		{"istio-http/1.1", http, inspection{transport: transportTLS, alpn: []string{"istio-http/1.1"}}, "inbound|8080||", true, true},
		{"application TLS to HTTP", http, inspection{transport: transportTLS, alpn: []string{"h2"}}, "", false, false},
		{"TLS without ALPN to HTTP", http, inspection{transport: transportTLS}, "", false, false},
		{"plaintext", http, inspection{transport: transportRaw}, "inbound|8080||", false, true},
		{"application TLS to TCP", tcp, inspection{transport: transportTLS, alpn: []string{"h2"}}, "inbound|9000||", false, false},
		{"istio mTLS to TCP", tcp, inspection{transport: transportTLS, alpn: []string{"istio"}}, "inbound|9000||", true, false},
		{"plaintext to an undeclared port", other, inspection{transport: transportRaw}, "InboundPassthroughFilterChain", false, false},
		{"istio mTLS to an undeclared port", other, inspection{transport: transportTLS, alpn: []string{"istio"}}, "InboundPassthroughFilterChain", true, false},
	} {
		c := in.match(tc.dst, netip.Addr{}, tc.in)
		if tc.wantName == "" {
			if c != nil {
				t.Errorf("%s: chain %q, want none (connection closed)", tc.name, c.name)
			}
			continue
		}
		if c == nil {
			t.Errorf("%s: no chain", tc.name)
			continue
		}
		if c.name != tc.wantName || (c.tls != nil) != tc.wantTLS || (c.http != nil) != tc.wantHTTP {
			t.Errorf("%s: chain %q terminates TLS %v, HTTP %v; want %q, %v, %v", tc.name, c.name, c.tls != nil, c.http != nil, tc.wantName, tc.wantTLS, tc.wantHTTP)
		}
	}
}

// TestPeerAuthenticationInboundChains runs the chains straitd generates
// per PeerAuthentication mode (its peerauthn golden files) through the
// matcher: under STRICT plaintext matches nothing, on declared and
// undeclared ports alike; under DISABLE TLS matches nothing; a port-level
// DISABLE takes plaintext on a PERMISSIVE workload.
func TestPeerAuthenticationInboundChains(t *testing.T) {
	mtls := inspection{transport: transportTLS, alpn: []string{"istio-peer-exchange", "istio"}}
	plain := inspection{transport: transportRaw}
	for _, tc := range []struct {
		pod, dst string
		in       inspection
		wantName string
		wantTLS  bool
	}{
		{"strict", "10.94.0.11:8080", plain, "", false},
		{"strict", "10.94.0.11:9000", plain, "", false},
		{"strict", "10.94.0.11:7777", plain, "", false},
		{"strict", "10.94.0.11:8080", mtls, "inbound|8080||", true},
		{"strict", "10.94.0.11:7777", mtls, "InboundPassthroughFilterChain", true},
		{"perm", "10.94.0.12:9000", plain, "inbound|9000||", false},
		{"perm", "10.94.0.12:9000", mtls, "", false},
		{"perm", "10.94.0.12:8080", plain, "inbound|8080||", false},
		{"perm", "10.94.0.12:7070", plain, "", false},
		{"perm", "10.94.0.12:7071", plain, "InboundPassthroughFilterChain", false},
		{"plain", "10.94.0.13:8080", plain, "inbound|8080||", false},
		{"plain", "10.94.0.13:8080", mtls, "", false},
	} {
		in := generatedInbound(t, "peerauthn", tc.pod)
		c := in.match(netip.MustParseAddrPort(tc.dst), netip.Addr{}, tc.in)
		switch {
		case tc.wantName == "" && c != nil:
			t.Errorf("%s %s %s: chain %q, want none (connection closed)", tc.pod, tc.dst, tc.in.transport, c.name)
		case tc.wantName != "" && c == nil:
			t.Errorf("%s %s %s: no chain, want %q", tc.pod, tc.dst, tc.in.transport, tc.wantName)
		case c != nil && (c.name != tc.wantName || (c.tls != nil) != tc.wantTLS):
			t.Errorf("%s %s %s: chain %q (TLS %v), want %q (TLS %v)", tc.pod, tc.dst, tc.in.transport, c.name, c.tls != nil, tc.wantName, tc.wantTLS)
		}
	}
}

// generatedInbound builds virtualInbound from a golden file of straitd's
// generator (testdata/DIR/golden/POD.listeners.json).
func generatedInbound(t *testing.T, dir, pod string) *Listener {
	t.Helper()
	raw, err := os.ReadFile("../../xds/gen/testdata/" + dir + "/golden/" + pod + ".listeners.json")
	if err != nil {
		t.Fatal(err)
	}
	var docs []json.RawMessage
	if err := json.Unmarshal(raw, &docs); err != nil {
		t.Fatal(err)
	}
	prov := tlsconf.NewProvider(tlsconf.ProviderOptions{})
	t.Cleanup(prov.Close)
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
			return b
		}
	}
	t.Fatalf("no virtualInbound in %s/%s", dir, pod)
	return nil
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
