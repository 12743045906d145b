package fault

// The fault filter behind the HTTP filter interface (httpfilter.Factory):
// the filter-level HTTPFault is the default, a route's (or its virtual
// host's) typed_per_filter_config replaces it, as Envoy's FaultFilter
// reads its per-route config.

import (
	"sync/atomic"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/straitmesh/strait/internal/proxy/httpfilter"
)

// TypeURL is the type of the filter's typed_config and per-route config.
const TypeURL = "type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault"

// Factory builds the fault filter.
type Factory struct{}

// Names are the filter's name and its config's type URL.
func (Factory) Names() []string { return []string{Name, TypeURL} }

// Build reads the filter-level HTTPFault (nil typed: none, faults come
// from routes only).
func (Factory) Build(typed *anypb.Any, ctx httpfilter.BuildContext) (httpfilter.Filter, error) {
	f := &Filter{}
	if typed != nil {
		p, err := Parse(typed)
		if err != nil {
			return nil, err
		}
		f.def = p
	}
	if ctx.Stats != nil {
		f.delays = ctx.Stats.Counter(ctx.StatPrefix + "fault.delays_injected")
		f.aborts = ctx.Stats.Counter(ctx.StatPrefix + "fault.aborts_injected")
	}
	return f, nil
}

// ParsePerRoute compiles a route's HTTPFault.
func (Factory) ParsePerRoute(typed *anypb.Any) (any, error) { return Parse(typed) }

// MergePerRoute makes the route's fault replace its virtual host's.
func (Factory) MergePerRoute(outer, inner any) any {
	if inner != nil {
		return inner
	}
	return outer
}

// Filter is the configured fault filter. Immutable.
type Filter struct {
	def            *Policy        // the filter-level HTTPFault; nil: none
	delays, aborts *atomic.Uint64 // fault.delays_injected, fault.aborts_injected; nil without stats
}

// Name is the filter's name.
func (f *Filter) Name() string { return Name }

// DecodeHeaders delays and/or aborts the request as the route's policy
// (else the filter's) says. A delay cut short by the client's leaving
// ends the stream without a reply.
func (f *Filter) DecodeHeaders(s httpfilter.Stream) httpfilter.Status {
	p := f.def
	if rt := s.Route(); rt != nil {
		if rp, ok := rt.PerFilterConfig(Name).(*Policy); ok && rp != nil {
			p = rp
		}
	}
	if p == nil {
		return httpfilter.Continue
	}
	d := p.Decide(s.RequestHeaders())
	if d.Delay > 0 {
		inc(f.delays)
		if !s.Wait(d.Delay) {
			return httpfilter.Stop
		}
		s.AddResponseFlag(FlagDelay)
	}
	if d.Abort {
		inc(f.aborts)
		s.LocalReply(d.Status, d.GRPC, AbortBody, FlagAbort, nil)
		return httpfilter.Stop
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
