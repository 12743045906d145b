package gen

import (
	"net/http"
	"sort"
	"strconv"
	"strings"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	previoushosts "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/host/previous_hosts/v3"
	previouspriorities "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/priority/previous_priorities/v3"
	matcher "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/straitmesh/strait/internal/istioconfig"
	"github.com/straitmesh/strait/internal/mesh"
)

// This file emits the action side of an HTTP route the way Istio does
// (pilot/pkg/networking/core/route/route.go TranslateRoute and
// route/retry/retry.go): timeouts, retry policies, redirects, direct
// responses, rewrites and header operations.

// Istio's default retry policy (retry.DefaultPolicy): two retries on
// connection failures, refused streams, gRPC unavailable/cancelled and the
// retriable status codes, 503 among them (Istio's behaviour before its
// 1.24 compatibility change excluded 503 by default), on another host.
const defaultRetryOn = "connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes"

const previousHostsPredicate = "envoy.retry_host_predicates.previous_hosts"

// defaultRetryPolicy returns Istio's default outbound retry policy.
func defaultRetryPolicy() *route.RetryPolicy {
	return &route.RetryPolicy{
		NumRetries:                    wrapperspb.UInt32(2),
		RetryOn:                       defaultRetryOn,
		RetriableStatusCodes:          []uint32{http.StatusServiceUnavailable},
		RetryHostPredicate:            []*route.RetryPolicy_RetryHostPredicate{previousHosts()},
		HostSelectionRetryMaxAttempts: 5,
	}
}

func previousHosts() *route.RetryPolicy_RetryHostPredicate {
	a, err := anypb.New(&previoushosts.PreviousHostsPredicate{})
	if err != nil {
		panic(err) // a static message always marshals
	}
	return &route.RetryPolicy_RetryHostPredicate{
		Name:       previousHostsPredicate,
		ConfigType: &route.RetryPolicy_RetryHostPredicate_TypedConfig{TypedConfig: a},
	}
}

// previousPrioritiesName is the retry priority of retryRemoteLocalities.
const previousPrioritiesName = "envoy.retry_priorities.previous_priorities"

// retryPolicy converts a VirtualService's retries as Istio's
// retry.ConvertPolicy does: absent → the default policy; attempts ≤ 0 →
// none; else the default with the attempts, retryOn (numbers become
// retriable status codes), perTryTimeout, retryIgnorePreviousHosts and
// retryRemoteLocalities (the previous_priorities retry priority, updated
// every 2 attempts as Istio configures it).
func retryPolicy(in *networking.HTTPRetry) *route.RetryPolicy {
	if in == nil {
		return defaultRetryPolicy()
	}
	if in.Attempts <= 0 {
		return nil
	}
	out := defaultRetryPolicy()
	out.RetriableStatusCodes = nil
	out.NumRetries = wrapperspb.UInt32(uint32(in.Attempts))
	if in.RetryOn != "" {
		out.RetryOn, out.RetriableStatusCodes = parseRetryOn(in.RetryOn)
		if len(out.RetriableStatusCodes) > 0 && !strings.Contains(out.RetryOn, "retriable-status-codes") {
			if out.RetryOn != "" {
				out.RetryOn += ","
			}
			out.RetryOn += "retriable-status-codes"
		}
	} else {
		out.RetriableStatusCodes = []uint32{http.StatusServiceUnavailable}
	}
	if in.PerTryTimeout != nil {
		out.PerTryTimeout = durationpb.New(in.PerTryTimeout.AsDuration())
	}
	if v := in.RetryIgnorePreviousHosts; v != nil && !v.GetValue() {
		out.RetryHostPredicate = nil
	}
	if v := in.RetryRemoteLocalities; v != nil && v.GetValue() {
		out.RetryPriority = &route.RetryPolicy_RetryPriority{
			Name: previousPrioritiesName,
			ConfigType: &route.RetryPolicy_RetryPriority_TypedConfig{
				TypedConfig: mustAny(&previouspriorities.PreviousPrioritiesConfig{UpdateFrequency: 2}),
			},
		}
	}
	if in.Backoff != nil {
		out.RetryBackOff = &route.RetryPolicy_RetryBackOff{BaseInterval: durationpb.New(in.Backoff.AsDuration())}
	}
	return out
}

