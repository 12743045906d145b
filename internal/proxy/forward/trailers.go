package forward

// This file is the one trailer policy of every codec path (forward/h1's
// exchange, hcm's h2.go): which trailers cross the proxy, in
// either direction. Trailers arrive after the head was sanitized
// (package fwdheaders, filters/http/jwtauthn/outputheaders.go, the router's x-envoy-* headers) and
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
//     enable_trailers, on the HCM (hcm/fields.go) and on a cluster's HTTP/1
//     options (cluster/httpoptions.go).
//   - From HTTP/2 to HTTP/2 (gRPC's grpc-status, grpc-message and custom
//     metadata), trailers are forwarded without the fields RFC 9110
//     §6.5.1 forbids in a trailer section (framing, routing, request
//     modifiers, authentication, response control data, content
//     processing; connection-specific fields, RFC 9113 §8.2.2) and without
//     the fields the HCM owns in the head (Trailers.Allowed).

import (
	"io"
	"net/http"

	"github.com/straitmesh/strait/internal/proxy/cluster"
)

// Wire is the HTTP version a message crossed one side of the proxy in.
type Wire uint8

// The Wires.
const (
	WireHTTP1 Wire = iota + 1
	WireHTTP2
)

// WireOf is the Wire of a message with this major version.
func WireOf(protoMajor int) Wire {
	if protoMajor == 2 {
		return WireHTTP2
	}
	return WireHTTP1
}

// trailersCross reports whether trailers received over from are sent on
// over to: only HTTP/2 to HTTP/2 (see the top of the file).
func trailersCross(from, to Wire) bool {
	return from == WireHTTP2 && to == WireHTTP2
}

// forbiddenTrailerMax bounds the length of the forbiddenTrailers' names.
const forbiddenTrailerMax = 64

// forbiddenTrailers are the lower-case field names never forwarded in a
// trailer section. Names starting with "if-", "x-envoy-" or ":" are too
// (Trailers.Allowed).
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
	// hcm/scheme.go, the request id.
	"x-forwarded-client-cert": true, "x-forwarded-for": true, "x-forwarded-proto": true,
	"x-forwarded-host": true, "x-forwarded-port": true, "forwarded": true,
	"x-request-id": true, "x-strait-response-flags": true,
}

// Trailers is an HCM's trailer policy. Owns, when set, reports whether
// the HCM's filters write and trust the request header of this name (in
// any case: the name as it came), jwt_authn's output headers (hcm's
// chain): a trailer must not smuggle one in after the head was checked.
type Trailers struct {
	Owns func(name string) bool
}

// Allowed reports whether a trailer field may cross the proxy: not one
// of forbiddenTrailers, no pseudo-header, conditional (If-*) or x-envoy-*
// field, nor a header the HCM owns (Owns). Field names compare in ASCII
// case-insensitively (RFC 9110 §5.1), with no allocation.
func (p *Trailers) Allowed(name string) bool {
	switch {
	case name == "", name[0] == ':', forbiddenTrailer(name),
		hasPrefixFold(name, "if-"), hasPrefixFold(name, "x-envoy-"):
		return false
	}
	return p.Owns == nil || !p.Owns(name)
}

// forbiddenTrailer reports whether name, in any case, is one of
// forbiddenTrailers: lowered into a buffer on the stack (a map index by
// string(b) does not allocate). Every forbidden name is shorter than the
// buffer (TestTrailersAllowedFold), so a longer name is none of them.
func forbiddenTrailer(name string) bool {
	var buf [forbiddenTrailerMax]byte
	if len(name) > len(buf) {
		return false
	}
	b := buf[:len(name)]
	for i := range len(name) {
		b[i] = lowerASCII(name[i])
	}
	return forbiddenTrailers[string(b)]
}

// hasPrefixFold reports whether s starts with the lower-case prefix, in
// any case.
func hasPrefixFold(s, lowerPrefix string) bool {
	if len(s) < len(lowerPrefix) {
		return false
	}
	for i := range len(lowerPrefix) {
		if lowerASCII(s[i]) != lowerPrefix[i] {
			return false
		}
	}
	return true
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + ('a' - 'A')
	}
	return c
}

// Forward returns the trailers to send over to for trailers t received
// over from: nil unless trailersCross, else t without the fields Allowed
// refuses (nil when none is left). t is not modified; when every field of
// t crosses, the result is t itself (no copy: a caller that changes the
// result changes t, which the proxy's callers own, the upstream
// response's).
func (p *Trailers) Forward(t http.Header, from, to Wire) http.Header {
	if !trailersCross(from, to) || len(t) == 0 {
		return nil
	}
	all := true
	for k, vv := range t {
		if len(vv) == 0 || !p.Allowed(k) {
			all = false
			break
		}
	}
	if all {
		return t
	}
	var out http.Header
	for k, vv := range t {
		if len(vv) == 0 || !p.Allowed(k) {
			continue
		}
		if out == nil {
			out = make(http.Header, len(t))
		}
		out[k] = vv
	}
	return out
}

// ForwardRequest sets out.Trailer, for an upstream request made from r
// that leaves over to, to what Forward lets through of r's trailers. The server fills r.Trailer only when r's body reaches its end,
// so out.Trailer holds the allowed declared names at first (the upstream
// transport announces them) and their values are copied when out.Body
// returns io.EOF, before a transport reads out.Trailer.
func (p *Trailers) ForwardRequest(out, r *http.Request, to Wire) {
	out.Trailer = nil
	if !trailersCross(WireOf(r.ProtoMajor), to) || len(r.Trailer) == 0 || out.Body == nil || out.Body == http.NoBody {
		return
	}
	declared := make(http.Header, len(r.Trailer))
	for k := range r.Trailer {
		if p.Allowed(k) {
			declared[k] = nil
		}
	}
	if len(declared) == 0 {
		return
	}
	if out.GetBody != nil {
		// The body was read whole (hcm's body.go), so r's trailers are
		// in: their values go now, and every attempt's body carries them.
		for k, vv := range p.Forward(r.Trailer, WireOf(r.ProtoMajor), to) {
			declared[k] = vv
		}
		out.Trailer = declared
		return
	}
	out.Trailer = declared
	out.Body = &trailerBody{ReadCloser: out.Body, p: p, from: WireOf(r.ProtoMajor), to: to, src: r.Trailer, dst: declared}
}

// trailerBody copies the allowed trailers from src to dst when its body
// ends. Read is called by one goroutine at a time (the transport's), the
// one that then reads dst.
type trailerBody struct {
	io.ReadCloser
	p        *Trailers
	from, to Wire
	src, dst http.Header
}

func (b *trailerBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		for k, vv := range b.p.Forward(b.src, b.from, b.to) {
			b.dst[k] = vv
		}
	}
	return n, err
}

// UpstreamWire is the HTTP version r leaves in to cl.
func UpstreamWire(cl *cluster.Cluster, r *http.Request) Wire {
	if cl.UpstreamHTTP2(r.ProtoMajor == 2) {
		return WireHTTP2
	}
	return WireHTTP1
}
