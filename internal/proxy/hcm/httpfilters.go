package hcm

// This file runs the HCM's HTTP filters that act before the router: the
// fault filter (delay, abort) and the CORS filter (preflight answered here,
// access-control-* headers on the response), in the order the HCM lists
// them, then the router's request mirrors. Each codec path (h1filters.go,
// streamfilters.go) calls decide once it has a route, and acts on the
// plan; a route with no filter config and no filter-level fault costs one
// nil test.

import (
	"fmt"
	"sync/atomic"
	"time"

	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/straitmesh/strait/internal/proxy/httpfilter"
	"github.com/straitmesh/strait/internal/proxy/httpfilter/cors"
	"github.com/straitmesh/strait/internal/proxy/httpfilter/fault"
	"github.com/straitmesh/strait/internal/proxy/httpfilter/jwtauthn"
	httprbac "github.com/straitmesh/strait/internal/proxy/httpfilter/rbac"
	"github.com/straitmesh/strait/internal/proxy/rbac"
	"github.com/straitmesh/strait/internal/proxy/route"
	"github.com/straitmesh/strait/internal/proxy/stats"
)

// httpFilters are the JWT, RBAC, fault and CORS filters an HCM lists. Immutable once
// Build returns.
type httpFilters struct {
	jwt          *jwtauthn.Filter // envoy.filters.http.jwt_authn (nil: not in the chain; jwtfilter.go)
	rbac         []*rbac.Filter   // envoy.filters.http.rbac, in chain order (rbac.go)
	fault        bool             // envoy.filters.http.fault is in the chain
	faultDefault *fault.Policy    // its filter-level HTTPFault (nil: none)
	cors         bool             // envoy.filters.http.cors is in the chain
	corsFirst    bool             // CORS runs before the fault filter
	stats        filterStats
}

// filterStats are the filters' counters, with Envoy's names under
// http.<stat_prefix>. (fault.delays_injected, fault.aborts_injected,
// cors.origin_valid, cors.origin_invalid); all nil without a stats store.
type filterStats struct {
	delays, aborts, originValid, originInvalid *atomic.Uint64
	jwtAllowed, jwtDenied                      *atomic.Uint64 // jwt_authn.allowed, jwt_authn.denied
}

func inc(c *atomic.Uint64) {
	if c != nil {
		c.Add(1)
	}
}

// UseStats gives the filter its counters in st. Call it before the Filter
// serves a connection.
func (f *Filter) UseStats(st *stats.Store) {
	if st == nil {
		return
	}
	p := "http." + f.StatPrefix + "."
	f.hstats = st.HTTP(f.StatPrefix)
	if f.filters.fault {
		f.filters.stats.delays = st.Counter(p + "fault.delays_injected")
		f.filters.stats.aborts = st.Counter(p + "fault.aborts_injected")
	}
	if f.filters.jwt != nil {
		f.filters.stats.jwtAllowed = st.Counter(p + "jwt_authn.allowed")
		f.filters.stats.jwtDenied = st.Counter(p + "jwt_authn.denied")
	}
	for _, r := range f.filters.rbac {
		r.UseStats(st, p)
	}
	if f.filters.cors {
		f.filters.stats.originValid = st.Counter(p + "cors.origin_valid")
		f.filters.stats.originInvalid = st.Counter(p + "cors.origin_invalid")
	}
}