// parseRetryOn splits a retryOn list into Envoy conditions and status
// codes (Istio's parseRetryOn).
func parseRetryOn(s string) (string, []uint32) {
	var conds []string
	var codes []uint32
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if n, err := strconv.Atoi(p); err == nil && http.StatusText(n) != "" {
			codes = append(codes, uint32(n))
			continue
		}
		conds = append(conds, p)
	}
	return strings.Join(conds, ","), codes
}

// headerOps are Istio's header operations in Envoy's terms
// (TranslateHeadersOperations).
type headerOps struct {
	reqAdd, respAdd       []*core.HeaderValueOption
	reqRemove, respRemove []string
	authority             string
}

func translateHeaders(h *networking.Headers) headerOps {
	var ops headerOps
	if h == nil {
		return ops
	}
	set, setAuth := headerValues(h.GetRequest().GetSet(), false)
	add, addAuth := headerValues(h.GetRequest().GetAdd(), true)
	ops.reqAdd = append(set, add...)
	rset, _ := headerValues(h.GetResponse().GetSet(), false)
	radd, _ := headerValues(h.GetResponse().GetAdd(), true)
	ops.respAdd = append(rset, radd...)
	ops.authority = addAuth
	if setAuth != "" {
		ops.authority = setAuth
	}
	ops.reqRemove = dropInternalHeaders(h.GetRequest().GetRemove())
	ops.respRemove = dropInternalHeaders(h.GetResponse().GetRemove())
	return ops
}

// headerValues turns a set/add map into header options sorted by name;
// Host and pseudo-headers are left out, an authority among them returned.
func headerValues(m map[string]string, appendValue bool) ([]*core.HeaderValueOption, string) {
	authority := ""
	var out []*core.HeaderValueOption
	for k, v := range m {
		if strings.EqualFold(k, ":authority") || strings.EqualFold(k, "host") {
			authority = v
		}
		if internalHeader(k) {
			continue
		}
		action := core.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD
		if appendValue {
			action = core.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD
		}
		out = append(out, &core.HeaderValueOption{Header: &core.HeaderValue{Key: k, Value: v}, AppendAction: action})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Header.Key < out[j].Header.Key })
	return out, authority
}

func internalHeader(k string) bool { return strings.HasPrefix(k, ":") || strings.EqualFold(k, "host") }

func dropInternalHeaders(keys []string) []string {
	var out []string
	for _, k := range keys {
		if !internalHeader(k) {
			out = append(out, k)
		}
	}
	return out
}

// translateRoute builds the route of one rule and match, or nil when the
// rule has nothing to do (no destination, redirect or direct response).
func translateRoute(snap *mesh.Snapshot, proxyNS string, vs *istioconfig.Config, rule *networking.HTTPRoute, name string, m *networking.HTTPMatchRequest, port uint32) *route.Route {
	out := &route.Route{Name: name, Match: routeMatch(m), TypedPerFilterConfig: routeFilterConfig(rule)} // httpfilters.go
	ops := translateHeaders(rule.Headers)
	out.RequestHeadersToAdd, out.ResponseHeadersToAdd = ops.reqAdd, ops.respAdd
	out.RequestHeadersToRemove, out.ResponseHeadersToRemove = ops.reqRemove, ops.respRemove
	switch {
	case rule.Redirect != nil:
		out.Action = redirectAction(rule.Redirect, port)
		if out.Action == nil {
			return nil
		}
	case rule.DirectResponse != nil:
		out.Action = directResponseAction(rule.DirectResponse)
	default:
		a := routeAction(snap, proxyNS, vs, rule, port, out, ops.authority)
		if a == nil {
			return nil
		}
		out.Action = &route.Route_Route{Route: a}
	}
	return out
}

