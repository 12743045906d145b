package jwtauthn

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	jwtv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/jwt_authn/v3"
	jose "github.com/go-jose/go-jose/v4"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/emptypb"
)

var testNow = time.Unix(1_800_000_000, 0)

type signer struct {
	kid string
	alg jose.SignatureAlgorithm
	key crypto.Signer
}

func newSigner(t *testing.T, kid string, alg jose.SignatureAlgorithm) signer {
	t.Helper()
	var k crypto.Signer
	var err error
	switch alg {
	case jose.RS256, jose.RS384, jose.RS512, jose.PS256:
		k, err = rsa.GenerateKey(rand.Reader, 2048)
	case jose.ES256:
		k, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case jose.ES384:
		k, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case jose.EdDSA:
		_, k, err = ed25519.GenerateKey(rand.Reader)
	}
	if err != nil {
		t.Fatal(err)
	}
	return signer{kid: kid, alg: alg, key: k}
}

func (s signer) jwk() jose.JSONWebKey {
	return jose.JSONWebKey{Key: s.key.Public(), KeyID: s.kid, Algorithm: string(s.alg), Use: "sig"}
}

func jwks(t *testing.T, ss ...signer) string {
	t.Helper()
	var set jose.JSONWebKeySet
	for _, s := range ss {
		set.Keys = append(set.Keys, s.jwk())
	}
	b, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (s signer) sign(t *testing.T, claims map[string]any) string {
	t.Helper()
	opts := (&jose.SignerOptions{}).WithType("JWT")
	if s.kid != "" {
		opts = opts.WithHeader("kid", s.kid)
	}
	sg, err := jose.NewSigner(jose.SigningKey{Algorithm: s.alg, Key: s.key}, opts)
	if err != nil {
		t.Fatal(err)
	}
	pl, _ := json.Marshal(claims)
	obj, err := sg.Sign(pl)
	if err != nil {
		t.Fatal(err)
	}
	out, err := obj.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func claims(iss, sub string, extra ...any) map[string]any {
	c := map[string]any{"iss": iss, "sub": sub, "exp": testNow.Add(time.Hour).Unix()}
	for i := 0; i+1 < len(extra); i += 2 {
		c[extra[i].(string)] = extra[i+1]
	}
	return c
}

// istioConfig is the JwtAuthentication istiod emits for one or more
// jwtRules (pilot/pkg/security/authn/policy_applier.go
// convertToEnvoyJwtConfig).
func istioConfig(providers ...*jwtv3.JwtProvider) *jwtv3.JwtAuthentication {
	cfg := &jwtv3.JwtAuthentication{Providers: map[string]*jwtv3.JwtProvider{}, BypassCorsPreflight: true}
	var inner, outer []*jwtv3.JwtRequirement
	for i, p := range providers {
		name := "origins-" + string(rune('0'+i))
		cfg.Providers[name] = p
		inner = append(inner, &jwtv3.JwtRequirement{RequiresType: &jwtv3.JwtRequirement_RequiresAny{RequiresAny: &jwtv3.JwtRequirementOrList{
			Requirements: []*jwtv3.JwtRequirement{
				{RequiresType: &jwtv3.JwtRequirement_ProviderName{ProviderName: name}},
				{RequiresType: &jwtv3.JwtRequirement_AllowMissing{AllowMissing: &emptypb.Empty{}}},
			},
		}}})
		outer = append(outer, &jwtv3.JwtRequirement{RequiresType: &jwtv3.JwtRequirement_ProviderName{ProviderName: name}})
	}
	req := inner[0]
	if len(inner) > 1 {
		outer = append(outer, &jwtv3.JwtRequirement{RequiresType: &jwtv3.JwtRequirement_RequiresAll{RequiresAll: &jwtv3.JwtRequirementAndList{Requirements: inner}}})
		req = &jwtv3.JwtRequirement{RequiresType: &jwtv3.JwtRequirement_RequiresAny{RequiresAny: &jwtv3.JwtRequirementOrList{Requirements: outer}}}
	}
	cfg.Rules = []*jwtv3.RequirementRule{{
		Match:           &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
		RequirementType: &jwtv3.RequirementRule_Requires{Requires: req},
	}}
	return cfg
}

func localJWKS(s string) *jwtv3.JwtProvider_LocalJwks {
	return &jwtv3.JwtProvider_LocalJwks{LocalJwks: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: s}}}
}

