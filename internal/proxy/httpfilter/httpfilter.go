// Package httpfilter is the HTTP filter interface (filter.go: Filter,
// Stream, Factory, PerRouteParser and the optional callbacks) and what
// Strait's HTTP filters share: how they read request headers (and
// HTTPHeader, net/http's header map as a HeaderMap, for the codecs), how
// they draw a fractional percentage, the request's dynamic metadata. The
// filters themselves live under internal/proxy/filters/http, one package
// each, as Envoy keeps them under extensions/filters/http, with the same
// layout: Name (the filter name Envoy registers), Parse/Build of its
// typed config (refusing fields it does not implement, naming them), a
// decision that allocates nothing when the filter does not act, and
// filter.go (its Factory and the Filter's callbacks). Package
// filters/http/registry lists them by Envoy's names and type URLs; the
// HCM (internal/proxy/hcm, chain.go) builds a chain from an http_filters
// list with it. This package imports none of them, and neither does
// route: a route's per-filter config reaches a filter through
// PerRouteParser.
package httpfilter

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
)

// Headers gives a filter a request's header values without tying it to one
// representation (the HTTP/1.1 codec's slice or net/http's map).
type Headers interface {
	// Lookup returns the values of the (case-insensitive) field name joined
	// with ",", and whether it is present. The result may alias a buffer
	// and is only valid during the call that received it.
	Lookup(name string) (string, bool)
}

// Fraction is an Envoy FractionalPercent: Num out of Den.
type Fraction struct {
	Num, Den uint32
}

// Never is a fraction that never hits.
var Never = Fraction{Num: 0, Den: 100}

// Hit draws once: true with probability Num/Den (always when Num >= Den).
func (f Fraction) Hit() bool {
	if f.Num == 0 || f.Den == 0 {
		return false
	}
	if f.Num >= f.Den {
		return true
	}
	return rand.Uint32N(f.Den) < f.Num
}

// ParseFraction reads a FractionalPercent; nil is 0 % (the proto default,
// as Envoy reads an absent percentage).
func ParseFraction(field string, p *typev3.FractionalPercent) (Fraction, error) {
	if p == nil {
		return Never, nil
	}
	var den uint32
	switch p.GetDenominator() {
	case typev3.FractionalPercent_HUNDRED:
		den = 100
	case typev3.FractionalPercent_TEN_THOUSAND:
		den = 10_000
	case typev3.FractionalPercent_MILLION:
		den = 1_000_000
	default:
		return Never, fmt.Errorf("%s.denominator %v is not HUNDRED, TEN_THOUSAND or MILLION", field, p.GetDenominator())
	}
	return Fraction{Num: p.GetNumerator(), Den: den}, nil
}

// ParseRuntimeFraction reads a RuntimeFractionalPercent. Strait has no
// runtime layer, so a runtime_key never overrides the default_value; that
// is what Envoy does when the key is absent from its runtime. A nil
// message is def.
func ParseRuntimeFraction(field string, p *corev3.RuntimeFractionalPercent, def Fraction) (Fraction, error) {
	if p == nil {
		return def, nil
	}
	if p.GetDefaultValue() == nil {
		return Never, fmt.Errorf("%s.default_value is required", field)
	}
	return ParseFraction(field+".default_value", p.GetDefaultValue())
}

// StringMatcher compiles an Envoy StringMatcher (exact, prefix, suffix,
// contains, safe_regex as a whole-string RE2 match; ignore_case for all
// but safe_regex). field
// names it in errors.
func StringMatcher(field string, sm *matcherv3.StringMatcher) (func(string) bool, error) {
	fold := sm.GetIgnoreCase()
	norm := func(s string) string {
		if fold {
			return strings.ToLower(s)
		}
		return s
	}
	switch p := sm.GetMatchPattern().(type) {
	case *matcherv3.StringMatcher_Exact:
		v := norm(p.Exact)
		if fold {
			return func(x string) bool { return strings.EqualFold(x, v) }, nil
		}
		return func(x string) bool { return x == v }, nil
	case *matcherv3.StringMatcher_Prefix:
		v := norm(p.Prefix)
		return func(x string) bool { return strings.HasPrefix(norm(x), v) }, nil
	case *matcherv3.StringMatcher_Suffix:
		v := norm(p.Suffix)
		return func(x string) bool { return strings.HasSuffix(norm(x), v) }, nil
	case *matcherv3.StringMatcher_Contains:
		v := norm(p.Contains)
		return func(x string) bool { return strings.Contains(norm(x), v) }, nil
	case *matcherv3.StringMatcher_SafeRegex:
		// ignore_case does not apply to safe_regex (Envoy's StringMatcher).
		re, err := regexp.Compile("^(?:" + p.SafeRegex.GetRegex() + ")$")
		if err != nil {
			return nil, fmt.Errorf("%s.safe_regex: %w", field, err)
		}
		return re.MatchString, nil
	default:
		return nil, fmt.Errorf("%s: match pattern %T is not supported (want exact, prefix, suffix, contains or safe_regex)", field, p)
	}
}
