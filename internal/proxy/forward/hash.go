package forward

import (
	"net"
	"net/http"
	"net/netip"

	"github.com/straitmesh/strait/internal/proxy/route"
)

// RequestHash hashes a request by its route's hash_policy for the
// RING_HASH and MAGLEV load balancers (ok false: no hash). setCookie is a
// Set-Cookie value the response must carry (a generated hash cookie).
// remote is the request's downstream remote address (x-forwarded-for).
func RequestHash(rt *route.Route, h route.HeaderGetter, query string, nc net.Conn, remote netip.AddrPort) (hash uint64, ok bool, setCookie string) {
	if rt.Hash == nil {
		return 0, false, ""
	}
	return rt.Hash.Hash(route.HashInput{Headers: h, Query: query, Source: addrPort(nc.RemoteAddr()), Local: addrPort(nc.LocalAddr()), Remote: remote})
}

// RequestHashHTTP is RequestHash for the paths that carry an http.Request.
func RequestHashHTTP(rt *route.Route, r *http.Request, remote netip.AddrPort) (hash uint64, ok bool, setCookie string) {
	if rt.Hash == nil {
		return 0, false, ""
	}
	in := route.HashInput{Headers: route.HTTPHeader(r.Header), Query: r.URL.RawQuery, Remote: remote}
	in.Source, _ = netip.ParseAddrPort(r.RemoteAddr)
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		in.Local = addrPort(a)
	}
	return rt.Hash.Hash(in)
}

func addrPort(a net.Addr) netip.AddrPort {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.AddrPort()
	}
	return netip.AddrPort{}
}
