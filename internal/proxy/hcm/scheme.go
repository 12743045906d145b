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
// carries its own, which Envoy trusts (http or https, as x/net/http2's server checks)
// and schemeProbe reveals.
func streamScheme(r *http.Request, c *conn) string {
	if r.ProtoMajor >= 2 {
		return fwdheaders.SchemeOf(r.TLS != nil)
	}
	return fwdheaders.RequestScheme(r.URL.Scheme, r.Header.Get("X-Forwarded-Proto"), c.secure)
}

// schemeProbe is the connection x/net/http2's server serves. The server
// shows a request's :scheme only one way: it sets Request.TLS, to the
// state of a connection that reports one, when :scheme is https. So
// every connection, TLS or h2c, reports the same made-up state (TLS 1.3,
// which passes the server's RFC 9113 §9.2 checks), and Request.TLS != nil
// means :scheme https and nothing else; the listener's TLS is read from
// the connection under it (tlsconf.Terminated).
type schemeProbe struct{ net.Conn }

// ConnectionState is the made-up state: never read for what it says.
func (schemeProbe) ConnectionState() tls.ConnectionState {
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
