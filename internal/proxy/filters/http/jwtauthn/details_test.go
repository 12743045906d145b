package jwtauthn

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	jwtv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/jwt_authn/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	jose "github.com/go-jose/go-jose/v4"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/proxy/httpfilter"
)

func TestWriteMetadata(t *testing.T) {
	a := newSigner(t, "a", jose.ES256)
	b := newSigner(t, "b", jose.ES256)
	// Both tokens required: two verified, the first one's identity.
	f := build(t, &jwtv3.JwtAuthentication{
		Providers: map[string]*jwtv3.JwtProvider{
			"a": {Issuer: "iss-a", JwksSourceSpecifier: localJWKS(jwks(t, a)), PayloadInMetadata: "payload",
				NormalizePayloadInMetadata: &jwtv3.JwtProvider_NormalizePayload{SpaceDelimitedClaims: []string{"scope"}}},
			"b": {Issuer: "iss-b", JwksSourceSpecifier: localJWKS(jwks(t, b)), FromHeaders: []*jwtv3.JwtHeader{{Name: "x-b"}}},
		},
		Rules: []*jwtv3.RequirementRule{{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
			RequirementType: &jwtv3.RequirementRule_Requires{Requires: &jwtv3.JwtRequirement{RequiresType: &jwtv3.JwtRequirement_RequiresAll{
				RequiresAll: &jwtv3.JwtRequirementAndList{Requirements: []*jwtv3.JwtRequirement{
					{RequiresType: &jwtv3.JwtRequirement_ProviderName{ProviderName: "a"}},
					{RequiresType: &jwtv3.JwtRequirement_ProviderName{ProviderName: "b"}},
				}}}}}}},
	})
	h := bearer(a.sign(t, claims("iss-a", "alice", "aud", []string{"x", "y"}, "azp", "web", "scope", "r w")))
	h.Set("X-B", b.sign(t, claims("iss-b", "bob")))
	res := f.Authenticate(request("GET", "/", h))
	if res.Status != OK || len(res.Verified) != 2 {
		t.Fatalf("res %+v", res)
	}
	var md httpfilter.Metadata
	res.WriteMetadata(&md)
	want := map[string]any{KeyPrincipal: "iss-a/alice", KeyAudiences: []string{"x", "y"}, KeyPresenter: "web"}
	for k, w := range want {
		if v, _ := md.Get(AuthnNamespace, k); !reflect.DeepEqual(v, w) {
			t.Errorf("%s = %v; want %v", k, v, w)
		}
	}
	c, _ := md.Get(AuthnNamespace, KeyClaims)
	if cm, ok := c.(map[string]any); !ok || !reflect.DeepEqual(cm["scope"], []any{"r", "w"}) || cm["sub"] != "alice" {
		t.Errorf("claims %v", c)
	}
	if v, ok := md.Get(Name, "payload"); !ok || v.(map[string]any)["sub"] != "alice" {
		t.Errorf("payload %v", v)
	}

	// Without sub there is no principal; without aud or azp, no keys.
	h = bearer(a.sign(t, map[string]any{"iss": "iss-a", "exp": testNow.Add(time.Hour).Unix()}))
	h.Set("X-B", b.sign(t, claims("iss-b", "bob")))
	res = f.Authenticate(request("GET", "/", h))
	var md2 httpfilter.Metadata
	res.WriteMetadata(&md2)
	for _, k := range []string{KeyPrincipal, KeyAudiences, KeyPresenter} {
		if v, ok := md2.Get(AuthnNamespace, k); ok {
			t.Errorf("%s = %v without the claim", k, v)
		}
	}
	if _, ok := md2.Get(AuthnNamespace, KeyClaims); !ok {
		t.Error("claims not written")
	}
	// Nothing verified: nothing written.
	var md3 httpfilter.Metadata
	Result{}.WriteMetadata(&md3)
	if _, ok := md3.Get(AuthnNamespace, KeyClaims); ok {
		t.Error("metadata written without a token")
	}
}

