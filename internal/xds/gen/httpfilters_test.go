package gen

import (
	"fmt"
	"slices"
	"testing"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	corsfilter "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/cors/v3"
	matcher "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	xdstype "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/straitmesh/strait/internal/istioconfig"
)

// translateCORS: allowOrigins as string matchers (an empty match left
// out), else the deprecated exact allowOrigin list; preflights from other
// origins forwarded unless unmatchedPreflights is IGNORE; maxAge in
// seconds.
func TestTranslateCORS(t *testing.T) {
	if translateCORS(nil) != nil {
		t.Error("translateCORS(nil) is not nil")
	}
	exact := func(s string) *matcher.StringMatcher {
		return &matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_Exact{Exact: s}}
	}
	enabled := &core.RuntimeFractionalPercent{DefaultValue: &xdstype.FractionalPercent{Numerator: 100}}
	for _, tc := range []struct {
		name string
		in   *networking.CorsPolicy
		want *corsfilter.CorsPolicy
	}{
		{"allowOrigins", &networking.CorsPolicy{
			AllowOrigins: []*networking.StringMatch{
				{MatchType: &networking.StringMatch_Exact{Exact: "https://a"}},
				{},
				{MatchType: &networking.StringMatch_Prefix{Prefix: "https://b"}},
			},
			AllowMethods:  []string{"GET", "POST"},
			AllowHeaders:  []string{"x-a", "x-b"},
			ExposeHeaders: []string{"x-c"},
			MaxAge:        durationpb.New(86400 * time.Second),
		}, &corsfilter.CorsPolicy{
			AllowOriginStringMatch:       []*matcher.StringMatcher{exact("https://a"), {MatchPattern: &matcher.StringMatcher_Prefix{Prefix: "https://b"}}},
			AllowMethods:                 "GET,POST",
			AllowHeaders:                 "x-a,x-b",
			ExposeHeaders:                "x-c",
			MaxAge:                       "86400",
			FilterEnabled:                enabled,
			ForwardNotMatchingPreflights: wrapperspb.Bool(true),
		}},
		{"deprecated allowOrigin", &networking.CorsPolicy{
			AllowOrigin:         []string{"https://a", "https://b"},
			AllowCredentials:    wrapperspb.Bool(true),
			UnmatchedPreflights: networking.CorsPolicy_IGNORE,
		}, &corsfilter.CorsPolicy{
			AllowOriginStringMatch:       []*matcher.StringMatcher{exact("https://a"), exact("https://b")},
			AllowCredentials:             wrapperspb.Bool(true),
			FilterEnabled:                enabled,
			ForwardNotMatchingPreflights: wrapperspb.Bool(false),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := translateCORS(tc.in); !proto.Equal(got, tc.want) {
				t.Errorf("got  %v\nwant %v", got, tc.want)
			}
		})
	}
}

// mirrorPolicies: mirror at mirrorPercentage, else the legacy
// mirrorPercent, else 100 %; each of mirrors at its percentage or 100 %;
// a percentage of 0 mirrors nothing.
func TestMirrorPolicies(t *testing.T) {
	snap := localitySnapshot(t)
	vs := &istioconfig.Config{Meta: istioconfig.Meta{Namespace: "ns"}}
	m := &networking.Destination{Host: "m.example.com", Port: &networking.PortSelector{Number: 8080}}
	for _, tc := range []struct {
		name string
		rule *networking.HTTPRoute
		want []string
	}{
		{"mirror", &networking.HTTPRoute{Mirror: m}, []string{"outbound|8080||m.example.com 100/HUNDRED"}},
		{"mirrorPercentage", &networking.HTTPRoute{Mirror: m, MirrorPercentage: &networking.Percent{Value: 12.5}}, []string{"outbound|8080||m.example.com 125000/MILLION"}},
		{"mirrorPercentage 0", &networking.HTTPRoute{Mirror: m, MirrorPercentage: &networking.Percent{Value: 0}}, nil},
		{"mirrorPercent", &networking.HTTPRoute{Mirror: m, MirrorPercent: wrapperspb.UInt32(30)}, []string{"outbound|8080||m.example.com 30/HUNDRED"}},
		{"mirrorPercent 0", &networking.HTTPRoute{Mirror: m, MirrorPercent: wrapperspb.UInt32(0)}, nil},
		{"mirrors", &networking.HTTPRoute{Mirrors: []*networking.HTTPMirrorPolicy{
			{Destination: m},
			{},
			{Destination: &networking.Destination{Host: "n.example.com"}, Percentage: &networking.Percent{Value: 0}},
			{Destination: &networking.Destination{Host: "o.example.com"}, Percentage: &networking.Percent{Value: 1}},
		}}, []string{"outbound|8080||m.example.com 100/HUNDRED", "outbound|80||o.example.com 10000/MILLION"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, p := range mirrorPolicies(snap, vs, tc.rule, 80) {
				f := p.GetRuntimeFraction().GetDefaultValue()
				if p.GetTraceSampled().GetValue() {
					t.Errorf("%s: trace_sampled true", p.GetCluster())
				}
				got = append(got, fmt.Sprintf("%s %d/%s", p.GetCluster(), f.GetNumerator(), f.GetDenominator()))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
