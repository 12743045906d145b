package route

import (
	"fmt"
	"math/rand/v2"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/straitmesh/strait/internal/proxy/fieldaudit"
	"github.com/straitmesh/strait/internal/proxy/router"
)

// This file is the action side of a route: what a matched route does
// (forward to a cluster with timeouts, retries, rewrites and header
// mutations; redirect; answer directly). The decisions taken per request
// are package router's; this compiles them from the Route proto and
// refuses, by name, any field strait-proxy does not implement.

// Action is a compiled route action. Exactly one of Cluster, weighted,
// Redirect or Direct is set.
type Action struct {
	// Timeout is the route action's timeout: from the request being sent
	// upstream until the response is complete (504 UT when it expires),
	// across retries. 0 means none. Envoy's default is 15 s; Istio sends 0s.
	Timeout time.Duration
	// IdleTimeout, when HasIdleTimeout, replaces the HCM's
	// stream_idle_timeout for this route (0 disables it).
	IdleTimeout    time.Duration
	HasIdleTimeout bool
	// MaxGRPCTimeout, when HasMaxGRPCTimeout, makes a gRPC request's
	// grpc-timeout header (none: infinity) its timeout instead of Timeout,
	// capped at MaxGRPCTimeout unless that is 0 (max_grpc_timeout).
	MaxGRPCTimeout    time.Duration
	HasMaxGRPCTimeout bool

	// Retry is the retry_policy; nil means no retries.
	Retry *router.RetryPolicy
	// Rewrite is prefix_rewrite or regex_rewrite; nil means none.
	Rewrite *router.PathRewrite
	// HostRewrite is host_rewrite_literal ("": keep the Host).
	HostRewrite string
	// IncludeAttemptCount sets x-envoy-attempt-count on upstream requests
	// (the virtual host's include_request_attempt_count).
	IncludeAttemptCount bool
	// RequestHeaders and ResponseHeaders are the route's header mutations,
	// applied after the weighted cluster's (Target's), as Envoy applies
	// the more specific level first.
	RequestHeaders, ResponseHeaders router.HeaderOps

	Cluster  string
	single   WeightedCluster // the target of a single-cluster route
	weighted []WeightedCluster
	total    uint32
	Redirect *router.Redirect
	Direct   *DirectResponse

	// Hash is the route action's hash_policy (nil: none), for the
	// RING_HASH and MAGLEV load balancers.
	Hash *HashPolicy
}

// WeightedCluster is one target of route.weighted_clusters.
type WeightedCluster struct {
	Name   string
	Weight uint32
	// HostRewrite, RequestHeaders and ResponseHeaders are the cluster's
	// own host_rewrite_literal and header mutations.
	HostRewrite                     string
	RequestHeaders, ResponseHeaders router.HeaderOps
}

// DirectResponse is a route's direct_response action.
type DirectResponse struct {
	Status int
	Body   string
}

// defaultTimeout is Envoy's default route timeout.
const defaultTimeout = 15 * time.Second

// defaultMaxDirectResponseBody is Envoy's limit on a direct response body
// when the route configuration sets none
// (max_direct_response_body_size_bytes).
const defaultMaxDirectResponseBody = 4096

// checkRouteConfiguration refuses route configuration fields strait-proxy
// does not implement.
func checkRouteConfiguration(rc *routev3.RouteConfiguration) error {
	if err := fieldaudit.Only("route_config", rc.ProtoReflect(), routeConfigurationFields); err != nil {
		return fmt.Errorf("%w (remove it)", err)
	}
	if rc.GetValidateClusters().GetValue() {
		return fmt.Errorf("route_config.validate_clusters true is not supported by strait-proxy (a route to an unknown cluster answers 503 when used, it is not rejected at load); remove the field or set it false")
	}
	return nil
}

// checkVirtualHost refuses virtual host fields strait-proxy does not
// implement.
func checkVirtualHost(vh *routev3.VirtualHost) error {
	return fieldaudit.Only("virtual_host", vh.ProtoReflect(), virtualHostFields)
}

