package cors

// The CORS filter behind the HTTP filter interface (httpfilter.Factory).
// Its policies are per route (typed_per_filter_config, the route's merged
// over its virtual host's, Merge); the filter-level Cors is empty.

import (
	"sync/atomic"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/straitmesh/strait/internal/proxy/httpfilter"
)

// TypeURL is the type of the filter's typed_config; PolicyTypeURL the
// type of its per-route config.
const (
	TypeURL       = "type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors"
	PolicyTypeURL = "type.googleapis.com/envoy.extensions.filters.http.cors.v3.CorsPolicy"
)

// Factory builds the CORS filter.
type Factory struct{}

// Names are the filter's name and its config's type URL.
func (Factory) Names() []string { return []string{Name, TypeURL} }

// Build checks the (empty) filter-level config.
func (Factory) Build(typed *anypb.Any, ctx httpfilter.BuildContext) (httpfilter.Filter, error) {
	if err := ParseFilter(typed); err != nil {
		return nil, err
	}
	f := &Filter{}
	if ctx.Stats != nil {
		f.valid = ctx.Stats.Counter(ctx.StatPrefix + "cors.origin_valid")
		f.invalid = ctx.Stats.Counter(ctx.StatPrefix + "cors.origin_invalid")
	}
	return f, nil
}

// ParsePerRoute compiles a route's CorsPolicy.
func (Factory) ParsePerRoute(typed *anypb.Any) (any, error) { return Parse(typed) }

// MergePerRoute merges a route's policy over its virtual host's, field by
// field (Merge).
func (Factory) MergePerRoute(outer, inner any) any {
	o, _ := outer.(*Policy)
	i, _ := inner.(*Policy)
	if m := Merge(i, o); m != nil {
		return m
	}
	return nil
}

// Filter is the configured CORS filter. Immutable.
type Filter struct {
	valid, invalid *atomic.Uint64 // cors.origin_valid, cors.origin_invalid; nil without stats
}

// Name is the filter's name.
func (f *Filter) Name() string { return Name }

// DecodeHeaders answers a preflight, and has the response of an actual
// request from an allowed origin carry the access-control-* headers
// (replacing the upstream's own).
func (f *Filter) DecodeHeaders(s httpfilter.Stream) httpfilter.Status {
	rt := s.Route()
	if rt == nil {
		return httpfilter.Continue
	}
	p, _ := rt.PerFilterConfig(Name).(*Policy)
	if p == nil {
		return httpfilter.Continue
	}
	h := s.RequestHeaders()
	v := p.Check(s.Method(), h)
	if v.Kind != Pass {
		if v.Origin != "" {
			inc(f.valid)
		} else {
			inc(f.invalid)
		}
	}
	switch v.Kind {
	case Preflight:
		s.LocalReply(200, -1, "", "", func(set func(name, value string)) {
			p.PreflightHeaders(v, h, set)
		})
		return httpfilter.Stop
	case Actual:
		p.ResponseHeaders(v, s.AddResponseHeader)
	}
	return httpfilter.Continue
}

func inc(c *atomic.Uint64) {
	if c != nil {
		c.Add(1)
	}
}

var (
	_ httpfilter.Factory        = Factory{}
	_ httpfilter.PerRouteParser = Factory{}
)
