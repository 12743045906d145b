package route

import (
	"fmt"
	"sort"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/straitmesh/strait/internal/proxy/fieldaudit"
	"github.com/straitmesh/strait/internal/proxy/httpfilter"
	"github.com/straitmesh/strait/internal/proxy/httpfilter/cors"
	"github.com/straitmesh/strait/internal/proxy/httpfilter/fault"
)

// Filters is what a route asks of the HTTP filters and the router before
// its request is forwarded: the fault and CORS filters' per-route config
// (typed_per_filter_config, the virtual host's merged in) and the route
// action's request mirrors. A route without any has a nil *Filters, so
// the request path pays one pointer test for all of them.
type Filters struct {
	// Fault is the route's (else its virtual host's) HTTPFault; nil: the
	// filter-level config applies.
	Fault *fault.Policy
	// CORS is the route's CorsPolicy merged over its virtual host's.
	CORS *cors.Policy
	// Mirrors are request_mirror_policies.
	Mirrors []Mirror
}

// Mirror is one request mirror policy: a copy of the request goes to
// Cluster on Fraction of requests, with "-shadow" appended to its host
// unless NoHostSuffix; its response is dropped.
type Mirror struct {
	Cluster      string
	Fraction     httpfilter.Fraction
	NoHostSuffix bool
}

// vhostFilters are a virtual host's typed_per_filter_config.
type vhostFilters struct {
	fault *fault.Policy
	cors  *cors.Policy
}

func compileVirtualHostFilters(vh *routev3.VirtualHost) (*vhostFilters, error) {
	if vh.GetCors() != nil {
		return nil, fmt.Errorf("virtual_host %q: cors is not supported (deprecated: use typed_per_filter_config %q)", vh.GetName(), cors.Name)
	}
	f, c, err := perFilter("virtual_host "+fmt.Sprintf("%q", vh.GetName()), vh.GetTypedPerFilterConfig())
	if err != nil {
		return nil, err
	}
	return &vhostFilters{fault: f, cors: c}, nil
}

// compileFilters returns a route's Filters, nil when it has none.
func compileFilters(r *routev3.Route, vh *vhostFilters) (*Filters, error) {
	f, c, err := perFilter("typed_per_filter_config", r.GetTypedPerFilterConfig())
	if err != nil {
		return nil, err
	}
	out := &Filters{Fault: f, CORS: cors.Merge(c, vh.cors)}
	if out.Fault == nil {
		out.Fault = vh.fault
	}
	a := r.GetRoute()
	if a.GetCors() != nil {
		return nil, fmt.Errorf("route.cors is not supported (deprecated: use typed_per_filter_config %q)", cors.Name)
	}
	for _, wc := range a.GetWeightedClusters().GetClusters() {
		if len(wc.GetTypedPerFilterConfig()) > 0 {
			return nil, fmt.Errorf("weighted_clusters cluster %q: typed_per_filter_config is not supported (put it on the route)", wc.GetName())
		}
	}
	for i, mp := range a.GetRequestMirrorPolicies() {
		field := fmt.Sprintf("route.request_mirror_policies[%d]", i)
		if err := fieldaudit.Only(field, mp.ProtoReflect(), mirrorPolicyFields); err != nil { // fields.go
			return nil, err
		}
		switch {
		case mp.GetCluster() == "":
			return nil, fmt.Errorf("%s.cluster is required (cluster_header is not supported)", field)
		case mp.GetClusterHeader() != "":
			return nil, fmt.Errorf("%s.cluster_header is not supported (name the cluster)", field)
		case len(mp.GetRequestHeadersMutations()) > 0:
			return nil, fmt.Errorf("%s.request_headers_mutations is not supported (remove it)", field)
		case mp.GetHostRewriteLiteral() != "":
			return nil, fmt.Errorf("%s.host_rewrite_literal is not supported (remove it)", field)
		}
		// trace_sampled only decides the shadow's trace sampling; Strait
		// does not trace.
		frac, err := httpfilter.ParseRuntimeFraction(field+".runtime_fraction", mp.GetRuntimeFraction(), httpfilter.Fraction{Num: 100, Den: 100})
		if err != nil {
			return nil, err
		}
		out.Mirrors = append(out.Mirrors, Mirror{Cluster: mp.GetCluster(), Fraction: frac, NoHostSuffix: mp.GetDisableShadowHostSuffixAppend()})
	}
	if out.Fault == nil && out.CORS == nil && len(out.Mirrors) == 0 {
		return nil, nil
	}
	return out, nil
}

// perFilter compiles a typed_per_filter_config map. Only the fault and
// CORS filters take per-route config here; any other name is refused, so
// that a config meant for a filter Strait does not run is not dropped.
func perFilter(where string, m map[string]*anypb.Any) (*fault.Policy, *cors.Policy, error) {
	var fp *fault.Policy
	var cp *cors.Policy
	names := make([]string, 0, len(m))
	for name := range m {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		a := m[name]
		var err error
		switch name {
		case fault.Name:
			fp, err = fault.Parse(a)
		case cors.Name:
			cp, err = cors.Parse(a)
		default:
			err = fmt.Errorf("filter %q takes no per-route config in strait-proxy (only %s and %s)", name, fault.Name, cors.Name)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%s[%q]: %w", where, name, err)
		}
	}
	return fp, cp, nil
}