func build(t *testing.T, cfg *jwtv3.JwtAuthentication) *Filter {
	t.Helper()
	a, err := anypb.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse(a, Options{Now: func() time.Time { return testNow }})
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return f
}

func request(method, target string, hdr http.Header) *Request {
	path, query, _ := strings.Cut(target, "?")
	return &Request{Method: method, Path: path, Query: query, Header: func(name string) []string { return hdr.Values(name) }}
}

func bearer(tok string) http.Header { return http.Header{"Authorization": {"Bearer " + tok}} }

// headerEdits records EditHeaders' calls on an http.Header.
type headerEdits http.Header

func (h headerEdits) Del(name string)        { http.Header(h).Del(name) }
func (h headerEdits) Add(name, value string) { http.Header(h).Add(name, value) }

func TestAuthenticateIstioSingleProvider(t *testing.T) {
	rs := newSigner(t, "k1", jose.RS256)
	other := newSigner(t, "k1", jose.RS256) // same kid, another key
	f := build(t, istioConfig(&jwtv3.JwtProvider{
		Issuer: "https://issuer.example", Audiences: []string{"svc-a"}, JwksSourceSpecifier: localJWKS(jwks(t, rs)),
		PayloadInMetadata: "payload",
	}))
	good := rs.sign(t, claims("https://issuer.example", "alice", "aud", "svc-a"))
	for _, tc := range []struct {
		name string
		req  *Request
		want Status
		code int
	}{
		{"valid", request("GET", "/", bearer(good)), OK, 0},
		{"missing token allowed", request("GET", "/", http.Header{}), OK, 0},
		{"other scheme is no token", request("GET", "/", http.Header{"Authorization": {"Basic dXNlcjpwdw=="}}), OK, 0},
		{"expired", request("GET", "/", bearer(rs.sign(t, claims("https://issuer.example", "a", "aud", "svc-a", "exp", testNow.Add(-2*time.Minute).Unix())))), JwtExpired, 401},
		{"expired within clock skew", request("GET", "/", bearer(rs.sign(t, claims("https://issuer.example", "a", "aud", "svc-a", "exp", testNow.Add(-30*time.Second).Unix())))), OK, 0},
		{"not yet valid", request("GET", "/", bearer(rs.sign(t, claims("https://issuer.example", "a", "aud", "svc-a", "nbf", testNow.Add(2*time.Minute).Unix())))), JwtNotYetValid, 401},
		{"wrong issuer", request("GET", "/", bearer(rs.sign(t, claims("https://evil.example", "a", "aud", "svc-a")))), JwtUnknownIssuer, 401},
		{"wrong audience", request("GET", "/", bearer(rs.sign(t, claims("https://issuer.example", "a", "aud", "svc-b")))), JwtAudienceNotAllowed, 403},
		{"audience list with scheme", request("GET", "/", bearer(rs.sign(t, claims("https://issuer.example", "a", "aud", []string{"x", "https://svc-a/"})))), OK, 0},
		{"signed by another key", request("GET", "/", bearer(other.sign(t, claims("https://issuer.example", "a", "aud", "svc-a")))), JwtVerificationFail, 401},
		{"unknown kid", request("GET", "/", bearer(newSigner(t, "k2", jose.RS256).sign(t, claims("https://issuer.example", "a", "aud", "svc-a")))), JwksKidAlgMismatch, 401},
		{"garbage", request("GET", "/", bearer("abc.def")), JwtBadFormat, 401},
		{"bad header base64", request("GET", "/", bearer("a.b.c")), JwtHeaderParseErrorBadBase64, 401},
		{"token ends at a character a JWT cannot hold", request("GET", "/", bearer("a@.b.c")), JwtBadFormat, 401},
		{"bad header json", request("GET", "/", bearer(base64.RawURLEncoding.EncodeToString([]byte("{x"))+".e30.c2ln")), JwtHeaderParseErrorBadJSON, 401},
		{"alg none", request("GET", "/", bearer(base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none"}`))+".e30.c2ln")), JwtHeaderNotImplementedAlg, 401},
		{"token in access_token param", request("GET", "/?x=1&access_token="+good, http.Header{}), OK, 0},
		{"bad token in access_token param", request("GET", "/?access_token=e30.b.c", http.Header{}), JwtHeaderBadAlg, 401},
		{"cors preflight bypasses", request("OPTIONS", "/", http.Header{"Origin": {"x"}, "Access-Control-Request-Method": {"GET"}, "Authorization": {"Bearer a.b.c"}}), OK, 0},
		{"options without preflight headers is checked", request("OPTIONS", "/", bearer("a.b.c")), JwtHeaderParseErrorBadBase64, 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := f.Authenticate(tc.req)
			if res.Status != tc.want {
				t.Fatalf("status = %q; want %q", res.Status, tc.want)
			}
			if tc.want != OK && res.Code() != tc.code {
				t.Errorf("code = %d; want %d", res.Code(), tc.code)
			}
		})
	}
	t.Run("verified token's identity", func(t *testing.T) {
		res := f.Authenticate(request("GET", "/", bearer(rs.sign(t, claims("https://issuer.example", "alice", "aud", "svc-a", "azp", "web", "scope", "read write")))))
		if res.Status != OK || len(res.Verified) != 1 {
			t.Fatalf("res = %+v", res)
		}
		v := &res.Verified[0]
		if v.Principal() != "https://issuer.example/alice" || !reflect.DeepEqual(v.Audiences(), []string{"svc-a"}) || v.Presenter() != "web" {
			t.Errorf("principal %q audiences %v presenter %q", v.Principal(), v.Audiences(), v.Presenter())
		}
		if v.MetadataKey() != "payload" || v.Claims()["sub"] != "alice" {
			t.Errorf("metadata key %q claims %v", v.MetadataKey(), v.Claims())
		}
		if v.MetadataPayload()["scope"] != "read write" {
			t.Errorf("scope split without normalize_payload_in_metadata: %v", v.MetadataPayload()["scope"])
		}
	})
	t.Run("missing token has nothing verified", func(t *testing.T) {
		if res := f.Authenticate(request("GET", "/", http.Header{})); len(res.Verified) != 0 {
			t.Errorf("verified %v", res.Verified)
		}
	})
}

func TestAlgorithms(t *testing.T) {
	for _, alg := range []jose.SignatureAlgorithm{jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.ES256, jose.ES384, jose.EdDSA} {
		t.Run(string(alg), func(t *testing.T) {
			s := newSigner(t, "", alg)
			other := newSigner(t, "", alg)
			f := build(t, istioConfig(&jwtv3.JwtProvider{Issuer: "iss", JwksSourceSpecifier: localJWKS(jwks(t, s))}))
			if res := f.Authenticate(request("GET", "/", bearer(s.sign(t, claims("iss", "a"))))); res.Status != OK {
				t.Errorf("own key: %v", res.Status)
			}
			if res := f.Authenticate(request("GET", "/", bearer(other.sign(t, claims("iss", "a"))))); res.Status != JwtVerificationFail {
				t.Errorf("other key: %v; want %v", res.Status, JwtVerificationFail)
			}
		})
	}
	t.Run("key alg must match the token's", func(t *testing.T) {
		s := newSigner(t, "", jose.RS256)
		k := s.jwk()
		k.Algorithm = "RS512"
		b, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{k}})
		f := build(t, istioConfig(&jwtv3.JwtProvider{Issuer: "iss", JwksSourceSpecifier: localJWKS(string(b))}))
		if res := f.Authenticate(request("GET", "/", bearer(s.sign(t, claims("iss", "a"))))); res.Status != JwksKidAlgMismatch {
			t.Errorf("status %v; want %v", res.Status, JwksKidAlgMismatch)
		}
	})
	t.Run("an unparsable jwks fails every token", func(t *testing.T) {
		s := newSigner(t, "", jose.RS256)
		f := build(t, istioConfig(&jwtv3.JwtProvider{Issuer: "iss", JwksSourceSpecifier: localJWKS("not json")}))
		if res := f.Authenticate(request("GET", "/", bearer(s.sign(t, claims("iss", "a"))))); res.Status != JwksKidAlgMismatch {
			t.Errorf("status %v; want %v", res.Status, JwksKidAlgMismatch)
		}
		if res := f.Authenticate(request("GET", "/", http.Header{})); res.Status != OK {
			t.Errorf("missing token: %v", res.Status)
		}
	})
}

