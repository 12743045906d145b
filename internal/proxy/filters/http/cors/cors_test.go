package cors

import (
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	corsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/cors/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

type headers map[string]string

func (h headers) Lookup(name string) (string, bool) { v, ok := h[name]; return v, ok }

func exact(s string) *matcherv3.StringMatcher {
	return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: s}}
}

func mustBuild(t *testing.T, m *corsv3.CorsPolicy) *Policy {
	t.Helper()
	p, err := Build(m)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func collect(f func(set func(name, value string))) map[string]string {
	out := map[string]string{}
	f(func(n, v string) { out[n] = v })
	return out
}

func TestCheck(t *testing.T) {
	p := mustBuild(t, &corsv3.CorsPolicy{
		AllowOriginStringMatch: []*matcherv3.StringMatcher{exact("https://a.example"),
			{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "https://dev."}},
			{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: `https://[0-9]+\.example`}}}},
	})
	for _, tc := range []struct {
		method string
		h      headers
		want   Verdict
	}{
		{"GET", headers{}, Verdict{}},
		{"GET", headers{"origin": ""}, Verdict{}},
		{"GET", headers{"origin": "https://a.example"}, Verdict{Kind: Actual, Origin: "https://a.example"}},
		{"GET", headers{"origin": "https://A.example"}, Verdict{Kind: Actual}},
		{"GET", headers{"origin": "https://dev.x"}, Verdict{Kind: Actual, Origin: "https://dev.x"}},
		{"GET", headers{"origin": "https://42.example"}, Verdict{Kind: Actual, Origin: "https://42.example"}},
		{"GET", headers{"origin": "https://42.example.evil"}, Verdict{Kind: Actual}},
		{"OPTIONS", headers{"origin": "https://a.example"}, Verdict{Kind: Actual, Origin: "https://a.example"}},
		{"OPTIONS", headers{"origin": "https://a.example", "access-control-request-method": "PUT"}, Verdict{Kind: Preflight, Origin: "https://a.example"}},
		// Not allowed: forwarded by default (forward_not_matching_preflights).
		{"OPTIONS", headers{"origin": "https://b.example", "access-control-request-method": "PUT"}, Verdict{Kind: Actual}},
	} {
		if got := p.Check(tc.method, tc.h); got != tc.want {
			t.Errorf("Check(%s, %v) = %+v, want %+v", tc.method, tc.h, got, tc.want)
		}
	}
	strict := mustBuild(t, &corsv3.CorsPolicy{AllowOriginStringMatch: []*matcherv3.StringMatcher{exact("https://a.example")},
		ForwardNotMatchingPreflights: wrapperspb.Bool(false)})
	if got := strict.Check("OPTIONS", headers{"origin": "https://b.example", "access-control-request-method": "PUT"}); got != (Verdict{Kind: Preflight}) {
		t.Errorf("refused preflight with forward_not_matching_preflights false: %+v, want a preflight answered without origin", got)
	}
	star := mustBuild(t, &corsv3.CorsPolicy{AllowOriginStringMatch: []*matcherv3.StringMatcher{exact("*")}})
	if got := star.Check("GET", headers{"origin": "https://any"}); got.Origin != "https://any" {
		t.Errorf("allow origin \"*\": %+v, want the origin echoed", got)
	}
	off := mustBuild(t, &corsv3.CorsPolicy{AllowOriginStringMatch: []*matcherv3.StringMatcher{exact("*")},
		FilterEnabled: &corev3.RuntimeFractionalPercent{DefaultValue: &typev3.FractionalPercent{Numerator: 0}}})
	if got := off.Check("GET", headers{"origin": "https://any"}); got != (Verdict{}) {
		t.Errorf("filter_enabled 0 %%: %+v, want nothing", got)
	}
	var nilPolicy *Policy
	if got := nilPolicy.Check("GET", headers{"origin": "x"}); got != (Verdict{}) {
		t.Errorf("nil policy: %+v", got)
	}
}

