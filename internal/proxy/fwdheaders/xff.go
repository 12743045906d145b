package fwdheaders

// This file is the HCM's client-address rules: which address is the
// request's downstream remote address (what RBAC's remote_ip, the access
// log's %DOWNSTREAM_REMOTE_ADDRESS% and the x-envoy-external-address
// header read) and what the proxy adds to x-forwarded-for, as Envoy's
// ConnectionManagerUtility::mutateRequestHeaders
// (source/common/http/conn_manager_utility.cc) and
// Utility::getLastAddressFromXFF (source/common/http/utility.cc) decide:
//
//   - use_remote_address false: the address xff_num_trusted_hops entries
//     from the right of x-forwarded-for (the last one with 0), falling back
//     to the peer when the header is missing, too short or that entry is
//     not an IP address. x-forwarded-for is forwarded unchanged.
//   - use_remote_address true: the peer, or with N trusted hops the N-th
//     entry from the right of x-forwarded-for as the client sent it (the
//     peer when there is none). The peer's address is appended to
//     x-forwarded-for (the proxy's own address instead when the peer is a
//     loopback address), unless skip_xff_append.
//
// Every request is external: Envoy treats no address as internal unless
// internal_address_config lists it (its default since the
// explicit_internal_address_config runtime guard was removed), and
// strait-proxy refuses that field. So a client's x-envoy-internal and the
// x-envoy-* headers Envoy keeps for internal requests are removed from
// every request (ConnectionManagerUtility::cleanInternalHeaders; but not
// the router's, router.IsRouterHeader, which strait-proxy honours from any
// client), and with use_remote_address (an edge request) also the
// decorator and downstream-service headers; x-envoy-external-address is
// set to the remote address and the client's x-request-id is replaced by
// a new one, unless preserve_external_request_id.

import (
	"net"
	"net/http"
	"net/netip"
	"strings"

	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/straitmesh/strait/internal/proxy/http1"
)

// XFF is what the HCM config says about the client's address.
type XFF struct {
	useRemote   bool   // use_remote_address
	trustedHops uint32 // xff_num_trusted_hops
	skipAppend  bool   // skip_xff_append
	// preserveRequestID keeps an edge request's x-request-id
	// (preserve_external_request_id); otherwise the edge replaces it.
	preserveRequestID bool
}

// XFFOf reads the client-address fields of h (and
// preserve_external_request_id, which the edge logic reads); the HCM's
// field audit (hcm/fields.go) refused the related ones strait-proxy does
// not implement.
func XFFOf(h *hcmv3.HttpConnectionManager) XFF {
	return XFF{
		useRemote:   h.GetUseRemoteAddress().GetValue(),
		trustedHops: h.GetXffNumTrustedHops(),
		skipAppend:  h.GetSkipXffAppend(),

		preserveRequestID: h.GetPreserveExternalRequestId(),
	}
}

// ClientAddress is what the HCM derives of one request's client.
type ClientAddress struct {
	// Remote is the downstream remote address: port 0 when it came from
	// x-forwarded-for.
	Remote netip.AddrPort
	// appended is the address to append to x-forwarded-for; invalid when
	// nothing is appended.
	appended netip.Addr
	// external is the value of x-envoy-external-address; invalid when the
	// header is not set (not an edge request).
	external netip.Addr
}

// resolve applies the policy to a request whose x-forwarded-for is xff
// (its lines joined with ","; has false when it has none) on a
// connection from peer; local is the proxy's own address, appended in
// place of a loopback peer.
func (p XFF) resolve(xff string, has bool, peer netip.AddrPort, local netip.Addr) ClientAddress {
	var out ClientAddress
	if !p.useRemote {
		if a, ok := xffAddress(xff, has, p.trustedHops); ok {
			out.Remote = netip.AddrPortFrom(a, 0)
		} else {
			out.Remote = peer
		}
		return out
	}
	out.Remote = peer
	if p.trustedHops > 0 {
		if a, ok := xffAddress(xff, has, p.trustedHops-1); ok {
			out.Remote = netip.AddrPortFrom(a, 0)
		}
	}
	if !p.skipAppend && peer.IsValid() {
		out.appended = peer.Addr()
		if out.appended.IsLoopback() && local.IsValid() {
			out.appended = local
		}
	}
	if out.Remote.IsValid() {
		out.external = out.Remote.Addr()
	}
	return out
}

// xffAddress is the address skip entries from the right of x-forwarded-for
// value v (the last entry when skip is 0), as Envoy's getLastAddressFromXFF
// reads it: entries split at commas, spaces around one ignored; false when
// the header is missing, has too few entries, or the entry is not an IPv4
// or IPv6 address.
func xffAddress(v string, has bool, skip uint32) (netip.Addr, bool) {
	if !has {
		return netip.Addr{}, false
	}
	for ; skip > 0; skip-- {
		i := strings.LastIndexByte(v, ',')
		if i < 0 {
			return netip.Addr{}, false
		}
		v = v[:i]
	}
	if i := strings.LastIndexByte(v, ','); i >= 0 {
		v = v[i+1:]
	}
	a, err := netip.ParseAddr(strings.TrimSpace(v))
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// appendXFF returns the x-forwarded-for value with a appended, as Envoy's
// Utility::appendXff writes it: a bare address, after a "," with no
// space when there was a value.
func appendXFF(v string, has bool, a netip.Addr) string {
	if !has || v == "" {
		return a.String()
	}
	return v + "," + a.String()
}

// LocalAddress is Envoy's default local_info address
// (Network::Utility::getLocalAddress): the first address of the host's
// interfaces that is not a loopback address, an IPv4 one first; invalid
// when there is none.
func LocalAddress() netip.Addr {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return netip.Addr{}
	}
	var v6 netip.Addr
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(n.IP)
		if !ok {
			continue
		}
		ip = ip.Unmap()
		switch {
		case ip.IsLoopback() || ip.IsLinkLocalUnicast():
		case ip.Is4():
			return ip
		case !v6.IsValid():
			v6 = ip
		}
	}
	return v6
}

