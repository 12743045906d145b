// Package cors is the envoy.filters.http.cors HTTP filter: with a CORS
// policy on the route or its virtual host, it answers preflight requests
// itself and adds the access-control-* headers to the responses of actual
// requests from allowed origins, as Envoy's CORS filter does
// (source/extensions/filters/http/cors/cors_filter.cc).
package cors

import (
	"fmt"

	corsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/cors/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/straitmesh/strait/internal/proxy/fieldaudit"
	"github.com/straitmesh/strait/internal/proxy/httpfilter"
)

// Name is the HTTP filter name.
const Name = "envoy.filters.http.cors"

// Response header names the filter writes.
const (
	AllowOrigin         = "access-control-allow-origin"
	AllowCredentials    = "access-control-allow-credentials"
	AllowMethods        = "access-control-allow-methods"
	AllowHeaders        = "access-control-allow-headers"
	ExposeHeaders       = "access-control-expose-headers"
	MaxAge              = "access-control-max-age"
	AllowPrivateNetwork = "access-control-allow-private-network"
)

// Request header names the filter reads.
const (
	origin                = "origin"
	requestMethod         = "access-control-request-method"
	requestHeaders        = "access-control-request-headers"
	requestPrivateNetwork = "access-control-request-private-network"
)

// Policy is a CorsPolicy: a route's merged over its virtual host's. It is
// immutable and safe for concurrent use. A nil *Policy does nothing.
type Policy struct {
	origins []func(string) bool
	methods string
	headers string
	expose  string
	maxAge  string
	// Tri-state booleans: nil leaves the field to the less specific policy.
	credentials    *bool
	privateNetwork *bool
	forwardUnmatch *bool
	enabled        httpfilter.Fraction
}

// Parse decodes a typed_per_filter_config Any holding a CorsPolicy.
func Parse(a *anypb.Any) (*Policy, error) {
	var m corsv3.CorsPolicy
	if err := a.UnmarshalTo(&m); err != nil {
		return nil, fmt.Errorf("%s: typed config %s is not envoy.extensions.filters.http.cors.v3.CorsPolicy: %w", Name, a.GetTypeUrl(), err)
	}
	return Build(&m)
}

// ParseFilter checks the filter's own typed_config, an empty
// envoy.extensions.filters.http.cors.v3.Cors (policies are per route).
func ParseFilter(a *anypb.Any) error {
	if a == nil {
		return nil
	}
	var m corsv3.Cors
	if err := a.UnmarshalTo(&m); err != nil {
		return fmt.Errorf("%s: typed_config %s is not envoy.extensions.filters.http.cors.v3.Cors: %w", Name, a.GetTypeUrl(), err)
	}
	return fieldaudit.Check(Name, m.ProtoReflect(), nil, nil)
}

// Build compiles a CorsPolicy. shadow_enabled is accepted: in shadow mode
// Envoy only counts origins, it never changes a request or response.
func Build(m *corsv3.CorsPolicy) (*Policy, error) {
	if err := fieldaudit.Check(Name, m.ProtoReflect(), corsPolicyHonoured, nil); err != nil {
		return nil, err
	}
	p := &Policy{
		methods: m.GetAllowMethods(),
		headers: m.GetAllowHeaders(),
		expose:  m.GetExposeHeaders(),
		maxAge:  m.GetMaxAge(),
	}
	for i, sm := range m.GetAllowOriginStringMatch() {
		f, err := httpfilter.StringMatcher(fmt.Sprintf("%s: allow_origin_string_match[%d]", Name, i), sm)
		if err != nil {
			return nil, err
		}
		p.origins = append(p.origins, f)
	}
	if v := m.GetAllowCredentials(); v != nil {
		b := v.GetValue()
		p.credentials = &b
	}
	if v := m.GetAllowPrivateNetworkAccess(); v != nil {
		b := v.GetValue()
		p.privateNetwork = &b
	}
	if v := m.GetForwardNotMatchingPreflights(); v != nil {
		b := v.GetValue()
		p.forwardUnmatch = &b
	}
	en, err := httpfilter.ParseRuntimeFraction(Name+": filter_enabled", m.GetFilterEnabled(), httpfilter.Fraction{Num: 100, Den: 100})
	if err != nil {
		return nil, err
	}
	p.enabled = en
	return p, nil
}

// Merge returns the policy a request on a route sees: each field from the
// route's policy when set there, else from the virtual host's; whether the
// filter is enabled comes from the most specific policy alone (Envoy's
// CorsFilter reads its policies route first, virtual host second).
func Merge(route, vhost *Policy) *Policy {
	switch {
	case route == nil:
		return vhost
	case vhost == nil:
		return route
	}
	m := *route
	if len(m.origins) == 0 {
		m.origins = vhost.origins
	}
	for _, f := range []struct{ dst, src *string }{
		{&m.methods, &vhost.methods}, {&m.headers, &vhost.headers},
		{&m.expose, &vhost.expose}, {&m.maxAge, &vhost.maxAge},
	} {
		if *f.dst == "" {
			*f.dst = *f.src
		}
	}
	for _, f := range []struct{ dst, src **bool }{
		{&m.credentials, &vhost.credentials}, {&m.privateNetwork, &vhost.privateNetwork},
		{&m.forwardUnmatch, &vhost.forwardUnmatch},
	} {
		if *f.dst == nil {
			*f.dst = *f.src
		}
	}
	return &m
}

