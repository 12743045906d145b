// Package pathnorm is the HCM's path normalization: normalize_path, merge_slashes
// and path_with_escaped_slashes_action, applied to the request path before
// the HTTP filters (JWT, RBAC), routing and the upstream request, so that
// what a policy matches is what the application serves. The order and the
// semantics are Envoy's (ConnectionManagerUtility::maybeNormalizePath and
// PathUtil in source/common/http/path_utility.cc): escaped slashes first,
// then RFC 3986 dot-segment removal with Chromium's path canonicalization,
// then merging slashes. The query is never touched. Package hcm applies a
// Policy to every request of either codec.
package pathnorm

import (
	"bytes"
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"

	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
)

// Policy is an HCM's path normalization; the zero value changes nothing.
type Policy struct {
	normalize bool // normalize_path
	merge     bool // merge_slashes
	// escaped is path_with_escaped_slashes_action; KEEP_UNCHANGED when
	// unset (IMPLEMENTATION_SPECIFIC_DEFAULT), as in Envoy.
	escaped hcmv3.HttpConnectionManager_PathWithEscapedSlashesAction
}

// Verdict is what Policy.Apply decided.
type Verdict int

// The verdicts.
const (
	Forward  Verdict = iota // serve the request with the (maybe new) path
	Reject                  // answer 400: the path cannot be normalized, or has escaped slashes under REJECT_REQUEST
	Redirect                // answer 307 to the unescaped path (UNESCAPE_AND_REDIRECT)
)

// PolicyOf reads normalize_path, merge_slashes and
// path_with_escaped_slashes_action of h, refusing an action it does not
// know by name.
func PolicyOf(h *hcmv3.HttpConnectionManager) (Policy, error) {
	p := Policy{normalize: h.GetNormalizePath().GetValue(), merge: h.GetMergeSlashes(), escaped: h.GetPathWithEscapedSlashesAction()}
	switch p.escaped {
	case hcmv3.HttpConnectionManager_IMPLEMENTATION_SPECIFIC_DEFAULT:
		p.escaped = hcmv3.HttpConnectionManager_KEEP_UNCHANGED
	case hcmv3.HttpConnectionManager_KEEP_UNCHANGED, hcmv3.HttpConnectionManager_REJECT_REQUEST,
		hcmv3.HttpConnectionManager_UNESCAPE_AND_REDIRECT, hcmv3.HttpConnectionManager_UNESCAPE_AND_FORWARD:
	default:
		return Policy{}, fmt.Errorf("path_with_escaped_slashes_action %d is not a known action (want KEEP_UNCHANGED, REJECT_REQUEST, UNESCAPE_AND_REDIRECT or UNESCAPE_AND_FORWARD)", p.escaped)
	}
	return p, nil
}

// Active reports whether Apply can change anything.
func (p *Policy) Active() bool {
	return p.normalize || p.merge || p.escaped != hcmv3.HttpConnectionManager_KEEP_UNCHANGED && p.escaped != 0
}

// Apply returns the request path (without its query) as the HCM forwards
// it. When nothing changes, out is path itself and nothing is allocated;
// a path that does not start with '/' (the "*" of OPTIONS) is left alone.
func (p *Policy) Apply(path []byte) (out []byte, v Verdict) {
	out = path
	if len(path) == 0 || path[0] != '/' {
		return out, Forward
	}
	switch p.escaped {
	case hcmv3.HttpConnectionManager_REJECT_REQUEST:
		if hasEscapedSlash(out) {
			return out, Reject
		}
	case hcmv3.HttpConnectionManager_UNESCAPE_AND_REDIRECT, hcmv3.HttpConnectionManager_UNESCAPE_AND_FORWARD:
		if hasEscapedSlash(out) {
			out = unescapeSlashes(out)
			if p.escaped == hcmv3.HttpConnectionManager_UNESCAPE_AND_REDIRECT {
				v = Redirect
			}
		}
	}
	if p.normalize && !isCanonicalPath(out) {
		var ok bool
		if out, ok = canonicalPath(out); !ok {
			return path, Reject
		}
	}
	if p.merge && bytes.Contains(out, []byte("//")) {
		out = mergeSlashes(out)
	}
	return out, v
}

// HasFragment reports whether a request target (HTTP/1.1's
// request-target as received, HTTP/2's :path) holds a '#'. A fragment is
// never part of a request target (RFC 9112 §3.2, RFC 9113 §8.3.1), and
// Envoy answers such a request 400 before normalizing or routing it
// (ConnectionManagerUtility::maybeNormalizePath in
// source/common/http/conn_manager_utility.cc, under
// envoy.reloadable_features.http_reject_path_with_fragment, true by
// default), whether or not the HCM normalizes paths: forwarded,
// "/admin#x" would be routed and authorized as a path other than the
// "/admin" the application serves.
func HasFragment(target string) bool { return strings.IndexByte(target, '#') >= 0 }

// hasEscapedSlash reports whether path has %2F or %5C, in either case.
func hasEscapedSlash(path []byte) bool {
	for i := 0; i+2 < len(path); i++ {
		if path[i] == '%' && isEscapedSlash(path[i+1], path[i+2]) {
			return true
		}
	}
	return false
}

