package hcm

import (
	"bytes"
	"crypto/tls"
	"net"
	"net/http"
	"strings"

	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/straitmesh/strait/internal/proxy/http1"
	"github.com/straitmesh/strait/internal/proxy/tlsconf"
)

// This file holds the request's scheme: :scheme and x-forwarded-proto,
// which follow the downstream connection's transport as in Envoy.
//
// A request on a TLS connection has :scheme https (Envoy's HTTP/1 codec
// sets it from the connection; HTTP/2 clients send it, and on our TLS
// connections it is https as well). x-forwarded-proto is set from the
// connection when the request has none, and overwritten from it when the
// HCM is the edge: use_remote_address true with xff_num_trusted_hops 0,
// where the client is not trusted to say what it came over
// (ConnectionManagerUtility::mutateRequestHeaders in Envoy's
// source/common/http/conn_manager_utility.cc). Redirects without a scheme
// of their own keep the request's x-forwarded-proto after that, so a
// request that came over TLS is redirected to https.

// forwardedProtoPolicy is what the HCM config says about x-forwarded-proto.
type forwardedProtoPolicy struct {
	// overwrite replaces a client's x-forwarded-proto with the
	// connection's (use_remote_address with no trusted hops).
	overwrite bool
}

// buildScheme reads the fields that decide :scheme and x-forwarded-proto
// (scheme_header_transformation is refused by checkHCMFields, fields.go).
func (f *Filter) buildScheme(h *hcmv3.HttpConnectionManager) error {
	f.xfp.overwrite = h.GetUseRemoteAddress().GetValue() && h.GetXffNumTrustedHops() == 0
	return nil
}

// schemeOf returns "https" for a request on a TLS connection, else "http".
func schemeOf(secure bool) string {
	if secure {
		return "https"
	}
	return "http"
}

// requestScheme is an HTTP/1 request's :scheme as Envoy's HCM sets it
// (ConnectionManagerUtility::mutateRequestHeaders): the scheme of an
// absolute-form target, else the x-forwarded-proto the request leaves
// with (xfp, after the edge overwrites it) when that is http or https,
// else the connection's. Routes match on it, and an HTTP/2 upstream
// request carries it as its :scheme: Envoy's router keeps the request's
// :scheme (only scheme_header_transformation, refused, would change it),
// whatever the upstream transport.
func requestScheme(absolute, xfp string, secure bool) string {
	for _, s := range [2]string{absolute, xfp} {
		switch {
		case strings.EqualFold(s, "https"):
			return "https"
		case strings.EqualFold(s, "http"):
			return "http"
		}
	}
	return schemeOf(secure)
}

// scheme is the :scheme of the request in progress (requestScheme).
func (c *h1conn) scheme() string {
	abs := ""
	if c.req.Authority != nil { // absolute-form: http:// or https://
		if i := bytes.IndexByte(c.req.Target, ':'); i > 0 {
			abs = http1.UnsafeString(c.req.Target[:i])
		}
	}
	return requestScheme(abs, c.forwardedProto(), c.secure)
}

// streamScheme is the :scheme of a request on the net/http paths: an
// HTTP/1.1 request's is requestScheme's; an HTTP/2 request carries its
// own, which Envoy trusts (http or https, as x/net/http2's server checks)
// and schemeProbe reveals.
func streamScheme(r *http.Request, c *conn) string {
	if r.ProtoMajor >= 2 {
		return schemeOf(r.TLS != nil)
	}
	return requestScheme(r.URL.Scheme, r.Header.Get("X-Forwarded-Proto"), c.secure)
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

// forwardedProto returns the x-forwarded-proto a request leaves with:
// the client's value v (has says it sent one) unless the policy overwrites
// it or there is none, then the connection's scheme.
func (p forwardedProtoPolicy) forwardedProto(v []byte, has, secure bool) string {
	if has && !p.overwrite {
		return string(v)
	}
	return schemeOf(secure)
}

// isTLS reports whether c is a TLS connection the listener terminated.
func isTLS(c net.Conn) bool { return tlsconf.Terminated(c) != nil }

// setForwardedProto gives a request on the net/http paths (HTTP/1.1 and
// HTTP/2) the x-forwarded-proto it leaves with, before the filters and
// the route see it, as Envoy mutates the headers before routing; a shadow
// copies it with the other headers.
func setForwardedProto(r *http.Request, c *conn) {
	if vv := r.Header["X-Forwarded-Proto"]; len(vv) > 0 && !c.filter.xfp.overwrite {
		return // the client's, kept as it came
	}
	r.Header["X-Forwarded-Proto"] = []string{schemeOf(c.secure)}
}

// forwardedProto is the request's x-forwarded-proto as it leaves, for a
// redirect's scheme and a shadow (the head itself is appendRequestHead's).
func (c *h1conn) forwardedProto() string {
	v, ok := c.req.Headers.Get("X-Forwarded-Proto")
	return c.filter.xfp.forwardedProto(v, ok, c.secure)
}
