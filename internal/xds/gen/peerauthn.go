package gen

import (
	"slices"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcher "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/mesh"
	"github.com/straitmesh/strait/internal/proxypush"
)

// The inbound side of PeerAuthentication, as Istio builds it
// (pilot/pkg/networking/core/filterchain_options.go
// getFilterChainMatchOptions and pilot/pkg/security/authn/utils
// BuildInboundTLS): per inbound port, the mode the workload's policy
// gives it picks the filter chains:
//
//   - STRICT: only a TLS chain that terminates Istio mTLS (client
//     certificate required), so a plaintext client matches no chain and
//     its connection is closed;
//   - PERMISSIVE: a TLS chain for Istio's ALPNs (terminated here), plain
//     TLS passed through as is (TCP ports only), and plaintext;
//   - DISABLE: plaintext only (raw_buffer), so a TLS client is closed.
//
// Terminated mTLS accepts only client certificates of the mesh's trust
// domain and its aliases (Istio's TrustDomainsForValidation: a SAN prefix
// spiffe://<trust domain>/ each).
//
// PERMISSIVE needs a certificate: a workload without Istio's
// security.istio.io/tlsMode=istio label (no sidecar certificate) keeps
// its plaintext chains, as before policies were read. STRICT never falls
// back to plaintext: without a certificate its handshakes fail, which
// refuses the traffic STRICT refuses anyway.

// inboundAuthn is what a proxy's inbound chains need of its
// PeerAuthentication.
type inboundAuthn struct {
	policy       mesh.PeerPolicy
	hasCert      bool         // the workload has a sidecar certificate (tlsMode label)
	trustDomains trustDomains // the mesh's and its aliases: the only ones accepted from clients
}

// proxyInboundAuthn resolves the policy of the proxy's own workload.
func proxyInboundAuthn(snap *mesh.Snapshot, proxy *proxypush.Proxy) inboundAuthn {
	a := inboundAuthn{policy: mesh.PeerPolicy{Mode: mesh.MTLSPermissive}, trustDomains: meshTrustDomains(snap)}
	if proxy == nil {
		return a
	}
	w := snap.WorkloadByIP(proxyIP(proxy))
	if w == nil {
		return a
	}
	a.hasCert = w.Labels[TLSModeLabel] == tlsModeIstio
	a.policy = snap.PeerAuthentication(w.Namespace, w.Labels)
	return a
}

// mode is the effective mode of a port: PERMISSIVE without a certificate
// is plaintext (MTLSUnknown: the chains of a workload without mTLS).
func (a inboundAuthn) mode(port uint32) mesh.MTLSMode {
	m := a.policy.ForPort(port)
	if m == mesh.MTLSPermissive && !a.hasCert {
		return mesh.MTLSUnknown
	}
	return m
}

// clientSANs accepts the SPIFFE IDs of the mesh's trust domains only.
func (a inboundAuthn) clientSANs() []*tlsv3.SubjectAltNameMatcher {
	var out []*tlsv3.SubjectAltNameMatcher
	for _, td := range a.trustDomains {
		out = append(out, &tlsv3.SubjectAltNameMatcher{
			SanType: tlsv3.SubjectAltNameMatcher_URI,
			Matcher: &matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_Prefix{Prefix: "spiffe://" + td + "/"}},
		})
	}
	return out
}

// terminate is the transport socket of a chain that terminates Istio mTLS.
func (a inboundAuthn) terminate(http bool) *core.TransportSocket {
	alpn := []string{"istio-peer-exchange", "istio"}
	if http {
		alpn = []string{"h2", "http/1.1"}
	}
	return &core.TransportSocket{
		Name: tlsSocketName,
		ConfigType: &core.TransportSocket_TypedConfig{TypedConfig: mustAny(&tlsv3.DownstreamTlsContext{
			CommonTlsContext:         meshCommonTLS(alpn, a.clientSANs()),
			RequireClientCertificate: wrapperspb.Bool(true),
		})},
	}
}

