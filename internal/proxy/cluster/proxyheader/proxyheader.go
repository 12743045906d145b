// Package proxyheader is Envoy's upstream PROXY protocol transport
// socket (extensions/transport_sockets/proxy_protocol), which Istio wraps
// around a cluster's transport socket for a DestinationRule's
// proxyProtocol: Unwrap reads and audits the socket, Header makes the
// version 1 or 2 header (haproxy's proxy-protocol.txt) that package
// cluster writes first on each new upstream connection.
package proxyheader

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	proxyprotocolv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/proxy_protocol/v3"

	"github.com/straitmesh/strait/internal/proxy/fieldaudit"
)

// Envoy's upstream PROXY protocol transport socket
// (extensions/transport_sockets/proxy_protocol), which Istio wraps around a
// cluster's transport socket for a DestinationRule's proxyProtocol.
const (
	// SocketName is the transport socket's name.
	SocketName = "envoy.transport_sockets.upstream_proxy_protocol"
	socketType = "type.googleapis.com/envoy.extensions.transport_sockets.proxy_protocol.v3.ProxyProtocolUpstreamTransport"
)

// Version is the PROXY protocol header a cluster writes on its new
// upstream connections; None writes none.
type Version int

// The header versions.
const (
	None Version = iota // no header
	V1                  // version 1, text
	V2                  // version 2, binary
)

// Unwrap returns the transport socket inside an
// upstream_proxy_protocol socket at field and its header version; any
// other socket comes back as it is, with None. Fields strait does not
// implement (pass-through TLVs, TLVs as pool key, unspecified addresses)
// are refused by name.
func Unwrap(field string, ts *corev3.TransportSocket) (*corev3.TransportSocket, Version, error) {
	tc := ts.GetTypedConfig()
	if ts.GetName() != SocketName && tc.GetTypeUrl() != socketType {
		return ts, None, nil
	}
	if tc == nil {
		return nil, None, fmt.Errorf("%s %q: typed_config is missing", field, ts.GetName())
	}
	var pp proxyprotocolv3.ProxyProtocolUpstreamTransport
	if err := tc.UnmarshalTo(&pp); err != nil {
		return nil, None, fmt.Errorf("%s %q: %w", field, ts.GetName(), err)
	}
	f := field + ".typed_config"
	if err := fieldaudit.Only(f, pp.ProtoReflect(), upstreamFields); err != nil {
		return nil, None, err
	}
	if err := fieldaudit.Only(f+".config", pp.GetConfig().ProtoReflect(), configFields); err != nil {
		return nil, None, err
	}
	if pp.GetTransportSocket() == nil {
		return nil, None, fmt.Errorf("%s.transport_socket is required (the socket to wrap, e.g. envoy.transport_sockets.raw_buffer)", f)
	}
	if _, v, _ := Unwrap(f+".transport_socket", pp.GetTransportSocket()); v != None {
		return nil, None, fmt.Errorf("%s.transport_socket: a PROXY protocol socket inside another is not supported", f)
	}
	switch pp.GetConfig().GetVersion() {
	case corev3.ProxyProtocolConfig_V1:
		return pp.GetTransportSocket(), V1, nil
	case corev3.ProxyProtocolConfig_V2:
		return pp.GetTransportSocket(), V2, nil
	}
	return nil, None, fmt.Errorf("%s.config.version %v is not supported (V1 or V2)", f, pp.GetConfig().GetVersion())
}

// v2Signature starts every PROXY protocol v2 header.
var v2Signature = []byte("\r\n\r\n\x00\r\nQUIT\n")

// Header is the PROXY protocol header announcing a downstream connection
// from srcAP to dstAP (its original destination), as Envoy's upstream
// socket writes it (extensions/common/proxy_protocol generateV1Header /
// generateV2Header): without a downstream (a health check: either address
// invalid), or with addresses of different families, v1 says UNKNOWN and
// v2 sends the LOCAL command.
func Header(v Version, srcAP, dstAP netip.AddrPort) []byte {
	src, dst := srcAP.Addr().Unmap(), dstAP.Addr().Unmap()
	known := srcAP.IsValid() && dstAP.IsValid() && src.Is4() == dst.Is4()
	if v == V1 {
		if !known {
			return []byte("PROXY UNKNOWN\r\n")
		}
		proto := "TCP4"
		if !src.Is4() {
			proto = "TCP6"
		}
		return fmt.Appendf(nil, "PROXY %s %s %s %d %d\r\n", proto, src, dst, srcAP.Port(), dstAP.Port())
	}
	h := append([]byte(nil), v2Signature...)
	if !known {
		// Version 2, LOCAL; family UNSPEC; no addresses.
		return append(h, 0x20, 0x00, 0x00, 0x00)
	}
	fam, n := byte(0x11), 12 // TCP over IPv4
	if !src.Is4() {
		fam, n = 0x21, 36 // TCP over IPv6
	}
	h = append(h, 0x21, fam) // version 2, PROXY
	h = binary.BigEndian.AppendUint16(h, uint16(n))
	h = append(h, src.AsSlice()...)
	h = append(h, dst.AsSlice()...)
	h = binary.BigEndian.AppendUint16(h, srcAP.Port())
	return binary.BigEndian.AppendUint16(h, dstAP.Port())
}