func TestLocationsAndHeaders(t *testing.T) {
	s := newSigner(t, "k", jose.ES256)
	f := build(t, istioConfig(&jwtv3.JwtProvider{
		Issuer: "iss", JwksSourceSpecifier: localJWKS(jwks(t, s)),
		FromHeaders:          []*jwtv3.JwtHeader{{Name: "X-Jwt", ValuePrefix: "Token "}},
		FromParams:           []string{"tok"},
		FromCookies:          []string{"session"},
		ForwardPayloadHeader: "X-Jwt-Payload",
		ClaimToHeaders: []*jwtv3.JwtClaimToHeader{
			{HeaderName: "x-sub", ClaimName: "sub"},
			{HeaderName: "x-nested", ClaimName: "org.team"},
			{HeaderName: "x-groups", ClaimName: "groups"},
			{HeaderName: "x-absent", ClaimName: "nope"},
		},
		NormalizePayloadInMetadata: &jwtv3.JwtProvider_NormalizePayload{SpaceDelimitedClaims: []string{"scope"}},
		PayloadInMetadata:          "payload",
	}))
	tok := s.sign(t, claims("iss", "bob", "org", map[string]any{"team": "blue"}, "groups", []string{"a", "b"}, "scope", "read write"))
	t.Run("header with prefix, forward false removes it", func(t *testing.T) {
		h := http.Header{"X-Jwt": {"Token " + tok}, "Authorization": {"Bearer garbage"}}
		res := f.Authenticate(request("GET", "/", h))
		if res.Status != OK {
			t.Fatalf("status %v", res.Status)
		}
		res.EditHeaders(headerEdits(h))
		if _, ok := h["X-Jwt"]; ok {
			t.Error("x-jwt forwarded with forward: false")
		}
		if h.Get("Authorization") == "" {
			t.Error("a header the provider does not read was removed")
		}
		pl, err := base64.RawURLEncoding.DecodeString(h.Get("X-Jwt-Payload"))
		if err != nil || !strings.Contains(string(pl), `"sub":"bob"`) {
			t.Errorf("x-jwt-payload %q: %s %v", h.Get("X-Jwt-Payload"), pl, err)
		}
		if h.Get("X-Sub") != "bob" || h.Get("X-Nested") != "blue" || h.Get("X-Groups") != "a,b" || h.Get("X-Absent") != "" {
			t.Errorf("claim headers %v", h)
		}
		if got := res.Verified[0].MetadataPayload()["scope"]; !reflect.DeepEqual(got, []any{"read", "write"}) {
			t.Errorf("normalized scope %v", got)
		}
	})
	t.Run("without the prefix there is no token", func(t *testing.T) {
		if res := f.Authenticate(request("GET", "/", http.Header{"X-Jwt": {"a.b.c"}})); res.Status != OK || len(res.Verified) != 0 {
			t.Errorf("res %+v", res)
		}
	})
	t.Run("default locations are replaced", func(t *testing.T) {
		if res := f.Authenticate(request("GET", "/", bearer("a.b.c"))); res.Status != OK {
			t.Errorf("authorization read although from_headers is set: %v", res.Status)
		}
	})
	t.Run("param", func(t *testing.T) {
		if res := f.Authenticate(request("GET", "/p?tok="+tok, http.Header{})); res.Status != OK || len(res.Verified) != 1 {
			t.Errorf("res %+v", res)
		}
		if res := f.Authenticate(request("GET", "/p?tok=x.y.z", http.Header{})); res.Status == OK {
			t.Error("bad token in param passed")
		}
	})
	t.Run("cookie", func(t *testing.T) {
		if res := f.Authenticate(request("GET", "/", http.Header{"Cookie": {"a=b; session=" + tok}})); res.Status != OK || len(res.Verified) != 1 {
			t.Errorf("res %+v", res)
		}
	})
	t.Run("forward keeps the header, padded payload", func(t *testing.T) {
		g := build(t, istioConfig(&jwtv3.JwtProvider{Issuer: "iss", JwksSourceSpecifier: localJWKS(jwks(t, s)), Forward: true, ForwardPayloadHeader: "x-p", PadForwardPayloadHeader: true}))
		h := bearer(tok)
		res := g.Authenticate(request("GET", "/", h))
		res.EditHeaders(headerEdits(h))
		if h.Get("Authorization") == "" {
			t.Error("authorization removed with forward: true")
		}
		if _, err := base64.URLEncoding.DecodeString(h.Get("X-P")); err != nil || len(h.Get("X-P"))%4 != 0 {
			t.Errorf("padded payload %q: %v", h.Get("X-P"), err)
		}
	})
}

