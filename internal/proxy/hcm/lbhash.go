package hcm

import (
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/route"
)

// bodyOverflow is Envoy's local reply body when a circuit breaker is open.
const bodyOverflow = "upstream connect error or disconnect/reset before headers. reset reason: overflow"

// requestHash hashes a request by its route's hash_policy for the
// RING_HASH and MAGLEV load balancers (ok false: no hash). setCookie is a
// Set-Cookie value the response must carry (a generated hash cookie).
// remote is the request's downstream remote address (xff.go).
func requestHash(rt *route.Route, h route.HeaderGetter, query string, nc net.Conn, remote netip.AddrPort) (hash uint64, ok bool, setCookie string) {
	if rt.Hash == nil {
		return 0, false, ""
	}
	return rt.Hash.Hash(route.HashInput{Headers: h, Query: query, Source: addrPort(nc.RemoteAddr()), Local: addrPort(nc.LocalAddr()), Remote: remote})
}

// requestHashHTTP is requestHash for the net/http and HTTP/2 paths.
func requestHashHTTP(rt *route.Route, r *http.Request, remote netip.AddrPort) (hash uint64, ok bool, setCookie string) {
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

// pickFailure is the local reply for a failed PickRequest: 503 UO with
// x-envoy-overloaded when a circuit breaker is open (writeLocal adds the
// header for UO), else 503 UH.
func pickFailure(err error) failure {
	if errors.Is(err, cluster.ErrOverflow) {
		return failure{503, "UO", bodyOverflow}
	}
	return failure{503, "UH", bodyNoHealthy}
}

// localFailureOf maps a local reply for an exchange without a response to
// the outlier detector's locally originated result (0: not the upstream's
// doing, e.g. the client left).
func localFailureOf(f failure) cluster.LocalFailure {
	flag, _, _ := strings.Cut(f.flags, ",") // "UF,URX": the first is the failure
	switch flag {
	case "UF":
		return cluster.LocalConnectFailed
	case "UT":
		return cluster.LocalTimeout
	case "UC", "UPE":
		return cluster.LocalReset
	}
	return 0
}

// reportRetriedFailure feeds an attempt that failed locally and is about
// to be retried to outlier detection: Envoy's router reports every
// attempt's result (Filter::onUpstreamReset → updateOutlierDetection), so
// a host that refuses connections is ejected even when the retries of its
// requests succeed elsewhere. The last attempt's failure is reported where
// it is answered (upstreamFailed).
func reportRetriedFailure(cl *cluster.Cluster, ep cluster.Endpoint, f failure) {
	if lf := localFailureOf(f); lf != 0 {
		cl.ReportLocalFailure(ep, lf)
	}
}

// connectFailure is the local reply when no upstream connection could be
// had: 503 UO when the connection circuit breakers overflowed, else UF.
func connectFailure(err error) failure {
	if errors.Is(err, cluster.ErrOverflow) {
		return failure{503, "UO", bodyOverflow}
	}
	return failConnect
}
