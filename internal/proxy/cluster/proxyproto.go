package cluster

import (
	"encoding/binary"
	"fmt"
	"io"
	"net/netip"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	proxyprotocolv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/proxy_protocol/v3"

	"github.com/straitmesh/strait/internal/proxy/fieldaudit"
)

// Envoy's upstream PROXY protocol transport socket
// (extensions/transport_sockets/proxy_protocol), which Istio wraps around a
// cluster's transport socket for a DestinationRule's proxyProtocol.
const (
	proxyProtocolSocket = "envoy.transport_sockets.upstream_proxy_protocol"
	proxyProtocolType   = "type.googleapis.com/envoy.extensions.transport_sockets.proxy_protocol.v3.ProxyProtocolUpstreamTransport"
)

// proxyVersion is the PROXY protocol header a cluster writes on its new
// upstream connections; proxyNone writes none.
type proxyVersion int

const (
	proxyNone proxyVersion = iota
	proxyV1
	proxyV2
)

// Downstream is the address pair of a downstream connection: its peer
// (Src) and the address it was sent to (Dst, the original destination).
type Downstream struct {
	Src, Dst netip.AddrPort
}

// IsValid reports whether d carries both addresses.
func (d Downstream) IsValid() bool { return d.Src.IsValid() && d.Dst.IsValid() }

// connOwner is what an upstream connection belongs to beyond its
// endpoint: an original source, a downstream announced by PROXY protocol,
// or neither (then it is shared by every request). Pools key on it.
type connOwner struct {
	Source     OriginalSource
	Downstream Downstream
}

func (o connOwner) isValid() bool { return o.Source.IsValid() || o.Downstream.IsValid() }

// owner is ep's connOwner; Downstream only matters (and only splits the
// pool) for a cluster that writes PROXY headers, so callers set it only
// then (Cluster.ProxyProtocol).
func (ep Endpoint) owner() connOwner { return connOwner{ep.Source, ep.Downstream} }

// ProxyProtocol reports whether the cluster writes a PROXY protocol
// header on its upstream connections: callers then set Endpoint.Downstream.
func (c *Cluster) ProxyProtocol() bool { return c.proxyProto != proxyNone }

// unwrapProxyProtocol returns the transport socket inside an
// upstream_proxy_protocol socket at field and its header version; any
// other socket comes back as it is, with proxyNone. Fields strait does not
// implement (pass-through TLVs, TLVs as pool key, unspecified addresses)
// are refused by name.
func unwrapProxyProtocol(field string, ts *corev3.TransportSocket) (*corev3.TransportSocket, proxyVersion, error) {
	tc := ts.GetTypedConfig()
	if ts.GetName() != proxyProtocolSocket && tc.GetTypeUrl() != proxyProtocolType {
		return ts, proxyNone, nil
	}
	if tc == nil {
		return nil, proxyNone, fmt.Errorf("%s %q: typed_config is missing", field, ts.GetName())
	}
	var pp proxyprotocolv3.ProxyProtocolUpstreamTransport
	if err := tc.UnmarshalTo(&pp); err != nil {
		return nil, proxyNone, fmt.Errorf("%s %q: %w", field, ts.GetName(), err)
	}
	f := field + ".typed_config"
	if err := fieldaudit.Only(f, pp.ProtoReflect(), proxyProtocolUpstreamFields); err != nil {
		return nil, proxyNone, err
	}
	if err := fieldaudit.Only(f+".config", pp.GetConfig().ProtoReflect(), proxyProtocolConfigFields); err != nil {
		return nil, proxyNone, err
	}
	if pp.GetTransportSocket() == nil {
		return nil, proxyNone, fmt.Errorf("%s.transport_socket is required (the socket to wrap, e.g. envoy.transport_sockets.raw_buffer)", f)
	}
	if _, v, _ := unwrapProxyProtocol(f+".transport_socket", pp.GetTransportSocket()); v != proxyNone {
		return nil, proxyNone, fmt.Errorf("%s.transport_socket: a PROXY protocol socket inside another is not supported", f)
	}
	switch pp.GetConfig().GetVersion() {
	case corev3.ProxyProtocolConfig_V1:
		return pp.GetTransportSocket(), proxyV1, nil
	case corev3.ProxyProtocolConfig_V2:
		return pp.GetTransportSocket(), proxyV2, nil
	}
	return nil, proxyNone, fmt.Errorf("%s.config.version %v is not supported (V1 or V2)", f, pp.GetConfig().GetVersion())
}

// v2Signature starts every PROXY protocol v2 header.
var v2Signature = []byte("\r\n\r\n\x00\r\nQUIT\n")

// proxyHeader is the PROXY protocol header announcing d, as Envoy's
// upstream socket writes it (extensions/common/proxy_protocol
// generateV1Header / generateV2Header): without a downstream (a health
// check), or with addresses of different families, v1 says UNKNOWN and
// v2 sends the LOCAL command.
func proxyHeader(v proxyVersion, d Downstream) []byte {
	src, dst := d.Src.Addr().Unmap(), d.Dst.Addr().Unmap()
	known := d.IsValid() && src.Is4() == dst.Is4()
	if v == proxyV1 {
		if !known {
			return []byte("PROXY UNKNOWN\r\n")
		}
		proto := "TCP4"
		if !src.Is4() {
			proto = "TCP6"
		}
		return fmt.Appendf(nil, "PROXY %s %s %s %d %d\r\n", proto, src, dst, d.Src.Port(), d.Dst.Port())
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
	h = binary.BigEndian.AppendUint16(h, d.Src.Port())
	return binary.BigEndian.AppendUint16(h, d.Dst.Port())
}

// writeProxyHeader sends the cluster's PROXY header for d on a new
// connection, before any other byte (and before TLS).
func (c *Cluster) writeProxyHeader(w io.Writer, d Downstream) error {
	if c.proxyProto == proxyNone {
		return nil
	}
	if _, err := w.Write(proxyHeader(c.proxyProto, d)); err != nil {
		return fmt.Errorf("cluster %s: write PROXY protocol header: %w", c.Name, err)
	}
	return nil
}