func TestHeaders(t *testing.T) {
	p := mustBuild(t, &corsv3.CorsPolicy{
		AllowOriginStringMatch: []*matcherv3.StringMatcher{exact("https://a.example")},
		AllowMethods:           "GET,POST", AllowHeaders: "x-a,x-b", ExposeHeaders: "x-e", MaxAge: "3600",
		AllowCredentials: wrapperspb.Bool(true), AllowPrivateNetworkAccess: wrapperspb.Bool(true),
	})
	h := headers{"origin": "https://a.example", "access-control-request-method": "PUT", "access-control-request-private-network": "true"}
	v := p.Check("OPTIONS", h)
	got := collect(func(set func(string, string)) { p.PreflightHeaders(v, h, set) })
	want := map[string]string{AllowOrigin: "https://a.example", AllowMethods: "GET,POST", AllowHeaders: "x-a,x-b",
		MaxAge: "3600", AllowCredentials: "true", AllowPrivateNetwork: "true"}
	if len(got) != len(want) {
		t.Errorf("preflight headers %v, want %v", got, want)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("preflight %s = %q, want %q", k, got[k], w)
		}
	}
	a := p.Check("GET", h)
	got = collect(func(set func(string, string)) { p.ResponseHeaders(a, set) })
	if len(got) != 3 || got[AllowOrigin] != "https://a.example" || got[AllowCredentials] != "true" || got[ExposeHeaders] != "x-e" {
		t.Errorf("response headers %v", got)
	}
	if w := string(p.AppendResponseHeaders(nil, a)); w != "access-control-allow-origin: https://a.example\r\naccess-control-allow-credentials: true\r\naccess-control-expose-headers: x-e\r\n" {
		t.Errorf("AppendResponseHeaders = %q", w)
	}
	for _, n := range []string{"Access-Control-Allow-Origin", "access-control-allow-credentials", "ACCESS-CONTROL-EXPOSE-HEADERS"} {
		if !p.Replaces(a, []byte(n)) {
			t.Errorf("Replaces(%s) = false", n)
		}
	}
	if p.Replaces(a, []byte("Access-Control-Max-Age")) || p.Replaces(Verdict{Kind: Actual}, []byte("Access-Control-Allow-Origin")) {
		t.Error("Replaces a header it does not set")
	}
	// "*" methods and headers echo the request's.
	star := mustBuild(t, &corsv3.CorsPolicy{AllowOriginStringMatch: []*matcherv3.StringMatcher{exact("*")}, AllowMethods: "*", AllowHeaders: "*"})
	h = headers{"origin": "o", "access-control-request-method": "PATCH", "access-control-request-headers": "x-q"}
	got = collect(func(set func(string, string)) { star.PreflightHeaders(star.Check("OPTIONS", h), h, set) })
	if got[AllowMethods] != "PATCH" || got[AllowHeaders] != "x-q" || got[AllowCredentials] != "" {
		t.Errorf("star preflight headers %v", got)
	}
}

func TestMerge(t *testing.T) {
	vh := mustBuild(t, &corsv3.CorsPolicy{AllowOriginStringMatch: []*matcherv3.StringMatcher{exact("https://vh")},
		AllowMethods: "GET", MaxAge: "10", AllowCredentials: wrapperspb.Bool(true)})
	rt := mustBuild(t, &corsv3.CorsPolicy{AllowMethods: "POST", AllowCredentials: wrapperspb.Bool(false)})
	m := Merge(rt, vh)
	h := headers{"origin": "https://vh", "access-control-request-method": "POST"}
	v := m.Check("OPTIONS", h)
	got := collect(func(set func(string, string)) { m.PreflightHeaders(v, h, set) })
	if got[AllowOrigin] != "https://vh" || got[AllowMethods] != "POST" || got[MaxAge] != "10" || got[AllowCredentials] != "" {
		t.Errorf("merged preflight headers %v: want the virtual host's origins and max age, the route's methods and credentials", got)
	}
	if Merge(nil, vh) != vh || Merge(rt, nil) != rt {
		t.Error("Merge with one side nil must return the other")
	}
}

