package jwtauthn

import (
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	jwtv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/jwt_authn/v3"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/straitmesh/strait/internal/proxy/fieldtest"
)

// TestJWTFieldsClassified: every field of JwtAuthentication and
// JwtProvider (and the provider's small sub-messages) is honoured or
// refused, so that a newer API's field is noticed here.
func TestJWTFieldsClassified(t *testing.T) {
	fieldtest.Classified(t, (&jwtv3.JwtAuthentication{}).ProtoReflect().Descriptor(), jwtAuthenticationHonoured, jwtAuthenticationRefused)
	fieldtest.Classified(t, (&jwtv3.JwtProvider{}).ProtoReflect().Descriptor(), jwtProviderHonoured, jwtProviderRefused)
	fieldtest.Classified(t, (&jwtv3.JwtProvider_NormalizePayload{}).ProtoReflect().Descriptor(), normalizePayloadFields, map[protoreflect.Name]string{})
	fieldtest.Classified(t, (&jwtv3.JwtHeader{}).ProtoReflect().Descriptor(), jwtHeaderFields, map[protoreflect.Name]string{})
	fieldtest.Classified(t, (&jwtv3.JwtClaimToHeader{}).ProtoReflect().Descriptor(), claimToHeaderFields, map[protoreflect.Name]string{})
}

// TestJWTRefusedFields: each refused field, set, is an error naming it.
func TestJWTRefusedFields(t *testing.T) {
	provider := func() *jwtv3.JwtProvider {
		return &jwtv3.JwtProvider{Issuer: "i", JwksSourceSpecifier: &jwtv3.JwtProvider_LocalJwks{LocalJwks: &corev3.DataSource{
			Specifier: &corev3.DataSource_InlineString{InlineString: `{"keys":[]}`}}}}
	}
	if _, err := Build(&jwtv3.JwtAuthentication{Providers: map[string]*jwtv3.JwtProvider{"p": provider()}, BypassCorsPreflight: true}, Options{}); err != nil {
		t.Fatal(err)
	}
	af := (&jwtv3.JwtAuthentication{}).ProtoReflect().Descriptor().Fields()
	for n := range jwtAuthenticationRefused {
		cfg := &jwtv3.JwtAuthentication{}
		fieldtest.SetSomething(cfg.ProtoReflect(), af.ByName(n))
		if _, err := Build(cfg, Options{}); err == nil || !strings.Contains(err.Error(), string(n)) {
			t.Errorf("%s: got %v, want an error naming it", n, err)
		}
	}
	pf := (&jwtv3.JwtProvider{}).ProtoReflect().Descriptor().Fields()
	for n := range jwtProviderRefused {
		p := provider()
		fieldtest.SetSomething(p.ProtoReflect(), pf.ByName(n))
		_, err := Build(&jwtv3.JwtAuthentication{Providers: map[string]*jwtv3.JwtProvider{"p": p}}, Options{})
		if err == nil || !strings.Contains(err.Error(), `providers["p"].`+string(n)) {
			t.Errorf("%s: got %v, want an error naming it", n, err)
		}
	}
}
