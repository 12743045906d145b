package hcm

// The jwt_authn filter on each codec path. It runs first, before the
// route is chosen (Envoy runs it ahead of the router, so a bad token gets
// its 401 whatever the route), and writes what it verified into the
// request's dynamic metadata (httpfilter.Metadata): on the HTTP/1.1 path
// the connection's h1conn.meta, reset per request; on the HTTP/2 and
// net/http paths a *Metadata allocated only when a token verifies and
// handed on by serveStream and serveHTTP. The later filters (RBAC) read it
// there. Without the filter in the chain this costs one nil test.

import (
	"net/http"

	"github.com/straitmesh/strait/internal/proxy/http1"
	"github.com/straitmesh/strait/internal/proxy/httpfilter"
	"github.com/straitmesh/strait/internal/proxy/httpfilter/jwtauthn"
)

// jwtRequest is what the filter reads of an HTTP/1.1 request.
func (c *h1conn) jwtRequest() *jwtauthn.Request {
	req := &c.req
	query := req.Query
	if len(query) > 0 {
		query = query[1:] // its '?'
	}
	return &jwtauthn.Request{
		Method: http1.UnsafeString(req.Method), Path: http1.UnsafeString(req.Path), Query: http1.UnsafeString(query),
		Header: func(name string) []string {
			var out []string
			for i := range req.Headers {
				if h := &req.Headers[i]; !h.Hop && http1.EqualFold(h.Name, name) {
					out = append(out, http1.UnsafeString(h.Value))
				}
			}
			return out
		},
	}
}

// h1JWTHeaders edits c.req's fields for the jwt_authn filter: a removed
// field leaves req.Headers (rather than being marked Hop) and an added one
// joins them, as forwardH1 edits them (xff.go), so that the RBAC filter and
// the route match after it see the headers the application will get, as
// Envoy's later filters see jwt_authn's edits.
type h1JWTHeaders struct{ req *http1.Request }

func (e h1JWTHeaders) Del(name string) { e.req.Headers = removeHeader(e.req.Headers, name) } // xff.go

func (e h1JWTHeaders) Add(name, value string) {
	e.req.Headers = append(e.req.Headers, http1.Header{Name: []byte(name), Value: []byte(value)})
}

// runJWT authenticates c.req. done reports that it was answered (401 or
// 403); keep then says whether the connection can carry another request.
// The headers the filter's providers write are removed first, whatever
// the outcome (jwtauthn.Filter.StripOutputHeaders).
func (c *h1conn) runJWT(jf *jwtauthn.Filter) (done, keep bool) {
	jf.StripOutputHeaders(h1JWTHeaders{req: &c.req})
	res := jf.Authenticate(c.jwtRequest())
	st := &c.filter.filters.stats
	if res.Status != jwtauthn.OK {
		inc(st.jwtDenied)
		realm := jwtRealm(http1.UnsafeString(c.req.Host), http1.UnsafeString(c.req.Path))
		return true, c.filterReply(res.Code(), "", res.Status.String(), func(set func(string, string)) {
			set("www-authenticate", wwwAuthenticate(realm, res.Status))
		})
	}
	inc(st.jwtAllowed)
	if len(res.Verified) > 0 {
		res.EditHeaders(h1JWTHeaders{req: &c.req})
		res.WriteMetadata(&c.meta)
	}
	return false, false
}

// streamJWT authenticates r on the HTTP/2 and net/http paths. md is the
// request's metadata (nil when no token verified); done reports that r
// was answered. The headers the filter's providers write are removed
// first, whatever the outcome (jwtauthn.Filter.StripOutputHeaders).
func streamJWT(w http.ResponseWriter, r *http.Request, f *Filter, path string, grpcReplies bool) (md *httpfilter.Metadata, done bool) {
	h := r.Header
	f.filters.jwt.StripOutputHeaders(httpHeaders(h))
	res := f.filters.jwt.Authenticate(&jwtauthn.Request{
		Method: r.Method, Path: path, Query: r.URL.RawQuery,
		Header: func(name string) []string { return h.Values(name) },
	})
	st := &f.filters.stats
	if res.Status != jwtauthn.OK {
		inc(st.jwtDenied)
		w.Header().Set("Www-Authenticate", wwwAuthenticate(jwtRealm(r.Host, path), res.Status))
		if grpcReplies {
			streamLocalReply(w, r, res.Code(), "", res.Status.String())
		} else {
			localReply(w, res.Code(), "", res.Status.String())
		}
		return nil, true
	}
	inc(st.jwtAllowed)
	if len(res.Verified) == 0 {
		return nil, false
	}
	res.EditHeaders(httpHeaders(h))
	md = new(httpfilter.Metadata)
	res.WriteMetadata(md)
	return md, false
}

// jwtRealm is the realm of a failure's WWW-Authenticate: the request's
// URL without its query, as Envoy's jwt_authn filter builds it.
func jwtRealm(host, path string) string { return "http://" + host + path }

// wwwAuthenticate is the challenge Envoy's filter answers with
// (generateAuthenticateHeader): the realm, and invalid_token unless the
// token was missing.
func wwwAuthenticate(realm string, st jwtauthn.Status) string {
	if st == jwtauthn.JwtMissed {
		return `Bearer realm="` + realm + `"`
	}
	return `Bearer realm="` + realm + `", error="invalid_token"`
}
