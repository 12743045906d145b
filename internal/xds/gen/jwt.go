package gen

// RequestAuthentication as the jwt_authn HTTP filter of a workload's
// inbound HTTP connection managers, as Istio builds it
// (pilot/pkg/security/authn/policy_applier.go convertToEnvoyJwtConfig;
// the filter comes first in the chain, listener_builder.go). The JWKS is
// always inline: a jwtRule's jwks, or what straitd fetched from its
// jwksUri (package jwks), or a fail-closed key set when that failed,
// which is istiod's default (PILOT_JWT_ENABLE_REMOTE_JWKS=false).

import (
	"context"
	"fmt"
	"slices"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	jwtfilter "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/jwt_authn/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/emptypb"
	security "istio.io/api/security/v1beta1"

	"github.com/straitmesh/strait/internal/jwks"
	"github.com/straitmesh/strait/internal/mesh"
	"github.com/straitmesh/strait/internal/proxypush"
)

const (
	jwtFilterName = "envoy.filters.http.jwt_authn"
	// jwtPayloadKey is where the filter puts a verified payload in the
	// dynamic metadata (Istio's filters.EnvoyJwtFilterPayload).
	jwtPayloadKey = "payload"
)

// KeySets supplies the key set of a jwtRule that has a jwksUri (or only
// an issuer, for OpenID discovery). *jwks.Resolver implements it.
type KeySets interface {
	Lookup(ctx context.Context, issuer, uri string, timeout time.Duration) (string, error)
}

// jwtHTTPFilter is the jwt_authn filter for proxy's workload; nil when no
// RequestAuthentication applies to it.
func jwtHTTPFilter(snap *mesh.Snapshot, proxy *proxypush.Proxy, keys KeySets) *hcm.HttpFilter {
	if proxy == nil {
		return nil
	}
	labels, _ := proxyLabels(snap, proxy)
	policies := snap.RequestAuthenticationsFor(proxy.Namespace, labels)
	if len(policies) == 0 {
		return nil
	}
	var rules []*security.JWTRule
	for _, c := range policies {
		rules = append(rules, c.RequestAuthentication().GetJwtRules()...)
	}
	if len(rules) == 0 {
		return nil
	}
	// Sorted by issuer so the config is the same whatever the policies'
	// order (Istio's newPolicyApplier).
	slices.SortStableFunc(rules, func(a, b *security.JWTRule) int {
		switch {
		case a.GetIssuer() < b.GetIssuer():
			return -1
		case a.GetIssuer() > b.GetIssuer():
			return 1
		}
		return 0
	})
	return &hcm.HttpFilter{
		Name:       jwtFilterName,
		ConfigType: &hcm.HttpFilter_TypedConfig{TypedConfig: mustAny(jwtAuthentication(rules, keys))},
	}
}

// jwtAuthentication is Istio's JwtAuthentication for rules: one provider
// per rule ("origins-N"), and a requirement that lets a request without a
// token through and refuses one with a token no provider accepts.
func jwtAuthentication(rules []*security.JWTRule, keys KeySets) *jwtfilter.JwtAuthentication {
	providers := map[string]*jwtfilter.JwtProvider{}
	var inner, outer []*jwtfilter.JwtRequirement
	for i, r := range rules {
		p := &jwtfilter.JwtProvider{
			Issuer:               r.GetIssuer(),
			Audiences:            r.GetAudiences(),
			Forward:              r.GetForwardOriginalToken(),
			ForwardPayloadHeader: r.GetOutputPayloadToHeader(),
			PayloadInMetadata:    jwtPayloadKey,
			NormalizePayloadInMetadata: &jwtfilter.JwtProvider_NormalizePayload{
				SpaceDelimitedClaims: spaceDelimitedClaims(r.GetSpaceDelimitedClaims()),
			},
			FromParams:          r.GetFromParams(),
			FromCookies:         r.GetFromCookies(),
			JwksSourceSpecifier: localJWKS(r, keys),
		}
		for _, c := range r.GetOutputClaimToHeaders() {
			p.ClaimToHeaders = append(p.ClaimToHeaders, &jwtfilter.JwtClaimToHeader{HeaderName: c.GetHeader(), ClaimName: c.GetClaim()})
		}
		for _, h := range r.GetFromHeaders() {
			p.FromHeaders = append(p.FromHeaders, &jwtfilter.JwtHeader{Name: h.GetName(), ValuePrefix: h.GetPrefix()})
		}
		name := fmt.Sprintf("origins-%d", i)
		providers[name] = p
		inner = append(inner, &jwtfilter.JwtRequirement{RequiresType: &jwtfilter.JwtRequirement_RequiresAny{
			RequiresAny: &jwtfilter.JwtRequirementOrList{Requirements: []*jwtfilter.JwtRequirement{
				{RequiresType: &jwtfilter.JwtRequirement_ProviderName{ProviderName: name}},
				{RequiresType: &jwtfilter.JwtRequirement_AllowMissing{AllowMissing: &emptypb.Empty{}}},
			}},
		}})
		outer = append(outer, &jwtfilter.JwtRequirement{RequiresType: &jwtfilter.JwtRequirement_ProviderName{ProviderName: name}})
	}
	req := inner[0]
	if len(inner) > 1 {
		// Any one provider, or every token valid for its provider: the
		// outer OR admits providers that share a token location, which
		// the AND alone would refuse.
		outer = append(outer, &jwtfilter.JwtRequirement{RequiresType: &jwtfilter.JwtRequirement_RequiresAll{
			RequiresAll: &jwtfilter.JwtRequirementAndList{Requirements: inner},
		}})
		req = &jwtfilter.JwtRequirement{RequiresType: &jwtfilter.JwtRequirement_RequiresAny{
			RequiresAny: &jwtfilter.JwtRequirementOrList{Requirements: outer},
		}}
	}
	return &jwtfilter.JwtAuthentication{
		Rules: []*jwtfilter.RequirementRule{{
			Match:           &route.RouteMatch{PathSpecifier: &route.RouteMatch_Prefix{Prefix: "/"}},
			RequirementType: &jwtfilter.RequirementRule_Requires{Requires: req},
		}},
		Providers:           providers,
		BypassCorsPreflight: true,
	}
}

// localJWKS is a rule's key set inline: its jwks, else the fetched one,
// else the fail-closed one.
func localJWKS(r *security.JWTRule, keys KeySets) *jwtfilter.JwtProvider_LocalJwks {
	s := r.GetJwks()
	if s == "" {
		s = jwks.FailClosed
		if keys != nil {
			timeout := jwks.DefaultTimeout
			if r.GetTimeout() != nil {
				timeout = r.GetTimeout().AsDuration()
			}
			if got, err := keys.Lookup(context.Background(), r.GetIssuer(), r.GetJwksUri(), timeout); err == nil {
				s = got
			}
		}
	}
	return &jwtfilter.JwtProvider_LocalJwks{LocalJwks: &core.DataSource{
		Specifier: &core.DataSource_InlineString{InlineString: s},
	}}
}

// spaceDelimitedClaims are the claims whose space-separated value the
// filter splits into a list in the metadata: scope and permission always,
// and the rule's own (Istio's buildSpaceDelimitedClaims), sorted.
func spaceDelimitedClaims(extra []string) []string {
	out := append([]string{"permission", "scope"}, extra...)
	slices.Sort(out)
	return slices.Compact(out)
}