func TestIstioMultipleProviders(t *testing.T) {
	a := newSigner(t, "a", jose.RS256)
	b := newSigner(t, "b", jose.ES256)
	f := build(t, istioConfig(
		&jwtv3.JwtProvider{Issuer: "iss-a", JwksSourceSpecifier: localJWKS(jwks(t, a))},
		&jwtv3.JwtProvider{Issuer: "iss-b", JwksSourceSpecifier: localJWKS(jwks(t, b))},
	))
	for _, tc := range []struct {
		name string
		h    http.Header
		want Status
	}{
		{"token of a", bearer(a.sign(t, claims("iss-a", "x"))), OK},
		{"token of b", bearer(b.sign(t, claims("iss-b", "x"))), OK},
		{"none", http.Header{}, OK},
		{"unknown issuer", bearer(b.sign(t, claims("iss-c", "x"))), JwtUnknownIssuer},
		{"b's issuer, a's key", bearer(a.sign(t, claims("iss-b", "x"))), JwksKidAlgMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if res := f.Authenticate(request("GET", "/", tc.h)); res.Status != tc.want {
				t.Errorf("status %q; want %q", res.Status, tc.want)
			}
		})
	}
}

func TestRequirements(t *testing.T) {
	s := newSigner(t, "", jose.RS256)
	p := &jwtv3.JwtProvider{Issuer: "iss", JwksSourceSpecifier: localJWKS(jwks(t, s)), Audiences: []string{"x"}}
	prov := &jwtv3.JwtRequirement{RequiresType: &jwtv3.JwtRequirement_ProviderName{ProviderName: "p"}}
	cfg := &jwtv3.JwtAuthentication{
		Providers: map[string]*jwtv3.JwtProvider{"p": p},
		Rules: []*jwtv3.RequirementRule{
			{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: "/public"}}},
			{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/aud"}}, RequirementType: &jwtv3.RequirementRule_Requires{Requires: &jwtv3.JwtRequirement{
				RequiresType: &jwtv3.JwtRequirement_ProviderAndAudiences{ProviderAndAudiences: &jwtv3.ProviderWithAudiences{ProviderName: "p", Audiences: []string{"y"}}}}}},
			{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/lax"}}, RequirementType: &jwtv3.RequirementRule_Requires{Requires: &jwtv3.JwtRequirement{
				RequiresType: &jwtv3.JwtRequirement_AllowMissingOrFailed{AllowMissingOrFailed: &emptypb.Empty{}}}}},
			{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}}, RequirementType: &jwtv3.RequirementRule_RequirementName{RequirementName: "strict"}},
		},
		RequirementMap: map[string]*jwtv3.JwtRequirement{"strict": prov},
	}
	f := build(t, cfg)
	tokX := s.sign(t, claims("iss", "a", "aud", "x"))
	tokY := s.sign(t, claims("iss", "a", "aud", "y"))
	for _, tc := range []struct {
		path string
		h    http.Header
		want Status
	}{
		{"/public", bearer("a.b.c"), OK},
		{"/", http.Header{}, JwtMissed},
		{"/", bearer(tokX), OK},
		{"/", bearer(tokY), JwtAudienceNotAllowed},
		{"/aud", bearer(tokY), OK},
		{"/aud", bearer(tokX), JwtAudienceNotAllowed},
		{"/lax", bearer("a.b.c"), OK},
	} {
		if res := f.Authenticate(request("GET", tc.path, tc.h)); res.Status != tc.want {
			t.Errorf("%s %v: status %q; want %q", tc.path, tc.h, res.Status, tc.want)
		}
	}
}