// routeAction turns a rule's destinations into a cluster or weighted
// clusters with the rule's timeout, retries and rewrite (Istio's
// applyHTTPRouteDestination); nil when the rule has no destination. A
// single destination's header operations go on the route out, a weighted
// one's on its cluster.
func routeAction(snap *mesh.Snapshot, proxyNS string, vs *istioconfig.Config, rule *networking.HTTPRoute, port uint32, out *route.Route, authority string) *route.RouteAction {
	var dests []*networking.HTTPRouteDestination
	for _, d := range rule.Route {
		if d.GetDestination() == nil {
			continue
		}
		if len(rule.Route) > 1 && d.Weight == 0 {
			continue
		}
		dests = append(dests, d)
	}
	if len(dests) == 0 {
		return nil
	}
	// Istio disables Envoy's 15 s default route timeout unless the
	// VirtualService sets one (networking/core/route: setTimeout).
	// max_grpc_timeout follows the timeout: a gRPC call's own
	// grpc-timeout applies, capped by the route's (setTimeout).
	a := &route.RouteAction{Timeout: noTimeout(), MaxGrpcTimeout: noTimeout()}
	if t := rule.GetTimeout(); t != nil {
		a.Timeout = durationpb.New(t.AsDuration())
		a.MaxGrpcTimeout = durationpb.New(t.AsDuration())
	}
	if rw := rule.Rewrite; rw != nil {
		if rr := rw.GetUriRegexRewrite(); rr != nil {
			a.RegexRewrite = &matcher.RegexMatchAndSubstitute{Pattern: &matcher.RegexMatcher{Regex: rr.Match}, Substitution: rr.Rewrite}
		} else if rw.Uri != "" {
			a.PrefixRewrite = rw.Uri
		}
		if rw.Authority != "" {
			authority = rw.Authority
		}
	}
	if authority != "" {
		a.HostRewriteSpecifier = &route.RouteAction_HostRewriteLiteral{HostRewriteLiteral: authority}
	}
	if len(dests) == 1 {
		d := dests[0]
		a.ClusterSpecifier = &route.RouteAction_Cluster{Cluster: destinationCluster(snap, vs.Namespace, d.Destination, port)}
		if d.Headers != nil {
			ops := translateHeaders(d.Headers)
			out.RequestHeadersToAdd = append(out.RequestHeadersToAdd, ops.reqAdd...)
			out.RequestHeadersToRemove = append(out.RequestHeadersToRemove, ops.reqRemove...)
			out.ResponseHeadersToAdd = append(out.ResponseHeadersToAdd, ops.respAdd...)
			out.ResponseHeadersToRemove = append(out.ResponseHeadersToRemove, ops.respRemove...)
			if ops.authority != "" && a.HostRewriteSpecifier == nil {
				a.HostRewriteSpecifier = &route.RouteAction_HostRewriteLiteral{HostRewriteLiteral: ops.authority}
			}
		}
	} else {
		wc := &route.WeightedCluster{}
		for _, d := range dests {
			cw := &route.WeightedCluster_ClusterWeight{Name: destinationCluster(snap, vs.Namespace, d.Destination, port), Weight: wrapperspb.UInt32(uint32(d.Weight))}
			if d.Headers != nil {
				ops := translateHeaders(d.Headers)
				cw.RequestHeadersToAdd, cw.RequestHeadersToRemove = ops.reqAdd, ops.reqRemove
				cw.ResponseHeadersToAdd, cw.ResponseHeadersToRemove = ops.respAdd, ops.respRemove
				if ops.authority != "" {
					cw.HostRewriteSpecifier = &route.WeightedCluster_ClusterWeight_HostRewriteLiteral{HostRewriteLiteral: ops.authority}
				}
			}
			wc.Clusters = append(wc.Clusters, cw)
		}
		a.ClusterSpecifier = &route.RouteAction_WeightedClusters{WeightedClusters: wc}
	}
	a.RetryPolicy = retryPolicy(rule.Retries)
	for _, d := range dests {
		host := snap.ResolveHost(d.Destination.Host, vs.Namespace)
		appendHashPolicy(a, snap, proxyNS, host, d.Destination.Subset, destinationPort(snap, host, d.Destination, port)) // trafficpolicy.go
	}
	a.RequestMirrorPolicies = mirrorPolicies(snap, vs, rule, port) // httpfilters.go
	return a
}