func isEscapedSlash(a, b byte) bool {
	return a == '2' && (b == 'f' || b == 'F') || a == '5' && (b == 'c' || b == 'C')
}

// unescapeSlashes decodes %2F to '/' and %5C to '\' (Envoy's
// unescapeSlashes); it returns a new slice.
func unescapeSlashes(path []byte) []byte {
	out := make([]byte, 0, len(path))
	for i := 0; i < len(path); i++ {
		if path[i] == '%' && i+2 < len(path) && isEscapedSlash(path[i+1], path[i+2]) {
			if path[i+1] == '2' {
				out = append(out, '/')
			} else {
				out = append(out, '\\')
			}
			i += 2
			continue
		}
		out = append(out, path[i])
	}
	return out
}

// mergeSlashes collapses every run of '/' into one (Envoy's
// PathTransformer::mergeSlashes); it returns a new slice.
func mergeSlashes(path []byte) []byte {
	out := make([]byte, 0, len(path))
	for i, c := range path {
		if c == '/' && i > 0 && path[i-1] == '/' {
			continue
		}
		out = append(out, c)
	}
	return out
}

// pathEscape reports the bytes Chromium's path canonicalizer percent-
// encodes (the URL standard's path percent-encode set, and '#' which
// cannot be in a path once parsed); bytes of 0x80 and up are handled as
// UTF-8.
func pathEscape(c byte) bool {
	switch c {
	case ' ', '"', '#', '<', '>', '`', '{', '}', 0x7f:
		return true
	}
	return c < 0x20
}

// isCanonicalPath is canonicalPath's fast check: a path with no '%', no
// '\', no byte to escape and no "." or ".." segment is already canonical.
func isCanonicalPath(path []byte) bool {
	for i, c := range path {
		switch {
		case c == '%' || c == '\\' || c >= 0x80 || pathEscape(c):
			return false
		case c == '.' && path[i-1] == '/': // path[0] is '/'
			rest := path[i+1:]
			if len(rest) > 0 && rest[0] == '.' {
				rest = rest[1:]
			}
			if len(rest) == 0 || rest[0] == '/' {
				return false
			}
		}
	}
	return true
}

// canonicalPath is Chromium's url::CanonicalizePath as Envoy's
// normalize_path runs it: '\' is a separator and becomes '/'; "." and ".."
// segments (also spelt with %2E) are removed, ".." never above the root;
// a percent-encoded unreserved character is decoded and other escapes are
// kept as written; bytes outside the path's character set are percent-
// encoded. It fails (the request gets 400) on %00 and on bytes that are
// not UTF-8. path starts with '/'.
func canonicalPath(path []byte) ([]byte, bool) {
	out := make([]byte, 0, len(path)+8)
	for i := 0; i < len(path); {
		i++ // the separator
		j := i
		for j < len(path) && path[j] != '/' && path[j] != '\\' {
			j++
		}
		mark := len(out)
		out = append(out, '/')
		var ok bool
		if out, ok = appendCanonSegment(out, path[i:j]); !ok {
			return nil, false
		}
		last := j == len(path)
		switch seg := out[mark+1:]; {
		case len(seg) == 1 && seg[0] == '.':
			out = out[:mark]
			if last {
				out = append(out, '/')
			}
		case len(seg) == 2 && seg[0] == '.' && seg[1] == '.':
			out = out[:mark]
			if k := bytes.LastIndexByte(out, '/'); k >= 0 {
				out = out[:k]
			}
			if last {
				out = append(out, '/')
			}
		}
		i = j
	}
	return out, true
}

const upperHex = "0123456789ABCDEF"

// appendCanonSegment appends one path segment, canonicalized, to out.
func appendCanonSegment(out, seg []byte) ([]byte, bool) {
	for k := 0; k < len(seg); k++ {
		c := seg[k]
		switch {
		case c == '%':
			if k+2 < len(seg) && isHex(seg[k+1]) && isHex(seg[k+2]) {
				v := unhex(seg[k+1])<<4 | unhex(seg[k+2])
				switch {
				case v == 0:
					return nil, false
				case isUnreserved(v):
					out = append(out, v)
				default:
					out = append(out, seg[k:k+3]...)
				}
				k += 2
				continue
			}
			out = append(out, '%') // not an escape: kept, as Chromium does
		case c >= 0x80:
			r, n := utf8.DecodeRune(seg[k:])
			if r == utf8.RuneError && n <= 1 {
				return nil, false
			}
			for _, b := range seg[k : k+n] {
				out = append(out, '%', upperHex[b>>4], upperHex[b&15])
			}
			k += n - 1
		case c == 0:
			return nil, false
		case pathEscape(c):
			out = append(out, '%', upperHex[c>>4], upperHex[c&15])
		default:
			out = append(out, c)
		}
	}
	return out, true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

// isUnreserved reports RFC 3986's unreserved characters.
func isUnreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}

// SetURLPath makes u's escaped path p, as the upstream request and the
// application will see it.
func SetURLPath(u *url.URL, p string) {
	dec, err := url.PathUnescape(p)
	if err != nil {
		// An invalid escape ("%zz") is kept as written, which only
		// Opaque carries to the upstream unchanged.
		u.Opaque, u.Path, u.RawPath = p, "", ""
		return
	}
	u.Path, u.RawPath = dec, p
}
