package hcm

import (
	"bytes"
	"crypto/tls"
	"net"
	"net/http"

	"github.com/straitmesh/strait/internal/proxy/fwdheaders"
	"github.com/straitmesh/strait/internal/proxy/http1"
	"github.com/straitmesh/strait/internal/proxy/tlsconf"
)

// This file is the codecs' side of the request's scheme: :scheme and
// x-forwarded-proto, whose rules are package fwdheaders' (Proto).

// scheme is the :scheme of the request in progress (fwdheaders.RequestScheme).
func (c *h1conn) scheme() string {
	abs := ""
	if c.req.Authority != nil { // absolute-form: http:// or https://
		if i := bytes.IndexByte(c.req.Target, ':'); i > 0 {
			abs = http1.UnsafeString(c.req.Target[:i])
		}
	}
	return fwdheaders.RequestScheme(abs, c.forwardedProto(), c.secure)
}

// streamScheme is the :scheme of a request on the net/http paths: an
// HTTP/1.1 request's is fwdheaders.RequestScheme's; an HTTP/2 request
// carries its own, which Envoy trusts (http or https, as the server checks)
// and schemeState reveals.
func streamScheme(r *http.Request, c *conn) string {
	if r.ProtoMajor >= 2 {
		return fwdheaders.SchemeOf(r.TLS != nil)
	}
	return fwdheaders.RequestScheme(r.URL.Scheme, r.Header.Get("X-Forwarded-Proto"), c.secure)
}

// schemeState is what Request.TLS is for an HTTP/2 request whose :scheme
// is https (http2/server.Config.TLS; nil for http): a made-up state (TLS
// 1.3, which passes RFC 9113 §9.2's checks), never read for what it says,
// so that Request.TLS != nil means :scheme https and nothing else. The
// listener's TLS is read from the connection under it (tlsconf.Terminated).
func schemeState() tls.ConnectionState {
	return tls.ConnectionState{Version: tls.VersionTLS13, HandshakeComplete: true, CipherSuite: tls.TLS_AES_128_GCM_SHA256}
}

// isTLS reports whether c is a TLS connection the listener terminated.
func isTLS(c net.Conn) bool { return tlsconf.Terminated(c) != nil }

// forwardedProto is the request's x-forwarded-proto as it leaves, for a
// redirect's scheme and a shadow (the head itself is written by forward/h1).
func (c *h1conn) forwardedProto() string {
	v, ok := c.req.Headers.Get("X-Forwarded-Proto")
	return c.filter.xfp.Value(v, ok, c.secure)
}
