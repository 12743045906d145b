package listener

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"

	"github.com/straitmesh/strait/internal/proxy/hcm"
	"github.com/straitmesh/strait/internal/proxy/rbac"
	"github.com/straitmesh/strait/internal/proxy/tcpproxy"
	"github.com/straitmesh/strait/internal/proxy/tlsconf"
)

// filterChain is one built filter chain. Exactly one of tcp and http is set.
type filterChain struct {
	name string
	// config is the chain's config: an in-place listener update keeps the
	// chains whose config is unchanged (adoptChains).
	config *listenerv3.FilterChain
	// drain ends the connections served on this chain gracefully once
	// the chain is drained: its listener version replaced or removed, the
	// chain dropped by an in-place update, or an admin drain (hcm.Drain).
	// An in-place update hands the chain, drain and all, to the new
	// listener version.
	drain     *hcm.Drain
	isDefault bool // no filter_chain_match criteria
	port      uint32
	prefixes  []netip.Prefix
	// sources are source_prefix_ranges: the peer's address must fall in
	// one of them.
	sources     []netip.Prefix
	serverNames []string        // lower case; "*.example.com" is a wildcard
	transport   string          // transport_protocol: "", "tls" or "raw_buffer"
	alpn        []string        // application_protocols
	tls         *tlsconf.Server // transport_socket TLS (buildChainTLS); nil: plaintext
	// handshakeTimeout bounds the TLS handshake (terminateTLS).
	handshakeTimeout time.Duration
	// rbac are the envoy.filters.network.rbac filters before the terminal
	// one, in order (Manager.serve).
	rbac []*rbac.Filter
	tcp  *tcpproxy.Filter
	http *hcm.Filter
	// istio is what Istio's network filters ask of the chain (istio.go).
	istio istioChain
	// rdsFetchTimeout is the initial_fetch_timeout of http's RDS config
	// source (routeDeps): how long a listener version warms waiting for
	// the route configuration; 0 waits for ever.
	rdsFetchTimeout time.Duration
}

func buildChain(fc *listenerv3.FilterChain, d Deps) (*filterChain, error) {
	c := &filterChain{name: fc.GetName(), config: fc, drain: hcm.NewDrain()}
	if err := buildChainTLS(fc, c, d); err != nil {
		return nil, err
	}
	m := fc.GetFilterChainMatch()
	if m == nil {
		c.isDefault = true
	} else {
		switch tp := m.GetTransportProtocol(); tp {
		case "", transportRaw, transportTLS:
			c.transport = tp
		default:
			return nil, fmt.Errorf("filter_chain_match.transport_protocol %q is not supported (want raw_buffer or tls)", tp)
		}
		// The fields the levels below do not read are refused by
		// checkFilterChainFields.
		c.alpn = m.GetApplicationProtocols()
		for _, n := range m.GetServerNames() {
			n = strings.ToLower(n)
			if n == "" || (strings.Contains(n, "*") && !(strings.HasPrefix(n, "*.") && strings.Count(n, "*") == 1)) {
				return nil, fmt.Errorf("filter_chain_match.server_names %q is not a name or a \"*.\" wildcard", n)
			}
			c.serverNames = append(c.serverNames, n)
		}
		c.port = m.GetDestinationPort().GetValue()
		var err error
		if c.prefixes, err = cidrPrefixes("prefix_ranges", m.GetPrefixRanges()); err != nil {
			return nil, err
		}
		if c.sources, err = cidrPrefixes("source_prefix_ranges", m.GetSourcePrefixRanges()); err != nil {
			return nil, err
		}
		c.isDefault = c.port == 0 && len(c.prefixes) == 0 && len(c.serverNames) == 0 && c.transport == "" && len(c.alpn) == 0 && len(c.sources) == 0
	}
	if err := buildFilters(fc, c, d); err != nil {
		return nil, err
	}
	return c, nil
}

