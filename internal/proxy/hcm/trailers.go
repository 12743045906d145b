package hcm

// This file is the one trailer policy of every codec path (h1forward.go,
// h1toh2.go, h2.go): which trailers cross the proxy, in
// either direction. Trailers arrive after the head was sanitized
// (package fwdheaders, httpfilter/jwtauthn/outputheaders.go, the router's x-envoy-* headers) and
// routed, so nothing the HCM checks or sets in the head may come through
// them, and an app that merges trailers into headers must not see them.
//
//   - HTTP/1.1 trailers are dropped, on both sides and in both directions:
//     a chunked message's trailer section is read (bounded, validated, by
//     http1.ChunkedReader) and never forwarded, and no trailer is written
//     to an HTTP/1.1 peer. That is Envoy's HTTP/1 codec with
//     http_protocol_options.enable_trailers false, its default
//     (ConnectionImpl::onHeaderField ignores trailers,
//     StreamEncoderImpl::encodeTrailersBase ends the stream without them;
//     source/common/http/http1/codec_impl.cc). strait-proxy refuses
//     enable_trailers, on the HCM (fields.go) and on a cluster's HTTP/1
//     options (cluster/httpoptions.go).
//   - From HTTP/2 to HTTP/2 (gRPC's grpc-status, grpc-message and custom
//     metadata), trailers are forwarded without the fields RFC 9110
//     §6.5.1 forbids in a trailer section (framing, routing, request
//     modifiers, authentication, response control data, content
//     processing; connection-specific fields, RFC 9113 §8.2.2) and without
//     the fields the HCM owns in the head (trailerAllowed).

import (
	"io"
	"net/http"
	"strings"

	"github.com/straitmesh/strait/internal/proxy/cluster"
)

// wireProto is the HTTP version a message crossed one side of the proxy in.
type wireProto uint8

const (
	wireHTTP1 wireProto = iota + 1
	wireHTTP2
)

// wireOf is the wireProto of a message with this major version.
func wireOf(protoMajor int) wireProto {
	if protoMajor == 2 {
		return wireHTTP2
	}
	return wireHTTP1
}

// trailersCross reports whether trailers received over from are sent on
// over to: only HTTP/2 to HTTP/2 (see the top of the file).
func trailersCross(from, to wireProto) bool {
	return from == wireHTTP2 && to == wireHTTP2
}

// forbiddenTrailers are the lower-case field names never forwarded in a
// trailer section. Names starting with "if-", "x-envoy-" or ":" are too
// (trailerAllowed).
var forbiddenTrailers = map[string]bool{
	// Framing and routing (RFC 9110 §6.5.1).
	"content-length": true, "transfer-encoding": true, "host": true, "trailer": true,
	// Connection-specific (RFC 9110 §7.6.1, RFC 9113 §8.2.2).
	"connection": true, "keep-alive": true, "proxy-connection": true, "te": true,
	"upgrade": true, "http2-settings": true,
	// Request modifiers: controls (RFC 9110 §7.6.2, §10.1; RFC 9111 §5).
	"cache-control": true, "expect": true, "max-forwards": true, "pragma": true, "range": true,
	// Authentication (RFC 9110 §11; cookies, RFC 6265).
	"authorization": true, "proxy-authorization": true, "www-authenticate": true,
	"proxy-authenticate": true, "authentication-info": true, "proxy-authentication-info": true,
	"cookie": true, "set-cookie": true, "realm": true,
	// Response control data (RFC 9110 §15, RFC 9111 §5).
	"age": true, "date": true, "expires": true, "location": true, "retry-after": true,
	"vary": true, "warning": true,
	// How to process the content.
	"content-encoding": true, "content-type": true, "content-range": true,
	// What the HCM sanitizes or sets in the head: package fwdheaders,
	// scheme.go, the request id.
	"x-forwarded-client-cert": true, "x-forwarded-for": true, "x-forwarded-proto": true,
	"x-forwarded-host": true, "x-forwarded-port": true, "forwarded": true,
	"x-request-id": true, "x-strait-response-flags": true,
}

// trailerAllowed reports whether a trailer field may be forwarded: not one
// of forbiddenTrailers, no pseudo-header, conditional (If-*) or x-envoy-*
// field, nor a header the jwt_authn filter writes on a verified request
// (jwtauthn.Filter.WritesHeader).
func (f *Filter) trailerAllowed(name string) bool {
	n := strings.ToLower(name)
	switch {
	case n == "", forbiddenTrailers[n], n[0] == ':',
		strings.HasPrefix(n, "if-"), strings.HasPrefix(n, "x-envoy-"):
		return false
	}
	return f.chain == nil || !f.chain.writesHeader(n)
}

// forwardTrailers returns the trailers to send over to for trailers t
// received over from: nil unless trailersCross, else t without the fields
// trailerAllowed refuses (nil when none is left). t is not modified.
func (f *Filter) forwardTrailers(t http.Header, from, to wireProto) http.Header {
	if !trailersCross(from, to) {
		return nil
	}
	var out http.Header
	for k, vv := range t {
		if len(vv) == 0 || !f.trailerAllowed(k) {
			continue
		}
		if out == nil {
			out = make(http.Header, len(t))
		}
		out[k] = vv
	}
	return out
}

// forwardRequestTrailers sets out.Trailer, for an upstream request made
// from r that leaves over to, to what forwardTrailers lets through of r's
// trailers. The server fills r.Trailer only when r's body reaches its end,
// so out.Trailer holds the allowed declared names at first (the upstream
// transport announces them) and their values are copied when out.Body
// returns io.EOF, before a transport reads out.Trailer.
func (f *Filter) forwardRequestTrailers(out, r *http.Request, to wireProto) {
	out.Trailer = nil
	if !trailersCross(wireOf(r.ProtoMajor), to) || len(r.Trailer) == 0 || out.Body == nil || out.Body == http.NoBody {
		return
	}
	declared := make(http.Header, len(r.Trailer))
	for k := range r.Trailer {
		if f.trailerAllowed(k) {
			declared[k] = nil
		}
	}
	if len(declared) == 0 {
		return
	}
	out.Trailer = declared
	out.Body = &trailerBody{ReadCloser: out.Body, f: f, from: wireOf(r.ProtoMajor), to: to, src: r.Trailer, dst: declared}
}

// trailerBody copies the allowed trailers from src to dst when its body
// ends. Read is called by one goroutine at a time (the transport's), the
// one that then reads dst.
type trailerBody struct {
	io.ReadCloser
	f        *Filter
	from, to wireProto
	src, dst http.Header
}

func (b *trailerBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		for k, vv := range b.f.forwardTrailers(b.src, b.from, b.to) {
			b.dst[k] = vv
		}
	}
	return n, err
}

// upstreamWire is the HTTP version r leaves in to cl.
func upstreamWire(cl *cluster.Cluster, r *http.Request) wireProto {
	if cl.UpstreamHTTP2(r.ProtoMajor == 2) {
		return wireHTTP2
	}
	return wireHTTP1
}
