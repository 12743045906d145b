package jwtauthn

// The jwt_authn filter behind the HTTP filter interface
// (httpfilter.Factory). On every request it first removes the headers its
// providers write (StripOutputHeaders), then authenticates; a failure is
// answered (401, or 403 for audiences, with Envoy's WWW-Authenticate),
// a success edits the request's headers and writes the verified tokens
// into the request's dynamic metadata for the filters after it (RBAC).
// Per-route config (Envoy's PerRouteConfig) is not implemented: a route's
// typed_per_filter_config for this filter is refused, except
// FilterConfig{disabled: true}, which the chain honours.

import (
	"strings"
	"sync/atomic"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/straitmesh/strait/internal/proxy/httpfilter"
)

// TypeURL is the type of the filter's typed_config.
const TypeURL = "type.googleapis.com/envoy.extensions.filters.http.jwt_authn.v3.JwtAuthentication"

// Factory builds the jwt_authn filter. Options are what Parse takes
// (tests set the clock).
type Factory struct{ Options Options }

// Names are the filter's name and its config's type URL.
func (Factory) Names() []string { return []string{Name, TypeURL} }

// Build compiles the filter's JwtAuthentication.
func (fa Factory) Build(typed *anypb.Any, ctx httpfilter.BuildContext) (httpfilter.Filter, error) {
	f, err := Parse(typed, fa.Options)
	if err != nil {
		return nil, err
	}
	if ctx.Stats != nil {
		f.allowed = ctx.Stats.Counter(ctx.StatPrefix + "jwt_authn.allowed")
		f.denied = ctx.Stats.Counter(ctx.StatPrefix + "jwt_authn.denied")
	}
	return f, nil
}

// Name is the filter's name.
func (f *Filter) Name() string { return Name }

// DecodeHeaders authenticates the request.
func (f *Filter) DecodeHeaders(s httpfilter.Stream) httpfilter.Status {
	h := s.RequestHeaders()
	f.StripOutputHeaders(h)
	res := f.Authenticate(&Request{
		Method: s.Method(), Path: s.Path(), Query: s.Query(),
		Header: func(name string) []string {
			var out []string
			h.Range(func(n, v string) bool {
				if strings.EqualFold(n, name) {
					out = append(out, v)
				}
				return true
			})
			return out
		},
	})
	if res.Status != OK {
		inc(f.denied)
		challenge := WWWAuthenticate(Realm(s.Host(), s.Path()), res.Status)
		s.LocalReply(res.Code(), -1, res.Status.String(), "", func(set func(name, value string)) {
			set("www-authenticate", challenge)
		})
		return httpfilter.Stop
	}
	inc(f.allowed)
	if len(res.Verified) > 0 {
		res.EditHeaders(h)
		res.WriteMetadata(s.Metadata())
		s.ClearRoute() // the route is chosen again on the edited headers
	}
	return httpfilter.Continue
}

// Realm is the realm of a failure's WWW-Authenticate: the request's URL
// without its query, as Envoy's jwt_authn filter builds it.
func Realm(host, path string) string { return "http://" + host + path }

// WWWAuthenticate is the challenge Envoy's filter answers with
// (generateAuthenticateHeader): the realm, and invalid_token unless the
// token was missing.
func WWWAuthenticate(realm string, st Status) string {
	if st == JwtMissed {
		return `Bearer realm="` + realm + `"`
	}
	return `Bearer realm="` + realm + `", error="invalid_token"`
}

func inc(c *atomic.Uint64) {
	if c != nil {
		c.Add(1)
	}
}

var (
	_ httpfilter.Factory = Factory{}
	_ httpfilter.Filter  = (*Filter)(nil)
)