// portChains turns one inbound port's plaintext chain into the chains of
// its mode; passthrough are the filters (network RBAC, then tcp_proxy)
// that pass plain TLS on (PERMISSIVE TCP ports).
func (a inboundAuthn) portChains(plain *listener.FilterChain, port uint32, http bool, passthrough []*listener.Filter) []*listener.FilterChain {
	match := func(transport string, alpn []string) *listener.FilterChainMatch {
		return &listener.FilterChainMatch{DestinationPort: wrapperspb.UInt32(port), TransportProtocol: transport, ApplicationProtocols: alpn}
	}
	switch a.mode(port) {
	case mesh.MTLSStrict:
		plain.FilterChainMatch = match(transportTLS, nil)
		plain.TransportSocket = a.terminate(http)
		return []*listener.FilterChain{plain}
	case mesh.MTLSPermissive:
		mtls := &listener.FilterChain{Name: plain.Name, FilterChainMatch: match(transportTLS, inboundMTLSALPN),
			Filters: plain.Filters, TransportSocket: a.terminate(http)}
		plain.FilterChainMatch = match(transportRaw, nil)
		if http {
			// An HTTP port takes no other TLS (Istio's
			// inboundPermissiveHTTPFilterChainMatchWithMxcOptions).
			return []*listener.FilterChain{mtls, plain}
		}
		passTLS := &listener.FilterChain{Name: plain.Name, FilterChainMatch: match(transportTLS, nil), Filters: passthrough}
		return []*listener.FilterChain{mtls, passTLS, plain}
	case mesh.MTLSDisable:
		plain.FilterChainMatch = match(transportRaw, nil)
		return []*listener.FilterChain{plain}
	}
	return []*listener.FilterChain{plain}
}

// passthroughChains are the chains for connections to ports no service
// declares (to InboundPassthroughCluster), in the workload's mode, plus
// one per port-level setting of such a port (Istio's
// buildInboundPassthroughChains and ForPassthrough). declared are the
// ports that have chains of their own; tcp wraps each chain's tcp_proxy
// with the filters that go before it (network RBAC).
func (a inboundAuthn) passthroughChains(declared []uint32, tcp func(*listener.Filter) []*listener.Filter) []*listener.FilterChain {
	chain := func(port uint32, mode mesh.MTLSMode) []*listener.FilterChain {
		base := func() *listener.FilterChain {
			c := &listener.FilterChain{
				Name:    "InboundPassthroughFilterChain",
				Filters: tcp(tcpProxyFilter(InboundPassthroughCluster, InboundPassthroughCluster)),
			}
			if port != 0 {
				c.FilterChainMatch = &listener.FilterChainMatch{DestinationPort: wrapperspb.UInt32(port)}
			}
			return c
		}
		withTransport := func(c *listener.FilterChain, transport string, alpn []string) *listener.FilterChain {
			if c.FilterChainMatch == nil {
				c.FilterChainMatch = &listener.FilterChainMatch{}
			}
			c.FilterChainMatch.TransportProtocol, c.FilterChainMatch.ApplicationProtocols = transport, alpn
			return c
		}
		switch mode {
		case mesh.MTLSStrict:
			c := withTransport(base(), transportTLS, nil)
			c.TransportSocket = a.terminate(false)
			return []*listener.FilterChain{c}
		case mesh.MTLSPermissive:
			mtls := withTransport(base(), transportTLS, inboundMTLSALPN)
			mtls.TransportSocket = a.terminate(false)
			return []*listener.FilterChain{mtls, base()}
		case mesh.MTLSDisable:
			return []*listener.FilterChain{withTransport(base(), transportRaw, nil)}
		}
		return []*listener.FilterChain{base()}
	}
	out := chain(0, a.mode(0))
	ports := make([]uint32, 0, len(a.policy.PerPort))
	for p := range a.policy.PerPort {
		if !slices.Contains(declared, p) {
			ports = append(ports, p)
		}
	}
	slices.Sort(ports)
	for _, p := range ports {
		out = append(out, chain(p, a.mode(p))...)
	}
	return out
}

// needsTLSInspector reports whether a chain matches on the transport
// protocol, which only the tls_inspector detects.
func needsTLSInspector(chains []*listener.FilterChain) bool {
	return slices.ContainsFunc(chains, func(c *listener.FilterChain) bool {
		return c.GetFilterChainMatch().GetTransportProtocol() != ""
	})
}

const (
	transportTLS = "tls"
	transportRaw = "raw_buffer"
)
