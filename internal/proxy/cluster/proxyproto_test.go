package cluster

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/netip"
	"os"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	proxyprotocolv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/proxy_protocol/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/straitmesh/strait/internal/proxy/stats"
)

// TestProxyHeader: the PROXY protocol header bytes (haproxy's
// proxy-protocol.txt) for IPv4, IPv6, IPv4-mapped addresses and no
// downstream.
func TestProxyHeader(t *testing.T) {
	d4 := Downstream{Src: netip.MustParseAddrPort("10.0.0.1:5000"), Dst: netip.MustParseAddrPort("10.0.0.2:80")}
	d6 := Downstream{Src: netip.MustParseAddrPort("[fd00::1]:5000"), Dst: netip.MustParseAddrPort("[fd00::2]:80")}
	mapped := Downstream{Src: netip.MustParseAddrPort("[::ffff:10.0.0.1]:5000"), Dst: netip.MustParseAddrPort("10.0.0.2:80")}
	sig := string(v2Signature)
	for _, tc := range []struct {
		name string
		v    proxyVersion
		d    Downstream
		want string
	}{
		{"v1 ipv4", proxyV1, d4, "PROXY TCP4 10.0.0.1 10.0.0.2 5000 80\r\n"},
		{"v1 ipv6", proxyV1, d6, "PROXY TCP6 fd00::1 fd00::2 5000 80\r\n"},
		{"v1 mapped", proxyV1, mapped, "PROXY TCP4 10.0.0.1 10.0.0.2 5000 80\r\n"},
		{"v1 unknown", proxyV1, Downstream{}, "PROXY UNKNOWN\r\n"},
		{"v2 ipv4", proxyV2, d4, sig + "\x21\x11\x00\x0c\x0a\x00\x00\x01\x0a\x00\x00\x02\x13\x88\x00\x50"},
		{"v2 ipv6", proxyV2, d6, sig + "\x21\x21\x00\x24" +
			"\xfd\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01" +
			"\xfd\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x13\x88\x00\x50"},
		{"v2 local", proxyV2, Downstream{}, sig + "\x20\x00\x00\x00"},
	} {
		if got := proxyHeader(tc.v, tc.d); !bytes.Equal(got, []byte(tc.want)) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestUnwrapProxyProtocol(t *testing.T) {
	wrap := func(pp *proxyprotocolv3.ProxyProtocolUpstreamTransport) *corev3.TransportSocket {
		a, err := anypb.New(pp)
		if err != nil {
			t.Fatal(err)
		}
		return &corev3.TransportSocket{Name: proxyProtocolSocket, ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: a}}
	}
	raw := &corev3.TransportSocket{Name: "envoy.transport_sockets.raw_buffer"}
	for _, tc := range []struct {
		name    string
		ts      *corev3.TransportSocket
		want    proxyVersion
		wantErr string
	}{
		{"none", raw, proxyNone, ""},
		{"v1", wrap(&proxyprotocolv3.ProxyProtocolUpstreamTransport{Config: &corev3.ProxyProtocolConfig{}, TransportSocket: raw}), proxyV1, ""},
		{"v2", wrap(&proxyprotocolv3.ProxyProtocolUpstreamTransport{Config: &corev3.ProxyProtocolConfig{Version: corev3.ProxyProtocolConfig_V2}, TransportSocket: raw}), proxyV2, ""},
		{"tlvs", wrap(&proxyprotocolv3.ProxyProtocolUpstreamTransport{Config: &corev3.ProxyProtocolConfig{PassThroughTlvs: &corev3.ProxyProtocolPassThroughTLVs{}}, TransportSocket: raw}),
			0, "typed_config.config.pass_through_tlvs is not supported"},
		{"unspecified", wrap(&proxyprotocolv3.ProxyProtocolUpstreamTransport{AllowUnspecifiedAddress: true, TransportSocket: raw}),
			0, "typed_config.allow_unspecified_address is not supported"},
		{"no inner socket", wrap(&proxyprotocolv3.ProxyProtocolUpstreamTransport{}), 0, "typed_config.transport_socket is required"},
	} {
		_, v, err := unwrapProxyProtocol("transport_socket", tc.ts)
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: error %v, want %q", tc.name, err, tc.wantErr)
			}
		case err != nil || v != tc.want:
			t.Errorf("%s: version %v, %v; want %v", tc.name, v, err, tc.want)
		}
	}
}

// TestGeneratedProxyProtocolClusters: the clusters straitd generates for
// a DestinationRule subset's proxyProtocol V2 are accepted with their
// transport socket and write v2 headers.
func TestGeneratedProxyProtocolClusters(t *testing.T) {
	data, err := os.ReadFile("../../xds/gen/testdata/trafficpolicy/golden/client.clusters.json")
	if err != nil {
		t.Fatal(err)
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	m := NewManager(slog.New(slog.DiscardHandler), stats.New())
	n := 0
	for _, r := range raw {
		var c clusterv3.Cluster
		if err := protojson.Unmarshal(r, &c); err != nil {
			t.Fatal(err)
		}
		if c.GetTransportSocket().GetName() != proxyProtocolSocket {
			continue
		}
		n++
		out, err := m.build(&c)
		if err != nil {
			t.Fatalf("cluster %s: %v", c.GetName(), err)
		}
		if out.proxyProto != proxyV2 {
			t.Errorf("cluster %s: version %v, want v2", c.GetName(), out.proxyProto)
		}
	}
	if n == 0 {
		t.Fatal("no generated cluster has the upstream_proxy_protocol socket")
	}
}
