package fwdheaders

// This file holds x-forwarded-proto and the request's scheme, which follow
// the downstream connection's transport as in Envoy.
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

import (
	"net/http"
	"strings"

	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
)

// Proto is what the HCM config says about x-forwarded-proto.
type Proto struct {
	// overwrite replaces a client's x-forwarded-proto with the
	// connection's (use_remote_address with no trusted hops).
	overwrite bool
}

// ProtoOf reads the fields of h that decide :scheme and x-forwarded-proto
// (scheme_header_transformation is refused by the HCM's field audit,
// hcm/fields.go).
func ProtoOf(h *hcmv3.HttpConnectionManager) Proto {
	return Proto{overwrite: h.GetUseRemoteAddress().GetValue() && h.GetXffNumTrustedHops() == 0}
}

// Overwrites reports whether a client's x-forwarded-proto is replaced by
// the connection's scheme.
func (p Proto) Overwrites() bool { return p.overwrite }

// SchemeOf returns "https" for a request on a TLS connection, else "http".
func SchemeOf(secure bool) string {
	if secure {
		return "https"
	}
	return "http"
}

// RequestScheme is an HTTP/1 request's :scheme as Envoy's HCM sets it
// (ConnectionManagerUtility::mutateRequestHeaders): the scheme of an
// absolute-form target, else the x-forwarded-proto the request leaves
// with (xfp, after the edge overwrites it) when that is http or https,
// else the connection's. Routes match on it, and an HTTP/2 upstream
// request carries it as its :scheme: Envoy's router keeps the request's
// :scheme (only scheme_header_transformation, refused, would change it),
// whatever the upstream transport.
func RequestScheme(absolute, xfp string, secure bool) string {
	for _, s := range [2]string{absolute, xfp} {
		switch {
		case strings.EqualFold(s, "https"):
			return "https"
		case strings.EqualFold(s, "http"):
			return "http"
		}
	}
	return SchemeOf(secure)
}

// Value returns the x-forwarded-proto a request leaves with: the client's
// value v (has says it sent one) unless the policy overwrites it or there
// is none, then the connection's scheme.
func (p Proto) Value(v []byte, has, secure bool) string {
	if has && !p.overwrite {
		return string(v)
	}
	return SchemeOf(secure)
}

// ApplyHTTP gives a request on the http.Request path (HTTP/2) the
// x-forwarded-proto it leaves with, before the filters and the route see
// it, as Envoy mutates the headers before routing; a shadow copies it
// with the other headers. val, when not nil, is where the value set is
// kept (storage of the caller's that lives with r, written only here):
// no allocation; nil allocates it.
func (p Proto) ApplyHTTP(r *http.Request, secure bool, val *[1]string) {
	if vv := r.Header["X-Forwarded-Proto"]; len(vv) > 0 && !p.overwrite {
		return // the client's, kept as it came
	}
	if val == nil {
		val = new([1]string)
	}
	val[0] = SchemeOf(secure)
	r.Header["X-Forwarded-Proto"] = val[:]
}