func TestCheckAllocatesNothing(t *testing.T) {
	p := mustBuild(t, &corsv3.CorsPolicy{AllowOriginStringMatch: []*matcherv3.StringMatcher{exact("https://a.example")}})
	h := headers{}
	if n := testing.AllocsPerRun(100, func() { p.Check("GET", h) }); n != 0 {
		t.Errorf("Check without an origin allocates %v times", n)
	}
}

func TestBuildRefuses(t *testing.T) {
	for _, tc := range []struct {
		m    *corsv3.CorsPolicy
		want string
	}{
		{&corsv3.CorsPolicy{AllowOriginStringMatch: []*matcherv3.StringMatcher{{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: "("}}}}}, "allow_origin_string_match[0]"},
		{&corsv3.CorsPolicy{AllowOriginStringMatch: []*matcherv3.StringMatcher{{}}}, "allow_origin_string_match[0]"},
		{&corsv3.CorsPolicy{FilterEnabled: &corev3.RuntimeFractionalPercent{}}, "filter_enabled.default_value"},
	} {
		_, err := Build(tc.m)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Build(%v) = %v, want an error naming %q", tc.m, err, tc.want)
		}
	}
}

// TestResponseHeadersOnlyForAllowedActual: nothing is added for a refused
// origin or a preflight verdict, and a policy without allow_credentials
// adds no credentials header.
func TestResponseHeadersOnlyForAllowedActual(t *testing.T) {
	p := mustBuild(t, &corsv3.CorsPolicy{AllowOriginStringMatch: []*matcherv3.StringMatcher{exact("https://a.example")}})
	for _, v := range []Verdict{{Kind: Actual}, {Kind: Preflight, Origin: "https://a.example"}, {}} {
		if got := collect(func(set func(string, string)) { p.ResponseHeaders(v, set) }); len(got) != 0 {
			t.Errorf("ResponseHeaders(%+v) = %v, want none", v, got)
		}
		if w := p.AppendResponseHeaders(nil, v); len(w) != 0 {
			t.Errorf("AppendResponseHeaders(%+v) = %q, want none", v, w)
		}
		if p.Replaces(v, []byte(AllowOrigin)) {
			t.Errorf("Replaces(%+v, allow-origin) = true", v)
		}
	}
	v := Verdict{Kind: Actual, Origin: "https://a.example"}
	if got := collect(func(set func(string, string)) { p.ResponseHeaders(v, set) }); len(got) != 1 || got[AllowOrigin] != "https://a.example" {
		t.Errorf("ResponseHeaders without credentials or expose: %v", got)
	}
	if w := string(p.AppendResponseHeaders(nil, v)); w != "access-control-allow-origin: https://a.example\r\n" {
		t.Errorf("AppendResponseHeaders = %q", w)
	}
	if p.Replaces(v, []byte(AllowCredentials)) || p.Replaces(v, []byte(ExposeHeaders)) {
		t.Error("Replaces a header the policy does not set")
	}
	h := headers{"origin": "https://a.example", "access-control-request-method": "GET"}
	if got := collect(func(set func(string, string)) { p.PreflightHeaders(p.Check("OPTIONS", h), h, set) }); len(got) != 1 {
		t.Errorf("preflight of a bare policy: %v, want only the origin", got)
	}
}

func TestParse(t *testing.T) {
	a, _ := anypb.New(&corsv3.CorsPolicy{AllowMethods: "GET"})
	if p, err := Parse(a); err != nil || p.methods != "GET" {
		t.Errorf("Parse: %+v, %v", p, err)
	}
	wrong, _ := anypb.New(&corsv3.Cors{})
	if _, err := Parse(wrong); err == nil || !strings.Contains(err.Error(), "CorsPolicy") {
		t.Errorf("Parse of a Cors: %v", err)
	}
	if err := ParseFilter(nil); err != nil {
		t.Errorf("ParseFilter(nil): %v", err)
	}
	if err := ParseFilter(wrong); err != nil {
		t.Errorf("ParseFilter(Cors): %v", err)
	}
	if err := ParseFilter(a); err == nil || !strings.Contains(err.Error(), "v3.Cors") {
		t.Errorf("ParseFilter of a CorsPolicy: %v", err)
	}
}