func TestRefusedFields(t *testing.T) {
	ok := func() *jwtv3.JwtProvider {
		return &jwtv3.JwtProvider{Issuer: "iss", JwksSourceSpecifier: localJWKS(`{"keys":[]}`)}
	}
	for _, tc := range []struct {
		want string
		mod  func(c *jwtv3.JwtAuthentication, p *jwtv3.JwtProvider)
	}{
		{"remote_jwks", func(_ *jwtv3.JwtAuthentication, p *jwtv3.JwtProvider) {
			p.JwksSourceSpecifier = &jwtv3.JwtProvider_RemoteJwks{RemoteJwks: &jwtv3.RemoteJwks{HttpUri: &corev3.HttpUri{Uri: "http://x"}}}
		}},
		{"jwks_source_specifier", func(_ *jwtv3.JwtAuthentication, p *jwtv3.JwtProvider) { p.JwksSourceSpecifier = nil }},
		{"local_jwks: data source", func(_ *jwtv3.JwtAuthentication, p *jwtv3.JwtProvider) {
			p.JwksSourceSpecifier = &jwtv3.JwtProvider_LocalJwks{LocalJwks: &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: "/x"}}}
		}},
		{"require_expiration", func(_ *jwtv3.JwtAuthentication, p *jwtv3.JwtProvider) { p.RequireExpiration = true }},
		{"max_lifetime", func(_ *jwtv3.JwtAuthentication, p *jwtv3.JwtProvider) { p.MaxLifetime = durationpb.New(time.Hour) }},
		{"header_in_metadata", func(_ *jwtv3.JwtAuthentication, p *jwtv3.JwtProvider) { p.HeaderInMetadata = "h" }},
		{"failed_status_in_metadata", func(_ *jwtv3.JwtAuthentication, p *jwtv3.JwtProvider) { p.FailedStatusInMetadata = "h" }},
		{"clear_route_cache", func(_ *jwtv3.JwtAuthentication, p *jwtv3.JwtProvider) { p.ClearRouteCache = true }},
		{"jwt_cache_config", func(_ *jwtv3.JwtAuthentication, p *jwtv3.JwtProvider) { p.JwtCacheConfig = &jwtv3.JwtCacheConfig{} }},
		{"claim_path", func(_ *jwtv3.JwtAuthentication, p *jwtv3.JwtProvider) {
			p.ClaimToHeaders = []*jwtv3.JwtClaimToHeader{{HeaderName: "h", ClaimName: "c", ClaimPath: []*jwtv3.JwtClaimToHeader_PathSegment{{Key: "k"}}}}
		}},
		{"filter_state_rules", func(c *jwtv3.JwtAuthentication, _ *jwtv3.JwtProvider) {
			c.FilterStateRules = &jwtv3.FilterStateRule{Name: "x"}
		}},
		{"strip_failure_response", func(c *jwtv3.JwtAuthentication, _ *jwtv3.JwtProvider) { c.StripFailureResponse = true }},
		{"headers is not supported", func(c *jwtv3.JwtAuthentication, _ *jwtv3.JwtProvider) {
			c.Rules[0].Match.Headers = []*routev3.HeaderMatcher{{Name: "x"}}
		}},
		{`provider_name "nope"`, func(c *jwtv3.JwtAuthentication, _ *jwtv3.JwtProvider) {
			c.Rules[0].RequirementType = &jwtv3.RequirementRule_Requires{Requires: &jwtv3.JwtRequirement{RequiresType: &jwtv3.JwtRequirement_ProviderName{ProviderName: "nope"}}}
		}},
		{"requirement_name", func(c *jwtv3.JwtAuthentication, _ *jwtv3.JwtProvider) {
			c.Rules[0].RequirementType = &jwtv3.RequirementRule_RequirementName{RequirementName: "nope"}
		}},
		{"extract_only_without_validation", func(c *jwtv3.JwtAuthentication, _ *jwtv3.JwtProvider) {
			c.Rules[0].RequirementType = &jwtv3.RequirementRule_Requires{Requires: &jwtv3.JwtRequirement{RequiresType: &jwtv3.JwtRequirement_ExtractOnlyWithoutValidation{ExtractOnlyWithoutValidation: &jwtv3.ExtractOnlyWithoutValidation{}}}}
		}},
	} {
		t.Run(tc.want, func(t *testing.T) {
			p := ok()
			c := istioConfig(p)
			tc.mod(c, p)
			a, _ := anypb.New(c)
			_, err := Parse(a, Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v; want one naming %q", err, tc.want)
			}
		})
	}
	t.Run("istio's config is accepted", func(t *testing.T) {
		c := istioConfig(ok())
		c.Providers["origins-0"].NormalizePayloadInMetadata = &jwtv3.JwtProvider_NormalizePayload{SpaceDelimitedClaims: []string{"permission", "scope"}}
		a, _ := anypb.New(c)
		if _, err := Parse(a, Options{}); err != nil {
			t.Error(err)
		}
	})
}

