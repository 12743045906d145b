package hcm

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"strings"

	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/straitmesh/strait/internal/proxy/hcm/http1"
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

// buildScheme reads the fields that decide :scheme and x-forwarded-proto.
func (f *Filter) buildScheme(h *hcmv3.HttpConnectionManager) error {
	if st := h.GetSchemeHeaderTransformation(); st != nil {
		return fmt.Errorf("scheme_header_transformation is not supported (the request's :scheme follows the downstream connection: https on TLS); remove the field")
	}
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
// own, which x/net/http2's server checks (http or https) but does not
// expose, so the connection's stands for it (what clients send: https on
// TLS, http on h2c).
func streamScheme(r *http.Request, c *conn) string {
	if r.ProtoMajor >= 2 {
		return schemeOf(c.secure)
	}
	return requestScheme(r.URL.Scheme, r.Header.Get("X-Forwarded-Proto"), c.secure)
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