func TestMoreRefusals(t *testing.T) {
	good := func() *jwtv3.JwtProvider {
		return &jwtv3.JwtProvider{Issuer: "iss", JwksSourceSpecifier: localJWKS(`{"keys":[]}`)}
	}
	listOfOne := &jwtv3.JwtRequirement{RequiresType: &jwtv3.JwtRequirement_RequiresAny{RequiresAny: &jwtv3.JwtRequirementOrList{
		Requirements: []*jwtv3.JwtRequirement{{RequiresType: &jwtv3.JwtRequirement_ProviderName{ProviderName: "origins-0"}}}}}}
	for _, tc := range []struct {
		want string
		mod  func(c *jwtv3.JwtAuthentication, p *jwtv3.JwtProvider)
	}{
		{"stat_prefix", func(c *jwtv3.JwtAuthentication, _ *jwtv3.JwtProvider) { c.StatPrefix = "x" }},
		{"subjects", func(_ *jwtv3.JwtAuthentication, p *jwtv3.JwtProvider) {
			p.Subjects = &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "x"}}
		}},
		{"from_headers[0].name", func(_ *jwtv3.JwtAuthentication, p *jwtv3.JwtProvider) {
			p.FromHeaders = []*jwtv3.JwtHeader{{ValuePrefix: "x"}}
		}},
		{"claim_to_headers[0]: header_name and claim_name", func(_ *jwtv3.JwtAuthentication, p *jwtv3.JwtProvider) {
			p.ClaimToHeaders = []*jwtv3.JwtClaimToHeader{{HeaderName: "h"}}
		}},
		{"claim_to_headers[1]: header_name and claim_name", func(_ *jwtv3.JwtAuthentication, p *jwtv3.JwtProvider) {
			p.ClaimToHeaders = []*jwtv3.JwtClaimToHeader{{HeaderName: "h", ClaimName: "c"}, {ClaimName: "c"}}
		}},
		{"requires_any.requirements: at least 2", func(c *jwtv3.JwtAuthentication, _ *jwtv3.JwtProvider) {
			c.Rules[0].RequirementType = &jwtv3.RequirementRule_Requires{Requires: listOfOne}
		}},
		{"requires_type is required", func(c *jwtv3.JwtAuthentication, _ *jwtv3.JwtProvider) {
			c.Rules[0].RequirementType = &jwtv3.RequirementRule_Requires{Requires: &jwtv3.JwtRequirement{}}
		}},
		{"requirement_map[\"bad\"]", func(c *jwtv3.JwtAuthentication, _ *jwtv3.JwtProvider) {
			c.RequirementMap = map[string]*jwtv3.JwtRequirement{"bad": {}}
		}},
		{"rules[0].match: is required", func(c *jwtv3.JwtAuthentication, _ *jwtv3.JwtProvider) { c.Rules[0].Match = nil }},
		{"query_parameters", func(c *jwtv3.JwtAuthentication, _ *jwtv3.JwtProvider) {
			c.Rules[0].Match.QueryParameters = []*routev3.QueryParameterMatcher{{Name: "x"}}
		}},
		{"only prefix, path and safe_regex", func(c *jwtv3.JwtAuthentication, _ *jwtv3.JwtProvider) {
			c.Rules[0].Match.Grpc = &routev3.RouteMatch_GrpcRouteMatchOptions{}
		}},
		{"safe_regex", func(c *jwtv3.JwtAuthentication, _ *jwtv3.JwtProvider) {
			c.Rules[0].Match.PathSpecifier = &routev3.RouteMatch_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: "("}}
		}},
		{"path specifier", func(c *jwtv3.JwtAuthentication, _ *jwtv3.JwtProvider) {
			c.Rules[0].Match.PathSpecifier = &routev3.RouteMatch_PathSeparatedPrefix{PathSeparatedPrefix: "/a"}
		}},
		{"provider_and_audiences.provider_name", func(c *jwtv3.JwtAuthentication, _ *jwtv3.JwtProvider) {
			c.Rules[0].RequirementType = &jwtv3.RequirementRule_Requires{Requires: &jwtv3.JwtRequirement{RequiresType: &jwtv3.JwtRequirement_ProviderAndAudiences{
				ProviderAndAudiences: &jwtv3.ProviderWithAudiences{ProviderName: "nope"}}}}
		}},
	} {
		t.Run(tc.want, func(t *testing.T) {
			p := good()
			c := istioConfig(p)
			tc.mod(c, p)
			a, _ := anypb.New(c)
			if _, err := Parse(a, Options{}); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v; want one naming %q", err, tc.want)
			}
		})
	}
	if _, err := Parse(nil, Options{}); err == nil {
		t.Error("nil typed_config accepted")
	}
	if _, err := Parse(&anypb.Any{TypeUrl: "type.googleapis.com/envoy.extensions.filters.http.jwt_authn.v3.JwtAuthentication", Value: []byte{0xff}}, Options{}); err == nil {
		t.Error("garbage typed_config accepted")
	}
	for _, st := range []Status{JwksKidAlgMismatch + 1, 200} {
		if s := st.String(); s != fmt.Sprintf("status %d", st) {
			t.Errorf("unknown status %d: %q", st, s)
		}
	}
	if s := JwksKidAlgMismatch.String(); s != "Jwks doesn't have key to match kid or alg from Jwt" {
		t.Errorf("last status: %q", s)
	}
}