func duration(field string, d *durationpb.Duration) (time.Duration, error) {
	if err := d.CheckValid(); err != nil || d.AsDuration() < 0 {
		return 0, fmt.Errorf("%s %v is not a valid duration", field, d)
	}
	return d.AsDuration(), nil
}

func (cr *Route) compileAction(r *routev3.Route) error {
	if err := fieldaudit.Only("route", r.ProtoReflect(), routeFields); err != nil {
		return err
	}
	var err error
	if cr.RequestHeaders, err = router.CompileHeaderOps("request_headers_to_add", r.GetRequestHeadersToAdd(), r.GetRequestHeadersToRemove()); err != nil {
		return err
	}
	if cr.ResponseHeaders, err = router.CompileHeaderOps("response_headers_to_add", r.GetResponseHeadersToAdd(), r.GetResponseHeadersToRemove()); err != nil {
		return err
	}
	switch a := r.GetAction().(type) {
	case *routev3.Route_Route:
		return cr.compileRouteAction(a.Route)
	case *routev3.Route_Redirect:
		if err := fieldaudit.Only("redirect", a.Redirect.ProtoReflect(), redirectFields); err != nil {
			return err
		}
		cr.Redirect, err = router.CompileRedirect(a.Redirect)
		return err
	case *routev3.Route_DirectResponse:
		d := a.DirectResponse
		if err := fieldaudit.Only("direct_response", d.ProtoReflect(), directResponseFields); err != nil {
			return err
		}
		if d.GetStatus() < 200 || d.GetStatus() > 599 {
			return fmt.Errorf("direct_response.status %d is out of range (200 to 599)", d.GetStatus())
		}
		cr.Direct = &DirectResponse{Status: int(d.GetStatus())}
		if b := d.GetBody(); b != nil {
			if err := fieldaudit.Only("direct_response.body", b.ProtoReflect(), dataSourceFields); err != nil { // fields.go
				return err
			}
			switch s := b.GetSpecifier().(type) {
			case *corev3.DataSource_InlineString:
				cr.Direct.Body = s.InlineString
			case *corev3.DataSource_InlineBytes:
				cr.Direct.Body = string(s.InlineBytes)
			default:
				return fmt.Errorf("direct_response.body %T is not supported by strait-proxy (want inline_string or inline_bytes)", s)
			}
		}
		return nil
	default:
		return fmt.Errorf("route action %T is not supported (want route, redirect or direct_response)", a)
	}
}