// add records hf when it is one of the filters this file runs; known
// reports that it was.
func (hf *httpFilters) add(f *hcmv3.HttpFilter) (known bool, err error) {
	name := f.GetName()
	if name != fault.Name && name != cors.Name && name != httprbac.Name && name != jwtauthn.Name {
		return false, nil
	}
	if f.GetDisabled() {
		return true, fmt.Errorf("disabled is not supported (list the filter enabled, or leave it out)")
	}
	if f.GetConfigDiscovery() != nil {
		return true, fmt.Errorf("config_discovery is not supported (give typed_config)")
	}
	switch name {
	case jwtauthn.Name:
		// The filter runs first, before RBAC and before the route is
		// chosen (jwtfilter.go): as Istio lists it.
		if hf.jwt != nil {
			return true, fmt.Errorf("the filter is listed twice")
		}
		if hf.fault || hf.cors || len(hf.rbac) > 0 {
			return true, fmt.Errorf("it must come before %s, %s and %s (as Istio lists it)", httprbac.Name, fault.Name, cors.Name)
		}
		jf, err := jwtauthn.Parse(f.GetTypedConfig(), jwtauthn.Options{})
		if err != nil {
			return true, err
		}
		hf.jwt = jf
	case httprbac.Name:
		// RBAC runs before routing (rbac.go), so before the fault and
		// CORS filters whatever the list says: refuse an order that would
		// mean otherwise.
		if hf.fault || hf.cors {
			return true, fmt.Errorf("must come before %s and %s", fault.Name, cors.Name)
		}
		r, err := httprbac.Parse(f.GetTypedConfig())
		if err != nil {
			return true, err
		}
		hf.rbac = append(hf.rbac, r)
	case fault.Name:
		if hf.fault {
			return true, fmt.Errorf("the filter is listed twice")
		}
		hf.fault = true
		if tc := f.GetTypedConfig(); tc != nil {
			p, err := fault.Parse(tc)
			if err != nil {
				return true, err
			}
			hf.faultDefault = p
		}
	case cors.Name:
		if hf.cors {
			return true, fmt.Errorf("the filter is listed twice")
		}
		hf.cors = true
		hf.corsFirst = !hf.fault
		if err := cors.ParseFilter(f.GetTypedConfig()); err != nil {
			return true, err
		}
	}
	return true, nil
}

// active reports whether a request on rt may need filterPlan at all.
func (hf *httpFilters) active(rt *route.Route) bool {
	return rt.Filters != nil || hf.faultDefault != nil
}

// filterPlan is what the filters and mirrors do to one request.
type filterPlan struct {
	// preflight: answer 200 with the CORS preflight headers, nothing else.
	preflight bool
	delay     time.Duration
	abort     bool
	status    int // abort's HTTP status
	grpc      int // abort's gRPC status; -1: none
	// corsPolicy and corsVerdict add headers to the response of an actual
	// CORS request (corsPolicy nil: none).
	corsPolicy  *cors.Policy
	corsVerdict cors.Verdict
	mirrors     []route.Mirror
}

// decide runs the filters' decisions for a request on rt, in chain order.
// Aborts and preflights end the chain: what follows (the router's
// mirrors) does not run. md is the request's dynamic metadata, as the
// filters before (jwt_authn) left it, for the filters that match on it;
// nil reads as empty. It allocates nothing.
func (hf *httpFilters) decide(rt *route.Route, method string, h httpfilter.Headers, md *httpfilter.Metadata) filterPlan {
	p := filterPlan{grpc: -1}
	var corsPolicy *cors.Policy
	var fp *fault.Policy
	if rf := rt.Filters; rf != nil {
		corsPolicy = rf.CORS
		fp = rf.Fault
	}
	if fp == nil {
		fp = hf.faultDefault
	}
	runCORS := func() bool {
		if !hf.cors || corsPolicy == nil {
			return false
		}
		v := corsPolicy.Check(method, h)
		if v.Kind != cors.Pass {
			if v.Origin != "" {
				inc(hf.stats.originValid)
			} else {
				inc(hf.stats.originInvalid)
			}
		}
		switch v.Kind {
		case cors.Preflight:
			p.preflight, p.corsPolicy, p.corsVerdict = true, corsPolicy, v
			return true
		case cors.Actual:
			if v.Origin != "" {
				p.corsPolicy, p.corsVerdict = corsPolicy, v
			}
		}
		return false
	}
	if hf.corsFirst && runCORS() {
		return p
	}
	if hf.fault && fp != nil {
		d := fp.Decide(h)
		p.delay = d.Delay
		if d.Delay > 0 {
			inc(hf.stats.delays)
		}
		if d.Abort {
			inc(hf.stats.aborts)
			p.abort, p.status, p.grpc = true, d.Status, d.GRPC
			return p
		}
	}
	if !hf.corsFirst && runCORS() {
		return p
	}
	if rt.Filters != nil {
		p.mirrors = rt.Filters.Mirrors
	}
	return p
}