// Request header names of this file.
const (
	headerXFF             = "X-Forwarded-For"
	headerExternalAddress = "X-Envoy-External-Address"
	headerRequestID       = "X-Request-Id"
)

// externalStripped reports whether the request header name (any case) is
// removed from an external request (edge: at the edge).
func externalStripped(name string, edge bool) bool {
	const prefix = "x-envoy-"
	if len(name) <= len(prefix) || !strings.EqualFold(name[:len(prefix)], prefix) {
		return false
	}
	name = name[len(prefix):]
	for _, h := range [...]string{"retriable-status-codes", "retriable-header-names", "upstream-alt-stat-name",
		"upstream-rq-timeout-alt-response", "expected-rq-timeout-ms", "force-trace", "ip-tags", "original-url",
		"hedge-on-per-try-timeout", "internal"} {
		if len(name) == len(h) && strings.EqualFold(name, h) { // names are tokens (ASCII): the lengths decide first
			return true
		}
	}
	if edge {
		for _, h := range [...]string{"decorator-operation", "downstream-service-cluster", "downstream-service-node"} {
			if len(name) == len(h) && strings.EqualFold(name, h) {
				return true
			}
		}
	}
	return false
}

// newRequestIDAtEdge reports whether the client's x-request-id is dropped
// for a new one (an edge request, Envoy's generateRequestId with
// force_set).
func (p XFF) newRequestIDAtEdge() bool { return p.useRemote && !p.preserveRequestID }

// ApplyHTTP applies the rules to a request on the http.Request path
// (HTTP/2), before its filters and route see it, and returns its client
// address; local is the proxy's own address (LocalAddress).
func (p XFF) ApplyHTTP(r *http.Request, local netip.Addr) ClientAddress {
	for k := range r.Header {
		if externalStripped(k, p.useRemote) {
			delete(r.Header, k)
		}
	}
	xff, has := "", false
	if vv := r.Header[headerXFF]; len(vv) > 0 {
		xff, has = strings.Join(vv, ","), true
	}
	peer, _ := netip.ParseAddrPort(r.RemoteAddr)
	peer = netip.AddrPortFrom(peer.Addr().Unmap(), peer.Port())
	ca := p.resolve(xff, has, peer, local)
	if ca.appended.IsValid() {
		r.Header[headerXFF] = []string{appendXFF(xff, has, ca.appended)}
	}
	if p.newRequestIDAtEdge() {
		delete(r.Header, headerRequestID) // a new one is set when the request is forwarded
	}
	if p.useRemote {
		delete(r.Header, headerExternalAddress)
		if ca.external.IsValid() {
			r.Header[headerExternalAddress] = []string{ca.external.String()}
		}
	}
	return ca
}

// ApplyH1 applies the rules to the fields hs of an HTTP/1.1 request from
// peer, editing them in place; it returns them and the request's client
// address.
func (p XFF) ApplyH1(hs http1.Headers, peer netip.AddrPort, local netip.Addr) (http1.Headers, ClientAddress) {
	edge := p.useRemote
	var (
		xff                 string
		has, strip, extAddr bool
	)
	for i := range hs {
		n := hs[i].Name
		switch {
		case len(n) == len(headerXFF) && http1.EqualFold(n, headerXFF):
			has = true
		case len(n) > 8 && (n[0] == 'x' || n[0] == 'X') && http1.EqualFold(n[:8], "x-envoy-"):
			strip = strip || externalStripped(http1.UnsafeString(n), edge)
			extAddr = extAddr || http1.EqualFold(n, headerExternalAddress)
		}
	}
	if has {
		xff, _ = hs.Lookup(headerXFF)
	}
	ca := p.resolve(xff, has, peer, local)
	if strip {
		out := hs[:0]
		for _, h := range hs {
			if !externalStripped(http1.UnsafeString(h.Name), edge) {
				out = append(out, h)
			}
		}
		clear(hs[len(out):])
		hs = out
	}
	if ca.appended.IsValid() {
		v := []byte(appendXFF(xff, has, ca.appended)) // copied: xff may alias the read buffer
		hs = append(RemoveHeader(hs, headerXFF), http1.Header{Name: []byte("x-forwarded-for"), Value: v})
	}
	if p.newRequestIDAtEdge() {
		hs = RemoveHeader(hs, headerRequestID) // a new one is written upstream
	}
	if edge {
		if extAddr {
			hs = RemoveHeader(hs, headerExternalAddress)
		}
		if ca.external.IsValid() {
			hs = append(hs, http1.Header{Name: []byte("x-envoy-external-address"), Value: []byte(ca.external.String())})
		}
	}
	return hs, ca
}

// RemoveHeader removes the fields named name from hs, keeping the order of
// the others. The fields before the first match stay where they are (a
// field that is absent costs one scan and no writes: the metadata
// exchange's Set of its fields on every mesh request).
func RemoveHeader(hs http1.Headers, name string) http1.Headers {
	i := 0
	for i < len(hs) && !http1.EqualFold(hs[i].Name, name) {
		i++
	}
	if i == len(hs) {
		return hs
	}
	out := hs[:i]
	for _, h := range hs[i+1:] {
		if !http1.EqualFold(h.Name, name) {
			out = append(out, h)
		}
	}
	clear(hs[len(out):])
	return out
}
