package jwtauthn

// Requirements, as Envoy's verifier.cc combines them: a provider checks
// the tokens found at its locations; requires_any passes when one child
// passes, requires_all when every child does; allow_missing passes when no
// token is in the request, allow_missing_or_failed always.

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	jwtv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/jwt_authn/v3"
)

type requirement interface {
	verify(v *verification) Status
}

// verification is the state of one request's check: the tokens already
// verified, so that a token that two requirements name is checked once.
type verification struct {
	f        *Filter
	r        *Request
	now      time.Time
	verified []Verified
	// checked caches each (provider, token) outcome.
	checked map[checkKey]Status
}

type checkKey struct {
	provider *provider
	token    string
	aud      string // provider_and_audiences' override, joined
}

func (f *Filter) buildRequirement(r *jwtv3.JwtRequirement) (requirement, error) {
	switch t := r.GetRequiresType().(type) {
	case *jwtv3.JwtRequirement_ProviderName:
		p, ok := f.providers[t.ProviderName]
		if !ok {
			return nil, fmt.Errorf("provider_name %q is not a provider (have %s)", t.ProviderName, f.providerNames())
		}
		return providerReq{p: p}, nil
	case *jwtv3.JwtRequirement_ProviderAndAudiences:
		p, ok := f.providers[t.ProviderAndAudiences.GetProviderName()]
		if !ok {
			return nil, fmt.Errorf("provider_and_audiences.provider_name %q is not a provider (have %s)", t.ProviderAndAudiences.GetProviderName(), f.providerNames())
		}
		return providerReq{p: p, audiences: t.ProviderAndAudiences.GetAudiences(), override: true}, nil
	case *jwtv3.JwtRequirement_RequiresAny:
		l, err := f.buildList("requires_any", t.RequiresAny.GetRequirements())
		return anyReq(l), err
	case *jwtv3.JwtRequirement_RequiresAll:
		l, err := f.buildList("requires_all", t.RequiresAll.GetRequirements())
		return allReq(l), err
	case *jwtv3.JwtRequirement_AllowMissing:
		return allowMissing{}, nil
	case *jwtv3.JwtRequirement_AllowMissingOrFailed:
		return allowAll{}, nil
	case *jwtv3.JwtRequirement_ExtractOnlyWithoutValidation:
		return nil, fmt.Errorf("extract_only_without_validation is not supported (verify with a provider)")
	case nil:
		return nil, fmt.Errorf("requires_type is required")
	default:
		return nil, fmt.Errorf("requirement %T is not supported (want provider_name, provider_and_audiences, requires_any, requires_all, allow_missing or allow_missing_or_failed)", t)
	}
}

func (f *Filter) buildList(field string, rs []*jwtv3.JwtRequirement) ([]requirement, error) {
	if len(rs) < 2 {
		return nil, fmt.Errorf("%s.requirements: at least 2 are required, as Envoy's validation says", field)
	}
	out := make([]requirement, 0, len(rs))
	for i, r := range rs {
		req, err := f.buildRequirement(r)
		if err != nil {
			return nil, fmt.Errorf("%s.requirements[%d]: %w", field, i, err)
		}
		out = append(out, req)
	}
	return out, nil
}

type providerReq struct {
	p         *provider
	audiences []string
	override  bool
}

// verify checks every token at the provider's locations (JwtMissed when
// there is none); the first failure is the answer.
func (pr providerReq) verify(v *verification) Status {
	toks := extract(v.r, pr.p.locations)
	if len(toks) == 0 {
		return JwtMissed
	}
	aud := pr.p.audiences
	if pr.override {
		aud = pr.audiences
	}
	for _, t := range toks {
		key := checkKey{provider: pr.p, token: t.token, aud: strings.Join(aud, "\x00")}
		st, ok := v.checked[key]
		if !ok {
			var ver *Verified
			st, ver = pr.p.verifyToken(t, aud, v.now)
			if v.checked == nil {
				v.checked = map[checkKey]Status{}
			}
			v.checked[key] = st
			if st == OK {
				v.verified = append(v.verified, *ver)
			}
		}
		if st != OK {
			return st
		}
	}
	return OK
}

type anyReq []requirement

// verify passes with the first child that passes; otherwise its answer is
// the most telling failure, as Envoy's AnyVerifierImpl prefers it: one
// about the token itself over an unknown issuer (a token for a sibling
// provider) over a missing token.
func (l anyReq) verify(v *verification) Status {
	out := JwtMissed
	for _, r := range l {
		st := r.verify(v)
		if st == OK {
			return OK
		}
		if failureRank(st) > failureRank(out) {
			out = st
		}
	}
	return out
}

func failureRank(s Status) int {
	switch s {
	case JwtMissed:
		return 0
	case JwtUnknownIssuer:
		return 1
	}
	return 2
}

type allReq []requirement

func (l allReq) verify(v *verification) Status {
	for _, r := range l {
		if st := r.verify(v); st != OK {
			return st
		}
	}
	return OK
}

type allowMissing struct{}

// verify passes when no provider's location holds a token. A token that
// is present is for the sibling requirements to judge: this one reports
// it as not missing with JwtMissed, which any sibling's failure outranks.
func (allowMissing) verify(v *verification) Status {
	if len(extract(v.r, v.f.locations)) == 0 {
		return OK
	}
	return JwtMissed
}

type allowAll struct{}

func (allowAll) verify(*verification) Status { return OK }

// location is where a token may be: a header (with a value prefix), a
// query parameter or a cookie.
type location struct {
	kind   locationKind
	name   string // lower-case for headers
	prefix string
}

type locationKind uint8

const (
	inHeader locationKind = iota
	inParam
	inCookie
)

type token struct {
	token string
	loc   location
}

// extract finds the tokens at locs, in order.
func extract(r *Request, locs []location) []token {
	var out []token
	var query url.Values
	for _, l := range locs {
		switch l.kind {
		case inHeader:
			for _, val := range r.Header(l.name) {
				if t := headerToken(val, l.prefix); t != "" {
					out = append(out, token{token: t, loc: l})
				}
			}
		case inParam:
			if r.Query == "" {
				continue
			}
			if query == nil {
				query, _ = url.ParseQuery(r.Query)
			}
			for _, t := range query[l.name] {
				if t != "" {
					out = append(out, token{token: t, loc: l})
				}
			}
		case inCookie:
			for _, line := range r.Header("cookie") {
				cs, err := http.ParseCookie(line)
				if err != nil {
					continue
				}
				for _, c := range cs {
					if c.Name == l.name && c.Value != "" {
						out = append(out, token{token: c.Value, loc: l})
					}
				}
			}
		}
	}
	return out
}

// headerToken is the token in a header value: what follows prefix, up to
// the first character that cannot be in a JWT, as Envoy's extractor takes
// it (so "Bearer <jwt>, other" yields the JWT).
func headerToken(val, prefix string) string {
	if prefix != "" {
		i := strings.Index(val, prefix)
		if i < 0 {
			return ""
		}
		val = val[i+len(prefix):]
	}
	start := strings.IndexFunc(val, jwtChar)
	if start < 0 {
		return ""
	}
	val = val[start:]
	if end := strings.IndexFunc(val, func(r rune) bool { return !jwtChar(r) }); end >= 0 {
		val = val[:end]
	}
	return val
}

func jwtChar(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' || r == '='
}