// Kind says what the filter does with a request.
type Kind uint8

const (
	// Pass means not a CORS request (no Origin, or the filter is disabled).
	Pass Kind = iota
	// Preflight means answer 200 locally with PreflightHeaders.
	Preflight
	// Actual means forward and add ResponseHeaders to the response (nothing when
	// the origin is not allowed).
	Actual
)

// Verdict is the filter's decision for one request.
type Verdict struct {
	Kind Kind
	// Origin is the request's Origin when it is allowed, else "". It may
	// alias the request's header buffer.
	Origin string
}

// Check decides a request. method is the request method. It allocates
// nothing.
func (p *Policy) Check(method string, h httpfilter.Headers) Verdict {
	if p == nil {
		return Verdict{}
	}
	o, ok := h.Lookup(origin)
	if !ok || o == "" || !p.enabled.Hit() {
		return Verdict{}
	}
	allowed := p.originAllowed(o)
	v := Verdict{Kind: Actual}
	if allowed {
		v.Origin = o
	}
	if method != "OPTIONS" {
		return v
	}
	if rm, _ := h.Lookup(requestMethod); rm == "" {
		return v
	}
	if !allowed && (p.forwardUnmatch == nil || *p.forwardUnmatch) {
		// Envoy forwards a preflight from an origin it does not allow
		// unless forward_not_matching_preflights is false.
		return v
	}
	v.Kind = Preflight
	return v
}

func (p *Policy) originAllowed(o string) bool {
	for _, m := range p.origins {
		if m("*") || m(o) {
			return true
		}
	}
	return false
}

// PreflightHeaders calls set for each header of the preflight answer.
func (p *Policy) PreflightHeaders(v Verdict, h httpfilter.Headers, set func(name, value string)) {
	if v.Origin != "" {
		set(AllowOrigin, v.Origin)
	}
	if p.credentials != nil && *p.credentials {
		set(AllowCredentials, "true")
	}
	if p.methods == "*" {
		if rm, _ := h.Lookup(requestMethod); rm != "" {
			set(AllowMethods, rm)
		}
	} else if p.methods != "" {
		set(AllowMethods, p.methods)
	}
	if p.headers == "*" {
		if rh, _ := h.Lookup(requestHeaders); rh != "" {
			set(AllowHeaders, rh)
		}
	} else if p.headers != "" {
		set(AllowHeaders, p.headers)
	}
	if p.maxAge != "" {
		set(MaxAge, p.maxAge)
	}
	if p.privateNetwork != nil && *p.privateNetwork {
		if pn, _ := h.Lookup(requestPrivateNetwork); pn == "true" {
			set(AllowPrivateNetwork, "true")
		}
	}
}

// ResponseHeaders calls set for each header added to the response of an
// actual request (they replace the upstream's own): nothing when the
// origin was not allowed.
func (p *Policy) ResponseHeaders(v Verdict, set func(name, value string)) {
	if v.Kind != Actual || v.Origin == "" {
		return
	}
	set(AllowOrigin, v.Origin)
	if p.credentials != nil && *p.credentials {
		set(AllowCredentials, "true")
	}
	if p.expose != "" {
		set(ExposeHeaders, p.expose)
	}
}

// Replaces reports whether ResponseHeaders sets the header name (any
// case), so that a response writer drops the upstream's own value.
func (p *Policy) Replaces(v Verdict, name []byte) bool {
	if v.Kind != Actual || v.Origin == "" {
		return false
	}
	switch {
	case equalFold(name, AllowOrigin):
		return true
	case equalFold(name, AllowCredentials):
		return p.credentials != nil && *p.credentials
	case equalFold(name, ExposeHeaders):
		return p.expose != ""
	}
	return false
}

// AppendResponseHeaders appends ResponseHeaders in HTTP/1.1 form
// ("name: value\r\n").
func (p *Policy) AppendResponseHeaders(w []byte, v Verdict) []byte {
	if v.Kind != Actual || v.Origin == "" {
		return w
	}
	w = appendHeader(w, AllowOrigin, v.Origin)
	if p.credentials != nil && *p.credentials {
		w = appendHeader(w, AllowCredentials, "true")
	}
	if p.expose != "" {
		w = appendHeader(w, ExposeHeaders, p.expose)
	}
	return w
}

func appendHeader(w []byte, name, value string) []byte {
	w = append(w, name...)
	w = append(w, ": "...)
	w = append(w, value...)
	return append(w, "\r\n"...)
}

// equalFold compares an ASCII header name with a lower-case one.
func equalFold(b []byte, lower string) bool {
	if len(b) != len(lower) {
		return false
	}
	for i := range b {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}