func TestRuleMatches(t *testing.T) {
	s := newSigner(t, "", jose.ES256)
	req := &jwtv3.JwtRequirement{RequiresType: &jwtv3.JwtRequirement_ProviderName{ProviderName: "p"}}
	rule := func(m *routev3.RouteMatch) *jwtv3.RequirementRule {
		return &jwtv3.RequirementRule{Match: m, RequirementType: &jwtv3.RequirementRule_Requires{Requires: req}}
	}
	f := build(t, &jwtv3.JwtAuthentication{
		Providers: map[string]*jwtv3.JwtProvider{"p": {Issuer: "iss", JwksSourceSpecifier: localJWKS(jwks(t, s))}},
		Rules: []*jwtv3.RequirementRule{
			rule(&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: "/Exact"}, CaseSensitive: wrapperspb.Bool(false)}),
			rule(&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/Pre"}}),
			rule(&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: "/re/[0-9]+"}}}),
		},
	})
	for path, want := range map[string]Status{
		"/exact": JwtMissed, "/Exact": JwtMissed, "/exact/x": OK,
		"/Pre/x": JwtMissed, "/pre/x": OK,
		"/re/12": JwtMissed, "/re/x": OK, "/re/12/x": OK,
	} {
		if got := f.Authenticate(request("GET", path, http.Header{})).Status; got != want {
			t.Errorf("%s: %q; want %q", path, got, want)
		}
	}
}

