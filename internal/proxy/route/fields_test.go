package route

import (
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/proxy/fieldtest"
)

var none = map[protoreflect.Name]bool{}

// TestRouteFieldListsCoverTheirMessages: the allow-lists of the messages
// compiled through a oneof switch name every field of their message (each
// one decided: read, or refused by the switch with its fix), so that a
// field a newer Envoy API adds fails here; the other lists name only real
// fields.
func TestRouteFieldListsCoverTheirMessages(t *testing.T) {
	for _, c := range []struct {
		m    protoreflect.ProtoMessage
		list map[protoreflect.Name]bool
	}{
		{&routev3.HeaderMatcher{}, headerMatcherFields},
		{&routev3.QueryParameterMatcher{}, queryParameterMatcherFields},
		{&matcherv3.StringMatcher{}, stringMatcherFields},
		{&matcherv3.RegexMatcher{}, regexMatcherFields},
		{&routev3.RouteAction_RequestMirrorPolicy{}, mirrorPolicyFields},
		{&routev3.RouteAction_HashPolicy{}, hashPolicyFields},
	} {
		fieldtest.Classified(t, c.m.ProtoReflect().Descriptor(), c.list, none)
	}
	for _, c := range []struct {
		m    protoreflect.ProtoMessage
		list map[protoreflect.Name]bool
	}{
		{&corev3.DataSource{}, dataSourceFields},
		{&routev3.RouteConfiguration{}, routeConfigurationFields},
		{&routev3.VirtualHost{}, virtualHostFields},
		{&routev3.Route{}, routeFields},
		{&routev3.RouteMatch{}, implementedMatch},
		{&routev3.RouteAction{}, routeActionFields},
		{&routev3.RedirectAction{}, redirectFields},
		{&routev3.DirectResponseAction{}, directResponseFields},
		{&routev3.WeightedCluster{}, weightedClustersFields},
		{&routev3.WeightedCluster_ClusterWeight{}, clusterWeightFields},
		{&routev3.RouteAction_HashPolicy_Header{}, hashHeaderFields},
		{&routev3.RouteAction_HashPolicy_Cookie{}, hashCookieFields},
		{&routev3.RouteAction_HashPolicy_ConnectionProperties{}, hashConnectionPropertiesFields},
		{&routev3.RouteAction_HashPolicy_QueryParameter{}, hashQueryParameterFields},
	} {
		fieldtest.Known(t, c.m.ProtoReflect().Descriptor(), c.list)
	}
}

// TestRouteSubMessagesRefuseByName: what the sub-message compilers do not
// implement is refused, naming the field.
func TestRouteSubMessagesRefuseByName(t *testing.T) {
	toBe := &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "c"}}}
	prefix := &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}}
	compile := func(r *routev3.Route) error {
		_, err := Compile(&routev3.RouteConfiguration{Name: "r", VirtualHosts: []*routev3.VirtualHost{{Name: "v", Domains: []string{"*"}, Routes: []*routev3.Route{r}}}})
		return err
	}
	re2 := func(max uint32) *matcherv3.RegexMatcher {
		//nolint:staticcheck // the deprecated engine field under test
		return &matcherv3.RegexMatcher{Regex: "/a.*", EngineType: &matcherv3.RegexMatcher_GoogleRe2{GoogleRe2: &matcherv3.RegexMatcher_GoogleRE2{MaxProgramSize: wrapperspb.UInt32(max)}}}
	}
	for _, tc := range []struct {
		want string
		r    *routev3.Route
	}{
		{"match.safe_regex.google_re2.max_program_size", &routev3.Route{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_SafeRegex{SafeRegex: re2(100)}}, Action: toBe}},
		{"safe_regex_match.google_re2.max_program_size", &routev3.Route{Match: &routev3.RouteMatch{PathSpecifier: prefix.PathSpecifier,
			Headers: []*routev3.HeaderMatcher{{Name: "x", HeaderMatchSpecifier: &routev3.HeaderMatcher_SafeRegexMatch{SafeRegexMatch: re2(100)}}}}, Action: toBe}},
		{"string_match.safe_regex.google_re2.max_program_size", &routev3.Route{Match: &routev3.RouteMatch{PathSpecifier: prefix.PathSpecifier,
			QueryParameters: []*routev3.QueryParameterMatcher{{Name: "q", QueryParameterMatchSpecifier: &routev3.QueryParameterMatcher_StringMatch{
				StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: re2(100)}}}}}}, Action: toBe}},
		{"request_mirror_policies[0].cluster_header", &routev3.Route{Match: prefix, Action: &routev3.Route_Route{Route: &routev3.RouteAction{
			ClusterSpecifier:      &routev3.RouteAction_Cluster{Cluster: "c"},
			RequestMirrorPolicies: []*routev3.RouteAction_RequestMirrorPolicy{{Cluster: "m", ClusterHeader: "h"}}}}}},
		{"hash_policy[0]: *routev3.RouteAction_HashPolicy_FilterState_", &routev3.Route{Match: prefix, Action: &routev3.Route_Route{Route: &routev3.RouteAction{
			ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "c"},
			HashPolicy: []*routev3.RouteAction_HashPolicy{{PolicySpecifier: &routev3.RouteAction_HashPolicy_FilterState_{
				FilterState: &routev3.RouteAction_HashPolicy_FilterState{Key: "k"}}}}}}}},
		{"direct_response.body", &routev3.Route{Match: prefix, Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{
			Status: 200, Body: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: "x"},
				WatchedDirectory: &corev3.WatchedDirectory{Path: "/tmp"}}}}}},
	} {
		err := compile(tc.r)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error naming it", tc.want, err)
		}
	}
	// google_re2 without a program size is RE2, as Go's regexp.
	//nolint:staticcheck // the deprecated engine field under test
	ok := &matcherv3.RegexMatcher{Regex: "/a.*", EngineType: &matcherv3.RegexMatcher_GoogleRe2{GoogleRe2: &matcherv3.RegexMatcher_GoogleRE2{}}}
	if err := compile(&routev3.Route{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_SafeRegex{SafeRegex: ok}}, Action: toBe}); err != nil {
		t.Errorf("google_re2 {}: %v", err)
	}
}