// redirectAction is Istio's ApplyRedirect; nil for a redirect code Envoy
// has no name for (the config layer refuses those).
func redirectAction(r *networking.HTTPRedirect, port uint32) *route.Route_Redirect {
	ra := &route.RedirectAction{HostRedirect: r.Authority}
	if r.PrefixRewrite != "" {
		ra.PathRewriteSpecifier = &route.RedirectAction_PrefixRewrite{PrefixRewrite: r.PrefixRewrite}
	} else {
		ra.PathRewriteSpecifier = &route.RedirectAction_PathRedirect{PathRedirect: r.Uri}
	}
	if r.Scheme != "" {
		ra.SchemeRewriteSpecifier = &route.RedirectAction_SchemeRedirect{SchemeRedirect: r.Scheme}
	}
	if r.RedirectPort != nil {
		switch rp := r.RedirectPort.(type) {
		case *networking.HTTPRedirect_DerivePort:
			if rp.DerivePort == networking.HTTPRedirect_FROM_REQUEST_PORT {
				ra.PortRedirect = port
			}
		case *networking.HTTPRedirect_Port:
			ra.PortRedirect = rp.Port
		}
		scheme := r.Scheme
		if scheme == "" {
			scheme = "http" // sidecar outbound HTTP is never TLS here
		}
		if ra.PortRedirect == 80 && scheme == "http" || ra.PortRedirect == 443 && scheme == "https" {
			ra.PortRedirect = 0
		}
	}
	switch r.RedirectCode {
	case 0, 301:
		ra.ResponseCode = route.RedirectAction_MOVED_PERMANENTLY
	case 302:
		ra.ResponseCode = route.RedirectAction_FOUND
	case 303:
		ra.ResponseCode = route.RedirectAction_SEE_OTHER
	case 307:
		ra.ResponseCode = route.RedirectAction_TEMPORARY_REDIRECT
	case 308:
		ra.ResponseCode = route.RedirectAction_PERMANENT_REDIRECT
	default:
		return nil
	}
	return &route.Route_Redirect{Redirect: ra}
}

// directResponseAction is Istio's ApplyDirectResponse.
func directResponseAction(d *networking.HTTPDirectResponse) *route.Route_DirectResponse {
	a := &route.DirectResponseAction{Status: d.Status}
	switch b := d.GetBody().GetSpecifier().(type) {
	case *networking.HTTPBody_String_:
		a.Body = &core.DataSource{Specifier: &core.DataSource_InlineString{InlineString: b.String_}}
	case *networking.HTTPBody_Bytes:
		a.Body = &core.DataSource{Specifier: &core.DataSource_InlineBytes{InlineBytes: b.Bytes}}
	}
	return &route.Route_DirectResponse{DirectResponse: a}
}

// proxylessTimeouts gives a proxyless gRPC client a VirtualService route's
// timeout as max_stream_duration, which gRPC's xDS client reads, in place
// of max_grpc_timeout (Istio's setTimeout for proxyless nodes); the
// default route keeps max_grpc_timeout, as Istio builds it without the
// node.
func proxylessTimeouts(routes []*route.Route) []*route.Route {
	for _, r := range routes {
		a := r.GetRoute()
		if a == nil || r.Name == "default" || a.MaxGrpcTimeout == nil {
			continue
		}
		a.MaxStreamDuration = &route.RouteAction_MaxStreamDuration{MaxStreamDuration: a.Timeout}
		a.MaxGrpcTimeout = nil
	}
	return routes
}
