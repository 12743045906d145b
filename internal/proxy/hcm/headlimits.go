package hcm

import (
	"net/http"

	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/fwdheaders"
)

// This file applies max_headers_count and max_request_headers_kb to the
// request heads that net/http and x/net/http2 parse (the strait codec
// applies them while it parses, h1.go), counted as Envoy counts them: a
// field per header line (each value of a repeated name), its size the
// name's and the value's length (HeaderMap::size and byteSize); on
// HTTP/2 the pseudo-headers are fields too. net/http's MaxHeaderBytes
// allows 4 KiB more than it says and x/net/http2's adds 32 bytes per
// field (RFC 9113's header list size), so they only bound the parse.

// h2HeaderListSize is the MaxHeaderBytes an HTTP/2 server is given: a
// head within lim fits, however it is counted.
func h2HeaderListSize(lim *Limits) int {
	return lim.MaxRequestHeadBytes + 32*lim.MaxHeadersCount
}

// requestHeadOverLimits reports whether r's head is past lim.
func requestHeadOverLimits(r *http.Request, lim *Limits) bool {
	n, size := 0, 0
	if r.ProtoMajor >= 2 {
		// :method, :scheme, :authority and :path (CONNECT: the first and
		// the third).
		n, size = 2, len(":method")+len(r.Method)+len(":authority")+len(r.Host)
		if r.Method != http.MethodConnect {
			n += 2
			size += len(":scheme") + len(fwdheaders.SchemeOf(r.TLS != nil)) + len(":path") + len(r.RequestURI)
		}
	} else if r.Host != "" {
		n, size = 1, len("Host")+len(r.Host) // net/http keeps Host out of the map
	}
	fields, bytes := cluster.HeadSize(r.Header)
	n, size = n+fields, size+bytes
	return n > lim.MaxHeadersCount && lim.MaxHeadersCount > 0 || size > lim.MaxRequestHeadBytes && lim.MaxRequestHeadBytes > 0
}

// limitStreamHead resets an HTTP/2 stream whose request head is past lim,
// as Envoy's HTTP/2 codec does (ConnectionImpl::saveHeader in
// source/common/http/http2/codec_impl.cc fails the header callback, and
// the stream is reset with INTERNAL_ERROR; no 431 as on HTTP/1.1).
func limitStreamHead(lim *Limits, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if requestHeadOverLimits(r, lim) {
			panic(http.ErrAbortHandler) // x/net/http2 resets the stream: INTERNAL_ERROR
		}
		next(w, r)
	}
}
