package listener

import (
	"fmt"
	"net/netip"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"

	"github.com/straitmesh/strait/internal/proxy/hcm"
	"github.com/straitmesh/strait/internal/proxy/tcpproxy"
)

// filterChain is one built filter chain. Exactly one of tcp and http is set.
type filterChain struct {
	name      string
	isDefault bool // no filter_chain_match criteria
	port      uint32
	prefixes  []netip.Prefix
	tcp       *tcpproxy.Filter
	http      *hcm.Filter
}

func buildChain(fc *listenerv3.FilterChain, d Deps) (*filterChain, error) {
	if ts := fc.GetTransportSocket(); ts != nil && ts.GetName() != "envoy.transport_sockets.raw_buffer" {
		return nil, fmt.Errorf("transport_socket %q is not supported", ts.GetName())
	}
	c := &filterChain{name: fc.GetName()}
	m := fc.GetFilterChainMatch()
	if m == nil {
		c.isDefault = true
	} else {
		switch tp := m.GetTransportProtocol(); tp {
		case "", "raw_buffer":
		default:
			return nil, fmt.Errorf("filter_chain_match.transport_protocol %q is not supported", tp)
		}
		if len(m.GetServerNames()) > 0 || len(m.GetApplicationProtocols()) > 0 ||
			len(m.GetSourcePrefixRanges()) > 0 || len(m.GetDirectSourcePrefixRanges()) > 0 ||
			len(m.GetSourcePorts()) > 0 || m.GetSourceType() != listenerv3.FilterChainMatch_ANY ||
			m.GetAddressSuffix() != "" || m.GetSuffixLen() != nil {
			return nil, fmt.Errorf("filter_chain_match: only destination_port and prefix_ranges are supported")
		}
		c.port = m.GetDestinationPort().GetValue()
		for _, pr := range m.GetPrefixRanges() {
			ip, err := netip.ParseAddr(pr.GetAddressPrefix())
			if err != nil {
				return nil, fmt.Errorf("prefix_ranges: %q is not an IP", pr.GetAddressPrefix())
			}
			bits := ip.BitLen()
			if pl := pr.GetPrefixLen(); pl != nil {
				bits = int(pl.GetValue())
			}
			p, err := ip.Unmap().Prefix(bits)
			if err != nil {
				return nil, fmt.Errorf("prefix_ranges: %s/%d: %w", ip, bits, err)
			}
			c.prefixes = append(c.prefixes, p)
		}
		c.isDefault = c.port == 0 && len(c.prefixes) == 0
	}
	if err := buildFilters(fc, c, d); err != nil {
		return nil, err
	}
	return c, nil
}

// match returns the most specific filter chain for a destination: chains
// matching the destination port beat chains without a port; then the
// longest matching destination prefix wins; a chain without criteria is
// the default. Returns nil when nothing matches.
func (l *Listener) match(dst netip.AddrPort) *filterChain {
	var best *filterChain
	bestPort, bestLen := false, -1
	ip := dst.Addr().Unmap()
	for _, c := range l.chains {
		portMatch := false
		if c.port != 0 {
			if c.port != uint32(dst.Port()) {
				continue
			}
			portMatch = true
		}
		plen := -1
		if len(c.prefixes) > 0 {
			for _, p := range c.prefixes {
				if p.Contains(ip) && p.Bits() > plen {
					plen = p.Bits()
				}
			}
			if plen < 0 {
				continue
			}
		}
		if best == nil || (portMatch && !bestPort) || (portMatch == bestPort && plen > bestLen) {
			best, bestPort, bestLen = c, portMatch, plen
		}
	}
	if best != nil {
		return best
	}
	return l.defaultChain
}