func TestKeysAndClaims(t *testing.T) {
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	es := signer{alg: jose.ES256, key: ec}
	enc := jose.JSONWebKey{Key: &ec.PublicKey, Use: "enc"}
	priv := jose.JSONWebKey{Key: ec} // a private JWK: its public part is used
	set := func(keys ...jose.JSONWebKey) string {
		b, err := json.Marshal(jose.JSONWebKeySet{Keys: keys})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	auth := func(jwksJSON string, h http.Header) Status {
		f := build(t, istioConfig(&jwtv3.JwtProvider{Issuer: "iss", JwksSourceSpecifier: localJWKS(jwksJSON)}))
		return f.Authenticate(request("GET", "/", h)).Status
	}
	tok := es.sign(t, claims("iss", "a"))
	if st := auth(set(enc), bearer(tok)); st != JwksKidAlgMismatch {
		t.Errorf("encryption key used to verify: %v", st)
	}
	if st := auth(set(enc, priv), bearer(tok)); st != OK {
		t.Errorf("private JWK after an encryption key: %v", st)
	}
	// A P-256 key does not verify ES384.
	es384 := newSigner(t, "", jose.ES384)
	p256 := jose.JSONWebKey{Key: &ec.PublicKey}
	if st := auth(set(p256, es384.jwk()), bearer(es384.sign(t, claims("iss", "a")))); st != OK {
		t.Errorf("ES384 with a P-256 key first: %v", st)
	}
	if st := auth(set(p256), bearer(es384.sign(t, claims("iss", "a")))); st != JwksKidAlgMismatch {
		t.Errorf("ES384 with only a P-256 key: %v", st)
	}
	// A key without kid is tried for a token with one.
	kidTok := signer{kid: "k", alg: jose.ES256, key: ec}.sign(t, claims("iss", "a"))
	if st := auth(set(p256), bearer(kidTok)); st != OK {
		t.Errorf("kid-less key, token with kid: %v", st)
	}
	// HMAC with an oct key.
	secret := []byte("0123456789abcdef0123456789abcdef")
	hs, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: secret}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pl, _ := json.Marshal(claims("iss", "a"))
	o, _ := hs.Sign(pl)
	hsTok, _ := o.CompactSerialize()
	if st := auth(set(jose.JSONWebKey{Key: secret, Algorithm: "HS256"}), bearer(hsTok)); st != OK {
		t.Errorf("HS256: %v", st)
	}
	if st := auth(set(p256), bearer(hsTok)); st != JwksKidAlgMismatch {
		t.Errorf("HS256 with an EC key: %v", st)
	}

	// Time claims that are not numbers, and fractions.
	for _, tc := range []struct {
		claims map[string]any
		want   Status
	}{
		{map[string]any{"iss": "iss", "exp": "soon"}, JwtPayloadParseErrorBadJSON},
		{map[string]any{"iss": "iss", "nbf": "later"}, JwtPayloadParseErrorBadJSON},
		{map[string]any{"iss": "iss", "exp": float64(testNow.Add(time.Hour).Unix()) + 0.5}, OK},
		{map[string]any{"iss": "iss", "exp": float64(testNow.Add(-time.Hour).Unix()) + 0.5}, JwtExpired},
		{map[string]any{"iss": "iss", "nbf": testNow.Add(30 * time.Second).Unix()}, OK}, // within the skew
		{map[string]any{"iss": "iss"}, OK},                                              // no exp: no limit
	} {
		if st := auth(set(p256), bearer(es.sign(t, tc.claims))); st != tc.want {
			t.Errorf("%v: %v; want %v", tc.claims, st, tc.want)
		}
	}
	// A payload that is JSON but not an object.
	hdr := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"ES256"}`))
	for pl, want := range map[string]Status{"bnVsbA": JwtPayloadParseErrorBadJSON, "a": JwtPayloadParseErrorBadBase64} {
		if st := auth(set(p256), bearer(hdr+"."+pl+".c2ln")); st != want {
			t.Errorf("payload %q: %v; want %v", pl, st, want)
		}
	}
	if st := auth(set(p256), bearer(base64.RawURLEncoding.EncodeToString([]byte(`{"alg":5}`))+".e30.c2ln")); st != JwtHeaderBadAlg {
		t.Errorf("numeric alg: %v", st)
	}

	// Claim headers: numbers and booleans; lists with objects and nested
	// paths through a non-object have no header.
	c := map[string]any{"n": json.Number("42"), "b": true, "f": false, "l": []any{"a", json.Number("1")}, "bad": []any{map[string]any{}}, "s": "str"}
	for path, want := range map[string]string{"n": "42", "b": "true", "f": "false", "l": "a,1", "s": "str"} {
		if got, ok := claimString(c, strings.Split(path, ".")); !ok || got != want {
			t.Errorf("claim %s = %q, %v; want %q", path, got, ok, want)
		}
	}
	for _, path := range []string{"bad", "s.x", "missing"} {
		if got, ok := claimString(c, strings.Split(path, ".")); ok {
			t.Errorf("claim %s = %q; want none", path, got)
		}
	}
}

func TestCookieAndHeaderExtraction(t *testing.T) {
	r := request("GET", "/", http.Header{"Cookie": {"bad cookie\x7f=;", "session=a.b.c"}})
	toks := extract(r, []location{{kind: inCookie, name: "session"}})
	if len(toks) != 1 || toks[0].token != "a.b.c" {
		t.Errorf("tokens %v; want the one in the second Cookie line", toks)
	}
	r = request("GET", "/", http.Header{"X-T": {"none here", "Token x.y.z, more"}})
	toks = extract(r, []location{{kind: inHeader, name: "x-t", prefix: "Token "}})
	if len(toks) != 1 || toks[0].token != "x.y.z" {
		t.Errorf("tokens %v; want x.y.z from the second value", toks)
	}
	if got := headerToken("Token   ", "Token "); got != "" {
		t.Errorf("prefix with only spaces after it: %q", got)
	}
	// allow_missing alone: a token anywhere fails it.
	f := build(t, &jwtv3.JwtAuthentication{
		Providers: map[string]*jwtv3.JwtProvider{"p": {Issuer: "iss", JwksSourceSpecifier: localJWKS(`{"keys":[]}`)}},
		Rules: []*jwtv3.RequirementRule{{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
			RequirementType: &jwtv3.RequirementRule_Requires{Requires: &jwtv3.JwtRequirement{RequiresType: &jwtv3.JwtRequirement_AllowMissing{AllowMissing: &emptypb.Empty{}}}}}},
	})
	if st := f.Authenticate(request("GET", "/", http.Header{})).Status; st != OK {
		t.Errorf("allow_missing without a token: %v", st)
	}
	if st := f.Authenticate(request("GET", "/?access_token=x", http.Header{})).Status; st != JwtMissed {
		t.Errorf("allow_missing with a token: %v", st)
	}
}

// TestBypassCORSPreflight: only a real preflight (OPTIONS with Origin
// and Access-Control-Request-Method) skips the check, and only when the
// config asks.
func TestBypassCORSPreflight(t *testing.T) {
	bad := "Bearer a.b.c"
	for _, tc := range []struct {
		bypass bool
		method string
		h      http.Header
		want   Status
	}{
		{true, "OPTIONS", http.Header{"Origin": {"o"}, "Access-Control-Request-Method": {"GET"}, "Authorization": {bad}}, OK},
		{false, "OPTIONS", http.Header{"Origin": {"o"}, "Access-Control-Request-Method": {"GET"}, "Authorization": {bad}}, JwtHeaderParseErrorBadBase64},
		{true, "GET", http.Header{"Origin": {"o"}, "Access-Control-Request-Method": {"GET"}, "Authorization": {bad}}, JwtHeaderParseErrorBadBase64},
		{true, "OPTIONS", http.Header{"Access-Control-Request-Method": {"GET"}, "Authorization": {bad}}, JwtHeaderParseErrorBadBase64},
		{true, "OPTIONS", http.Header{"Origin": {"o"}, "Authorization": {bad}}, JwtHeaderParseErrorBadBase64},
	} {
		c := istioConfig(&jwtv3.JwtProvider{Issuer: "iss", JwksSourceSpecifier: localJWKS(`{"keys":[]}`)})
		c.BypassCorsPreflight = tc.bypass
		if st := build(t, c).Authenticate(request(tc.method, "/", tc.h)).Status; st != tc.want {
			t.Errorf("bypass %v %s %v: %v; want %v", tc.bypass, tc.method, tc.h, st, tc.want)
		}
	}
}