// TestOutputHeadersStripped: a client's copies of the headers the
// providers write (forward_payload_header, claim_to_headers) never reach
// the application, whatever the request: no token, a token of another
// provider, a path without a requirement, a failed token under
// allow_missing_or_failed, a CORS preflight. The codecs call
// StripOutputHeaders, then Authenticate, then EditHeaders; so does this.
func TestOutputHeadersStripped(t *testing.T) {
	a := newSigner(t, "a", jose.RS256)
	b := newSigner(t, "b", jose.ES256)
	provider := func(iss, name string, s signer) *jwtv3.JwtProvider {
		return &jwtv3.JwtProvider{Issuer: iss, JwksSourceSpecifier: localJWKS(jwks(t, s)),
			ForwardPayloadHeader: "X-" + name + "-Payload",
			ClaimToHeaders:       []*jwtv3.JwtClaimToHeader{{HeaderName: "x-" + name + "-sub", ClaimName: "sub"}}}
	}
	istio := istioConfig(provider("iss-a", "a", a), provider("iss-b", "b", b))
	// The same providers behind rules Istio does not emit: a path with no
	// requirement and one that lets a failed token through.
	lax := istioConfig(provider("iss-a", "a", a), provider("iss-b", "b", b))
	lax.Rules = append([]*jwtv3.RequirementRule{
		{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/public"}}},
		{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/lax"}}, RequirementType: &jwtv3.RequirementRule_Requires{Requires: &jwtv3.JwtRequirement{
			RequiresType: &jwtv3.JwtRequirement_AllowMissingOrFailed{AllowMissingOrFailed: &emptypb.Empty{}}}}},
	}, lax.Rules...)
	forged := func(h http.Header) http.Header {
		for _, n := range []string{"X-A-Payload", "X-A-Sub", "X-B-Payload", "X-B-Sub"} {
			h.Add(n, "forged")
		}
		return h
	}
	tokA := a.sign(t, claims("iss-a", "alice"))
	tokB := b.sign(t, claims("iss-b", "bob"))
	expiredA := a.sign(t, claims("iss-a", "alice", "exp", testNow.Add(-time.Hour).Unix()))
	for _, tc := range []struct {
		name   string
		cfg    *jwtv3.JwtAuthentication
		method string
		path   string
		h      http.Header
		want   map[string]string // the output headers the application gets
	}{
		{"no token", istio, "GET", "/", forged(http.Header{}), nil},
		{"token of a", istio, "GET", "/", forged(bearer(tokA)), map[string]string{"X-A-Sub": "alice", "X-A-Payload": strings.Split(tokA, ".")[1]}},
		{"token of b", istio, "GET", "/", forged(bearer(tokB)), map[string]string{"X-B-Sub": "bob", "X-B-Payload": strings.Split(tokB, ".")[1]}},
		{"cors preflight", istio, "OPTIONS", "/", forged(http.Header{"Origin": {"o"}, "Access-Control-Request-Method": {"GET"}}), nil},
		{"no requirement", lax, "GET", "/public", forged(bearer(tokA)), nil},
		{"allow_missing_or_failed, failed", lax, "GET", "/lax", forged(bearer(expiredA)), nil},
		{"allow_missing_or_failed, missing", lax, "GET", "/lax", forged(http.Header{}), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := build(t, tc.cfg)
			f.StripOutputHeaders(headerEdits(tc.h))
			res := f.Authenticate(request(tc.method, tc.path, tc.h))
			if res.Status != OK {
				t.Fatalf("status %q; want OK", res.Status)
			}
			res.EditHeaders(headerEdits(tc.h))
			for _, n := range []string{"X-A-Payload", "X-A-Sub", "X-B-Payload", "X-B-Sub"} {
				got := tc.h.Values(n)
				want, ok := tc.want[n]
				switch {
				case !ok && len(got) > 0:
					t.Errorf("%s reaches the application: %q", n, got)
				case ok && (len(got) != 1 || got[0] != want):
					t.Errorf("%s = %q; want [%q]", n, got, want)
				}
			}
		})
	}
}
