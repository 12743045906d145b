package proxyheader

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	proxyprotocolv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/proxy_protocol/v3"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/straitmesh/strait/internal/proxy/fieldtest"
)

// TestProxyHeader: the PROXY protocol header bytes (haproxy's
// proxy-protocol.txt) for IPv4, IPv6, IPv4-mapped addresses and no
// downstream.
func TestProxyHeader(t *testing.T) {
	type downstream struct{ src, dst netip.AddrPort }
	d4 := downstream{netip.MustParseAddrPort("10.0.0.1:5000"), netip.MustParseAddrPort("10.0.0.2:80")}
	d6 := downstream{netip.MustParseAddrPort("[fd00::1]:5000"), netip.MustParseAddrPort("[fd00::2]:80")}
	mapped := downstream{netip.MustParseAddrPort("[::ffff:10.0.0.1]:5000"), netip.MustParseAddrPort("10.0.0.2:80")}
	half := downstream{src: netip.MustParseAddrPort("10.0.0.1:5000")}
	half6 := downstream{src: netip.MustParseAddrPort("[fd00::1]:5000")}
	mixed := downstream{netip.MustParseAddrPort("10.0.0.1:5000"), netip.MustParseAddrPort("[fd00::2]:80")}
	sig := string(v2Signature)
	for _, tc := range []struct {
		name string
		v    Version
		d    downstream
		want string
	}{
		{"v1 ipv4", V1, d4, "PROXY TCP4 10.0.0.1 10.0.0.2 5000 80\r\n"},
		{"v1 ipv6", V1, d6, "PROXY TCP6 fd00::1 fd00::2 5000 80\r\n"},
		{"v1 mapped", V1, mapped, "PROXY TCP4 10.0.0.1 10.0.0.2 5000 80\r\n"},
		{"v1 unknown", V1, downstream{}, "PROXY UNKNOWN\r\n"},
		{"v1 one address", V1, half, "PROXY UNKNOWN\r\n"},
		{"v1 one ipv6 address", V1, half6, "PROXY UNKNOWN\r\n"},
		{"v2 one ipv6 address", V2, half6, sig + "\x20\x00\x00\x00"},
		{"v1 mixed families", V1, mixed, "PROXY UNKNOWN\r\n"},
		{"v2 ipv4", V2, d4, sig + "\x21\x11\x00\x0c\x0a\x00\x00\x01\x0a\x00\x00\x02\x13\x88\x00\x50"},
		{"v2 ipv6", V2, d6, sig + "\x21\x21\x00\x24" +
			"\xfd\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01" +
			"\xfd\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x13\x88\x00\x50"},
		{"v2 local", V2, downstream{}, sig + "\x20\x00\x00\x00"},
	} {
		if got := Header(tc.v, tc.d.src, tc.d.dst); !bytes.Equal(got, []byte(tc.want)) {
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
		return &corev3.TransportSocket{Name: SocketName, ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: a}}
	}
	raw := &corev3.TransportSocket{Name: "envoy.transport_sockets.raw_buffer"}
	for _, tc := range []struct {
		name    string
		ts      *corev3.TransportSocket
		want    Version
		wantErr string
	}{
		{"none", raw, None, ""},
		{"v1", wrap(&proxyprotocolv3.ProxyProtocolUpstreamTransport{Config: &corev3.ProxyProtocolConfig{}, TransportSocket: raw}), V1, ""},
		{"v2", wrap(&proxyprotocolv3.ProxyProtocolUpstreamTransport{Config: &corev3.ProxyProtocolConfig{Version: corev3.ProxyProtocolConfig_V2}, TransportSocket: raw}), V2, ""},
		{"tlvs", wrap(&proxyprotocolv3.ProxyProtocolUpstreamTransport{Config: &corev3.ProxyProtocolConfig{PassThroughTlvs: &corev3.ProxyProtocolPassThroughTLVs{}}, TransportSocket: raw}),
			0, "typed_config.config.pass_through_tlvs is not supported"},
		{"unspecified", wrap(&proxyprotocolv3.ProxyProtocolUpstreamTransport{AllowUnspecifiedAddress: true, TransportSocket: raw}),
			0, "typed_config.allow_unspecified_address is not supported"},
		{"no inner socket", wrap(&proxyprotocolv3.ProxyProtocolUpstreamTransport{}), 0, "typed_config.transport_socket is required"},
	} {
		_, v, err := Unwrap("transport_socket", tc.ts)
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

// The socket's allow-lists name only real fields.
func TestFields(t *testing.T) {
	for _, c := range []struct {
		m    protoreflect.ProtoMessage
		list map[protoreflect.Name]bool
	}{
		{&proxyprotocolv3.ProxyProtocolUpstreamTransport{}, upstreamFields},
		{&corev3.ProxyProtocolConfig{}, configFields},
	} {
		fieldtest.Known(t, c.m.ProtoReflect().Descriptor(), c.list)
	}
}