func (cr *Route) compileRouteAction(a *routev3.RouteAction) error {
	if err := fieldaudit.Only("route", a.ProtoReflect(), routeActionFields); err != nil {
		return err
	}
	var err error
	cr.Timeout = defaultTimeout
	if d := a.GetTimeout(); d != nil {
		if cr.Timeout, err = duration("route.timeout", d); err != nil {
			return err
		}
	}
	if d := a.GetIdleTimeout(); d != nil {
		if cr.IdleTimeout, err = duration("route.idle_timeout", d); err != nil {
			return err
		}
		cr.HasIdleTimeout = true
	}
	if cr.Hash, err = compileHashPolicy(a.GetHashPolicy()); err != nil { // hashpolicy.go
		return err
	}
	if d := a.GetMaxGrpcTimeout(); d != nil {
		if cr.MaxGRPCTimeout, err = duration("route.max_grpc_timeout", d); err != nil {
			return err
		}
		cr.HasMaxGRPCTimeout = true
	}
	if cr.Retry, err = router.CompileRetryPolicy(a.GetRetryPolicy()); err != nil {
		return fmt.Errorf("route.%w", err)
	}
	if cr.Rewrite, err = router.CompilePathRewrite("route", a.GetPrefixRewrite(), a.GetRegexRewrite()); err != nil {
		return err
	}
	cr.HostRewrite = a.GetHostRewriteLiteral()
	switch cs := a.GetClusterSpecifier().(type) {
	case *routev3.RouteAction_Cluster:
		cr.Cluster = cs.Cluster
		cr.single = WeightedCluster{Name: cs.Cluster}
	case *routev3.RouteAction_WeightedClusters:
		if err := fieldaudit.Only("route.weighted_clusters", cs.WeightedClusters.ProtoReflect(), weightedClustersFields); err != nil {
			return err
		}
		for i, wc := range cs.WeightedClusters.GetClusters() {
			where := fmt.Sprintf("route.weighted_clusters.clusters[%d]", i)
			if err := fieldaudit.Only(where, wc.ProtoReflect(), clusterWeightFields); err != nil {
				return err
			}
			w := wc.GetWeight().GetValue()
			if wc.GetName() == "" {
				return fmt.Errorf("%s: only named clusters are supported", where)
			}
			if w == 0 {
				continue
			}
			c := WeightedCluster{Name: wc.GetName(), Weight: w, HostRewrite: wc.GetHostRewriteLiteral()}
			if c.RequestHeaders, err = router.CompileHeaderOps(where+".request_headers_to_add", wc.GetRequestHeadersToAdd(), wc.GetRequestHeadersToRemove()); err != nil {
				return err
			}
			if c.ResponseHeaders, err = router.CompileHeaderOps(where+".response_headers_to_add", wc.GetResponseHeadersToAdd(), wc.GetResponseHeadersToRemove()); err != nil {
				return err
			}
			cr.weighted = append(cr.weighted, c)
			cr.total += w
		}
		if cr.total == 0 {
			return fmt.Errorf("weighted_clusters: total weight is 0")
		}
	default:
		return fmt.Errorf("route action cluster specifier %T is not supported (want cluster or weighted_clusters)", cs)
	}
	return nil
}

// PickCluster returns the target cluster, choosing among weighted clusters
// at random in proportion to their weights.
func (cr *Route) PickCluster() string {
	return cr.Pick().Name
}

// Pick returns the target: the route's cluster, or one of its weighted
// clusters at random in proportion to their weights. The result is shared
// and must not be modified.
func (cr *Route) Pick() *WeightedCluster {
	if cr.weighted == nil {
		return &cr.single
	}
	n := rand.Uint32N(cr.total)
	for i := range cr.weighted {
		wc := &cr.weighted[i]
		if n < wc.Weight {
			return wc
		}
		n -= wc.Weight
	}
	return &cr.weighted[len(cr.weighted)-1]
}

// MatchedLen is how many leading bytes of path (which the route matched)
// a prefix rewrite replaces: the prefix of a prefix match, the whole path
// of a path or regex match.
func (cr *Route) MatchedLen(path string) int {
	m := cr.match
	switch {
	case m.regex != nil || m.path != "":
		return len(path)
	case m.hasSepPrefix:
		return min(len(m.sepPrefix), len(path))
	}
	return min(len(m.prefix), len(path))
}

// HasRequestMutation reports whether forwarding on this route changes the
// request beyond the proxy's usual headers (path, Host or header edits),
// so that a codec path can keep its fast path otherwise.
func (cr *Route) HasRequestMutation() bool {
	return cr.Rewrite != nil || cr.HostRewrite != "" || !cr.RequestHeaders.Empty() || cr.weightedMutation()
}

func (cr *Route) weightedMutation() bool {
	for i := range cr.weighted {
		if w := &cr.weighted[i]; w.HostRewrite != "" || !w.RequestHeaders.Empty() {
			return true
		}
	}
	return false
}

// RequestHostRewrite is the Host a request to target t gets ("": keep):
// the route's host_rewrite_literal wins over the weighted cluster's, as
// Istio emits them.
func (cr *Route) RequestHostRewrite(t *WeightedCluster) string {
	if cr.HostRewrite != "" {
		return cr.HostRewrite
	}
	return t.HostRewrite
}
