package route

import (
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func compileOne(vh *routev3.VirtualHost) (*Table, error) {
	vh.Name, vh.Domains = "v", []string{"*"}
	return Compile(&routev3.RouteConfiguration{Name: "rc", VirtualHosts: []*routev3.VirtualHost{vh}})
}

func clusterAction(a *routev3.RouteAction) *routev3.Route {
	if a.ClusterSpecifier == nil {
		a.ClusterSpecifier = &routev3.RouteAction_Cluster{Cluster: "c"}
	}
	return &routev3.Route{Match: prefix("/"), Action: &routev3.Route_Route{Route: a}}
}

// TestActionRefusesByName: every field strait-proxy does not implement is
// refused with its name, so that no control plane drives it wrong.
func TestActionRefusesByName(t *testing.T) {
	for _, tc := range []struct {
		vh   *routev3.VirtualHost
		want string
	}{
		{&routev3.VirtualHost{Routes: []*routev3.Route{clusterAction(&routev3.RouteAction{HedgePolicy: &routev3.HedgePolicy{}})}}, "route.hedge_policy"},
		{&routev3.VirtualHost{Routes: []*routev3.Route{clusterAction(&routev3.RouteAction{AppendXForwardedHost: true})}}, "route.append_x_forwarded_host"},
		{&routev3.VirtualHost{Routes: []*routev3.Route{clusterAction(&routev3.RouteAction{ClusterNotFoundResponseCode: routev3.RouteAction_NOT_FOUND})}}, "route.cluster_not_found_response_code"},
		{&routev3.VirtualHost{Routes: []*routev3.Route{clusterAction(&routev3.RouteAction{RetryPolicy: &routev3.RetryPolicy{RetryOn: "5xx", RetriableHeaders: []*routev3.HeaderMatcher{{Name: "x"}}}})}}, "retry_policy.retriable_headers"},
		{&routev3.VirtualHost{Routes: []*routev3.Route{clusterAction(&routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_WeightedClusters{WeightedClusters: &routev3.WeightedCluster{
			Clusters: []*routev3.WeightedCluster_ClusterWeight{{Name: "a", Weight: wrapperspb.UInt32(1), TypedPerFilterConfig: nil, ClusterHeader: "x"}}}}})}}, "clusters[0].cluster_header"},
		{&routev3.VirtualHost{Routes: []*routev3.Route{{Match: prefix("/"), StatPrefix: "s", Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{Status: 200}}}}}, "route.stat_prefix"},
		{&routev3.VirtualHost{Routes: []*routev3.Route{{Match: prefix("/"), Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{Status: 200,
			Body: &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: "/etc/passwd"}}}}}}}, "direct_response.body"},
		{&routev3.VirtualHost{Routes: []*routev3.Route{{Match: prefix("/"), Action: &routev3.Route_Redirect{Redirect: &routev3.RedirectAction{ResponseCode: 99}}}}}, "redirect.response_code"},
		{&routev3.VirtualHost{RetryPolicy: &routev3.RetryPolicy{RetryOn: "5xx"}}, "virtual_host.retry_policy"},
		{&routev3.VirtualHost{RequestHeadersToAdd: []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "a", Value: "b"}}}}, "virtual_host.request_headers_to_add"},
		{&routev3.VirtualHost{Routes: []*routev3.Route{clusterAction(&routev3.RouteAction{Timeout: durationpb.New(-1)})}}, "route.timeout"},
	} {
		if _, err := compileOne(tc.vh); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want a refusal naming %q, got %v", tc.want, err)
		}
	}
}

func TestActionCompiles(t *testing.T) {
	tb, err := compileOne(&routev3.VirtualHost{IncludeRequestAttemptCount: true, Routes: []*routev3.Route{
		{Match: prefix("/bytes"), Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{Status: 200,
			Body: &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: []byte("raw")}}}}},
		clusterAction(&routev3.RouteAction{MaxGrpcTimeout: durationpb.New(0), HostRewriteSpecifier: &routev3.RouteAction_HostRewriteLiteral{HostRewriteLiteral: "route.example"},
			ClusterSpecifier: &routev3.RouteAction_WeightedClusters{WeightedClusters: &routev3.WeightedCluster{Clusters: []*routev3.WeightedCluster_ClusterWeight{
				{Name: "a", Weight: wrapperspb.UInt32(1), HostRewriteSpecifier: &routev3.WeightedCluster_ClusterWeight_HostRewriteLiteral{HostRewriteLiteral: "a.example"},
					RequestHeadersToAdd: []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "x-a", Value: "1"}}}},
			}}}}),
	}})
	if err != nil {
		t.Fatal(err)
	}
	if r := tb.MatchHeaders("h", "/bytes", nil); r.Direct == nil || r.Direct.Body != "raw" {
		t.Errorf("inline_bytes body: %+v", r.Direct)
	}
	r := tb.MatchHeaders("h", "/x", nil)
	if !r.IncludeAttemptCount || !r.HasMaxGRPCTimeout || r.MaxGRPCTimeout != 0 || !r.HasRequestMutation() {
		t.Errorf("route: attempt count %v max grpc %v/%v mutation %v", r.IncludeAttemptCount, r.HasMaxGRPCTimeout, r.MaxGRPCTimeout, r.HasRequestMutation())
	}
	tgt := r.Pick()
	if tgt.Name != "a" || tgt.RequestHeaders.Empty() || r.RequestHostRewrite(tgt) != "route.example" {
		t.Errorf("weighted target %+v host %q, want a with its header op and the route's host rewrite winning", tgt, r.RequestHostRewrite(tgt))
	}
	if r.MatchedLen("/x") != 1 {
		t.Errorf("MatchedLen of prefix / = %d", r.MatchedLen("/x"))
	}
}
