package route

import (
	"fmt"
	"sort"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/straitmesh/strait/internal/proxy/fieldaudit"
	"github.com/straitmesh/strait/internal/proxy/httpfilter"
)

// The names Envoy registers the CORS, fault and buffer filters under
// (Istio's contract): route names them in its refusals and knows them no
// further; their per-route config reaches it through PerFilterParsers.
const (
	corsFilterName   = "envoy.filters.http.cors"
	faultFilterName  = "envoy.filters.http.fault"
	bufferFilterName = "envoy.filters.http.buffer"
)

// Filters is what a route asks of the HTTP filters and the router before
// its request is forwarded: each filter's per-route config
// (typed_per_filter_config, compiled by the filter's PerRouteParser, the
// virtual host's merged under the route's) and the route action's request
// mirrors. A route without any has a nil *Filters, so the request path
// pays one pointer test for all of them.
type Filters struct {
	// PerFilter is the compiled per-route config by filter name;
	// httpfilter.DisabledConfig{} for a filter the route turns off.
	PerFilter map[string]any
	// Mirrors are request_mirror_policies.
	Mirrors []Mirror
}

// PerFilterConfig returns the route's config for the filter name, nil
// when it has none. f may be nil.
func (f *Filters) PerFilterConfig(name string) any {
	if f == nil {
		return nil
	}
	return f.PerFilter[name]
}

// PerFilterParsers finds the per-route config parser of a filter by the
// key of its typed_per_filter_config entry (the filter's name) and the
// type URL of the config; nil: no such filter, or it takes none. The
// HTTP filter registry (filters/http/registry) is one.
type PerFilterParsers interface {
	PerRouteParser(name, typeURL string) httpfilter.PerRouteParser
}

// Mirror is one request mirror policy: a copy of the request goes to
// Cluster on Fraction of requests, with "-shadow" appended to its host
// unless NoHostSuffix; its response is dropped.
type Mirror struct {
	Cluster      string
	Fraction     httpfilter.Fraction
	NoHostSuffix bool
}

// vhostFilters are a virtual host's typed_per_filter_config, compiled,
// and the parsers that merge a route's over them.
type vhostFilters struct {
	config  map[string]any
	parsers map[string]httpfilter.PerRouteParser
}

func compileVirtualHostFilters(vh *routev3.VirtualHost, ps PerFilterParsers) (*vhostFilters, error) {
	if vh.GetCors() != nil {
		return nil, fmt.Errorf("virtual_host %q: cors is not supported (deprecated: use typed_per_filter_config %q)", vh.GetName(), corsFilterName)
	}
	c, p, err := perFilter("virtual_host "+fmt.Sprintf("%q", vh.GetName()), vh.GetTypedPerFilterConfig(), ps)
	if err != nil {
		return nil, err
	}
	return &vhostFilters{config: c, parsers: p}, nil
}

// compileFilters returns a route's Filters, nil when it has none.
func compileFilters(r *routev3.Route, vh *vhostFilters, ps PerFilterParsers) (*Filters, error) {
	rc, rp, err := perFilter("typed_per_filter_config", r.GetTypedPerFilterConfig(), ps)
	if err != nil {
		return nil, err
	}
	out := &Filters{}
	merged := func(name string, v any) {
		if v == nil {
			return
		}
		if out.PerFilter == nil {
			out.PerFilter = map[string]any{}
		}
		out.PerFilter[name] = v
	}
	for name, outer := range vh.config {
		if _, ok := rc[name]; !ok {
			merged(name, outer)
		}
	}
	for name, inner := range rc {
		outer, ok := vh.config[name]
		_, innerOff := inner.(httpfilter.DisabledConfig)
		_, outerOff := outer.(httpfilter.DisabledConfig)
		if !ok || innerOff || outerOff || rp[name] == nil {
			merged(name, inner)
			continue
		}
		merged(name, rp[name].MergePerRoute(outer, inner))
	}
	a := r.GetRoute()
	if a.GetCors() != nil {
		return nil, fmt.Errorf("route.cors is not supported (deprecated: use typed_per_filter_config %q)", corsFilterName)
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
	if len(out.PerFilter) == 0 && len(out.Mirrors) == 0 {
		return nil, nil
	}
	return out, nil
}

// perFilter compiles a typed_per_filter_config map with the filters'
// parsers. A config for a filter that takes none is refused, so that a
// config meant for a filter Strait does not run is not dropped; Envoy's
// FilterConfig wrapper is read: disabled turns the filter off on the
// route, is_optional lets a config for a filter Strait does not run be
// skipped, as Envoy skips it.
func perFilter(where string, m map[string]*anypb.Any, ps PerFilterParsers) (map[string]any, map[string]httpfilter.PerRouteParser, error) {
	if len(m) == 0 {
		return nil, nil, nil
	}
	out := map[string]any{}
	parsers := map[string]httpfilter.PerRouteParser{}
	names := make([]string, 0, len(m))
	for name := range m {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		v, p, err := perFilterConfig(name, m[name], ps)
		if err != nil {
			return nil, nil, fmt.Errorf("%s[%q]: %w", where, name, err)
		}
		if v != nil {
			out[name], parsers[name] = v, p
		}
	}
	return out, parsers, nil
}

const filterConfigType = "type.googleapis.com/envoy.config.route.v3.FilterConfig"

// perFilterConfig compiles one entry; nil, nil for an optional config of
// a filter Strait does not run.
func perFilterConfig(name string, a *anypb.Any, ps PerFilterParsers) (any, httpfilter.PerRouteParser, error) {
	optional := false
	if a.GetTypeUrl() == filterConfigType {
		var fc routev3.FilterConfig
		if err := a.UnmarshalTo(&fc); err != nil {
			return nil, nil, err
		}
		if fc.GetDisabled() {
			if fc.GetConfig() != nil {
				return nil, nil, fmt.Errorf("FilterConfig has both disabled and config (give one)")
			}
			return httpfilter.DisabledConfig{}, nil, nil
		}
		if fc.GetConfig() == nil {
			return nil, nil, fmt.Errorf("FilterConfig.config is required unless disabled")
		}
		a, optional = fc.GetConfig(), fc.GetIsOptional()
	}
	var p httpfilter.PerRouteParser
	if ps != nil {
		p = ps.PerRouteParser(name, a.GetTypeUrl())
	}
	if p == nil {
		if optional {
			return nil, nil, nil
		}
		return nil, nil, fmt.Errorf("filter %q takes no per-route config of type %q in strait-proxy (only %s, %s and %s take theirs)", name, a.GetTypeUrl(), faultFilterName, corsFilterName, bufferFilterName)
	}
	v, err := p.ParsePerRoute(a)
	if err != nil {
		return nil, nil, err
	}
	return v, p, nil
}