// cidrPrefixes turns the CidrRanges of the filter_chain_match field named
// field into prefixes.
func cidrPrefixes(field string, ranges []*corev3.CidrRange) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, pr := range ranges {
		ip, err := netip.ParseAddr(pr.GetAddressPrefix())
		if err != nil {
			return nil, fmt.Errorf("filter_chain_match.%s: %q is not an IP address", field, pr.GetAddressPrefix())
		}
		bits := ip.BitLen()
		if pl := pr.GetPrefixLen(); pl != nil {
			bits = int(pl.GetValue())
		}
		p, err := ip.Unmap().Prefix(bits)
		if err != nil {
			return nil, fmt.Errorf("filter_chain_match.%s: %s/%d: %w", field, ip, bits, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// match returns the filter chain for a connection, narrowing the chains
// level by level as Envoy's filter chain matcher does
// (source/common/listener_manager/filter_chain_manager_impl.cc): the
// destination port (chains naming it, else chains with none), the
// destination IP (the longest matching prefix, else chains with none), the
// server name (an exact name, else the longest matching "*." wildcard, else
// chains with none), then the transport protocol, then the application
// protocols (a chain naming one the client offers in its ALPN, else chains
// with none), then the source IP src (the longest matching
// source_prefix_ranges entry, else chains with none). When a level leaves
// nothing, the default chain serves the connection (nil if none).
func (l *Listener) match(dst netip.AddrPort, src netip.Addr, in inspection) *filterChain {
	cands := l.chains
	narrow := func(keep func(c *filterChain) bool) {
		out := cands[:0:0]
		for _, c := range cands {
			if keep(c) {
				out = append(out, c)
			}
		}
		cands = out
	}
	port := uint32(dst.Port())
	if slices.ContainsFunc(cands, func(c *filterChain) bool { return c.port == port }) {
		narrow(func(c *filterChain) bool { return c.port == port })
	} else {
		narrow(func(c *filterChain) bool { return c.port == 0 })
	}
	ip := dst.Addr().Unmap()
	best := -1
	for _, c := range cands {
		if n := longestPrefix(c.prefixes, ip); n > best {
			best = n
		}
	}
	if best >= 0 {
		narrow(func(c *filterChain) bool { return longestPrefix(c.prefixes, ip) == best })
	} else {
		narrow(func(c *filterChain) bool { return len(c.prefixes) == 0 })
	}
	sni := strings.ToLower(in.sni)
	best = -1
	for _, c := range cands {
		if n := serverNameMatch(c.serverNames, sni); n > best {
			best = n
		}
	}
	if best >= 0 {
		narrow(func(c *filterChain) bool { return serverNameMatch(c.serverNames, sni) == best })
	} else {
		narrow(func(c *filterChain) bool { return len(c.serverNames) == 0 })
	}
	transport := in.transport
	if transport == "" {
		transport = transportRaw
	}
	if slices.ContainsFunc(cands, func(c *filterChain) bool { return c.transport == transport }) {
		narrow(func(c *filterChain) bool { return c.transport == transport })
	} else {
		narrow(func(c *filterChain) bool { return c.transport == "" })
	}
	alpnMatch := func(c *filterChain) bool {
		return slices.ContainsFunc(c.alpn, func(p string) bool { return slices.Contains(in.alpn, p) })
	}
	if slices.ContainsFunc(cands, alpnMatch) {
		narrow(alpnMatch)
	} else {
		narrow(func(c *filterChain) bool { return len(c.alpn) == 0 })
	}
	src = src.Unmap()
	best = -1
	for _, c := range cands {
		if n := longestPrefix(c.sources, src); n > best {
			best = n
		}
	}
	if best >= 0 {
		narrow(func(c *filterChain) bool { return longestPrefix(c.sources, src) == best })
	} else {
		narrow(func(c *filterChain) bool { return len(c.sources) == 0 })
	}
	if len(cands) > 0 {
		return cands[0]
	}
	return l.defaultChain
}

// longestPrefix is the length of the longest of prefixes containing ip, or
// -1 when none does.
func longestPrefix(prefixes []netip.Prefix, ip netip.Addr) int {
	best := -1
	for _, p := range prefixes {
		if p.Contains(ip) && p.Bits() > best {
			best = p.Bits()
		}
	}
	return best
}

// serverNameMatch scores how a chain's server_names match sni: an exact
// name beats any wildcard, a longer wildcard beats a shorter one; -1 when
// none matches (or there is no SNI).
func serverNameMatch(names []string, sni string) int {
	if sni == "" {
		return -1
	}
	best := -1
	for _, n := range names {
		switch {
		case n == sni:
			return 1 << 20
		case strings.HasPrefix(n, "*.") && len(sni) > len(n)-1 && strings.HasSuffix(sni, n[1:]):
			if len(n) > best {
				best = len(n)
			}
		}
	}
	return best
}
