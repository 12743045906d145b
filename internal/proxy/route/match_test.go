package route

import (
	"net/http"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func exact(v string) *matcherv3.StringMatcher {
	return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: v}}
}

func prefixSM(v string) *matcherv3.StringMatcher {
	return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: v}}
}

func regexSM(v string) *matcherv3.StringMatcher {
	return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: v}}}
}

func hdr(name string, sm *matcherv3.StringMatcher) *routev3.HeaderMatcher {
	return &routev3.HeaderMatcher{Name: name, HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: sm}}
}

func present(name string, v bool) *routev3.HeaderMatcher {
	return &routev3.HeaderMatcher{Name: name, HeaderMatchSpecifier: &routev3.HeaderMatcher_PresentMatch{PresentMatch: v}}
}

func inverted(h *routev3.HeaderMatcher, missingAsEmpty bool) *routev3.HeaderMatcher {
	h.InvertMatch, h.TreatMissingHeaderAsEmpty = true, missingAsEmpty
	return h
}

func query(name string, sm *matcherv3.StringMatcher) *routev3.QueryParameterMatcher {
	return &routev3.QueryParameterMatcher{Name: name, QueryParameterMatchSpecifier: &routev3.QueryParameterMatcher_StringMatch{StringMatch: sm}}
}

// req builds a request from "METHOD /path?query" and "k: v" header lines.
func req(line string, headers ...string) *Request {
	method, target, _ := strings.Cut(line, " ")
	path, q, _ := strings.Cut(target, "?")
	h := http.Header{}
	for _, kv := range headers {
		k, v, _ := strings.Cut(kv, ": ")
		h.Add(k, v)
	}
	return &Request{Host: "svc", Path: path, Query: q, Method: method, Scheme: "http", Headers: HTTPHeader(h)}
}

// TestRouteMatchSemantics checks each RouteMatch field against Envoy's
// semantics, with requests that must and must not match.
func TestRouteMatchSemantics(t *testing.T) {
	root := &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}}
	with := func(f func(m *routev3.RouteMatch)) *routev3.RouteMatch {
		m := &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}}
		f(m)
		return m
	}
	for _, tc := range []struct {
		name  string
		match *routev3.RouteMatch
		yes   []*Request
		no    []*Request
	}{
		{name: "prefix", match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/api"}},
			yes: []*Request{req("GET /api"), req("GET /api/v1"), req("GET /apix")},
			no:  []*Request{req("GET /"), req("GET /API"), req("GET /x/api")}},
		{name: "path", match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: "/health"}},
			yes: []*Request{req("GET /health"), req("GET /health?full=1")},
			no:  []*Request{req("GET /health/"), req("GET /Health"), req("GET /healthz")}},
		{name: "regex is a full match", match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: "/item/[0-9]+"}}},
			yes: []*Request{req("GET /item/12"), req("GET /item/7?x=y")},
			no:  []*Request{req("GET /item/12/x"), req("GET /a/item/12"), req("GET /item/")}},
		{name: "case-insensitive prefix", match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/API"}, CaseSensitive: wrapperspb.Bool(false)},
			yes: []*Request{req("GET /api/x"), req("GET /Api")},
			no:  []*Request{req("GET /ap")}},
		{name: "case-insensitive path", match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: "/Login"}, CaseSensitive: wrapperspb.Bool(false)},
			yes: []*Request{req("GET /LOGIN"), req("GET /login")},
			no:  []*Request{req("GET /login2")}},
		{name: "case_sensitive does not apply to safe_regex", match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: "/abc"}}, CaseSensitive: wrapperspb.Bool(false)},
			yes: []*Request{req("GET /abc")},
			no:  []*Request{req("GET /ABC")}},
		{name: "path_separated_prefix", match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_PathSeparatedPrefix{PathSeparatedPrefix: "/api"}},
			yes: []*Request{req("GET /api"), req("GET /api/x"), req("GET /api?q")},
			no:  []*Request{req("GET /apix"), req("GET /")}},
		{name: "header exact", match: with(func(m *routev3.RouteMatch) { m.Headers = append(m.Headers, hdr("end-user", exact("jason"))) }),
			yes: []*Request{req("GET /", "End-User: jason")},
			no:  []*Request{req("GET /", "End-User: Jason"), req("GET /", "End-User: jason2"), req("GET /")}},
		{name: "header prefix and regex", match: with(func(m *routev3.RouteMatch) {
			m.Headers = append(m.Headers, hdr("x-a", prefixSM("ab")), hdr("x-b", regexSM("[0-9]+")))
		}),
			yes: []*Request{req("GET /", "x-a: abc", "x-b: 42")},
			no:  []*Request{req("GET /", "x-a: abc", "x-b: 42a"), req("GET /", "x-a: ba", "x-b: 1"), req("GET /", "x-b: 1")}},
		{name: "header present", match: with(func(m *routev3.RouteMatch) { m.Headers = append(m.Headers, present("x-debug", true)) }),
			yes: []*Request{req("GET /", "x-debug: "), req("GET /", "x-debug: 1")},
			no:  []*Request{req("GET /")}},
		{name: "header present_match false", match: with(func(m *routev3.RouteMatch) { m.Headers = append(m.Headers, present("x-debug", false)) }),
			yes: []*Request{req("GET /")},
			no:  []*Request{req("GET /", "x-debug: 1")}},
		{name: "inverted present (Istio withoutHeaders {})", match: with(func(m *routev3.RouteMatch) { m.Headers = append(m.Headers, inverted(present("x-debug", true), false)) }),
			yes: []*Request{req("GET /")},
			no:  []*Request{req("GET /", "x-debug: 1")}},
		{name: "inverted exact, missing header does not match (Envoy)", match: with(func(m *routev3.RouteMatch) {
			m.Headers = append(m.Headers, inverted(hdr("x-user", exact("bob")), false))
		}),
			yes: []*Request{req("GET /", "x-user: alice")},
			no:  []*Request{req("GET /", "x-user: bob"), req("GET /")}},
		{name: "inverted exact, missing as empty (Istio withoutHeaders)", match: with(func(m *routev3.RouteMatch) {
			m.Headers = append(m.Headers, inverted(hdr("x-user", exact("bob")), true))
		}),
			yes: []*Request{req("GET /", "x-user: alice"), req("GET /")},
			no:  []*Request{req("GET /", "x-user: bob")}},
		{name: "multiple values are joined with a comma", match: with(func(m *routev3.RouteMatch) { m.Headers = append(m.Headers, hdr("x-v", exact("a,b"))) }),
			yes: []*Request{req("GET /", "x-v: a", "x-v: b")},
			no:  []*Request{req("GET /", "x-v: a")}},
		{name: ":method", match: with(func(m *routev3.RouteMatch) { m.Headers = append(m.Headers, hdr(":method", exact("POST"))) }),
			yes: []*Request{req("POST /")},
			no:  []*Request{req("GET /"), req("post /")}},
		{name: ":authority", match: with(func(m *routev3.RouteMatch) { m.Headers = append(m.Headers, hdr(":authority", prefixSM("svc"))) }),
			yes: []*Request{req("GET /")},
			no:  []*Request{{Host: "other", Path: "/", Method: "GET", Scheme: "http"}}},
		{name: ":scheme", match: with(func(m *routev3.RouteMatch) { m.Headers = append(m.Headers, hdr(":scheme", exact("https"))) }),
			yes: []*Request{{Host: "svc", Path: "/", Method: "GET", Scheme: "https"}},
			no:  []*Request{req("GET /")}},
		{name: ":path has the query", match: with(func(m *routev3.RouteMatch) { m.Headers = append(m.Headers, hdr(":path", exact("/a?b=1"))) }),
			yes: []*Request{req("GET /a?b=1")},
			no:  []*Request{req("GET /a")}},
		{name: "query exact", match: with(func(m *routev3.RouteMatch) { m.QueryParameters = append(m.QueryParameters, query("v", exact("2"))) }),
			yes: []*Request{req("GET /?v=2"), req("GET /?a=1&v=2"), req("GET /?v=2&v=3")},
			no:  []*Request{req("GET /"), req("GET /?v=3"), req("GET /?v=3&v=2"), req("GET /?vv=2"), req("GET /?v=20")}},
		{name: "query is not decoded", match: with(func(m *routev3.RouteMatch) { m.QueryParameters = append(m.QueryParameters, query("n", exact("a b"))) }),
			no: []*Request{req("GET /?n=a%20b"), req("GET /?n=a+b")}},
		{name: "query prefix and regex", match: with(func(m *routev3.RouteMatch) {
			m.QueryParameters = append(m.QueryParameters, query("a", prefixSM("x")), query("b", regexSM("[a-c]+")))
		}),
			yes: []*Request{req("GET /?a=xy&b=abc")},
			no:  []*Request{req("GET /?a=xy&b=abcd"), req("GET /?a=yx&b=a"), req("GET /?b=a")}},
		{name: "query present", match: with(func(m *routev3.RouteMatch) {
			m.QueryParameters = append(m.QueryParameters, &routev3.QueryParameterMatcher{Name: "debug", QueryParameterMatchSpecifier: &routev3.QueryParameterMatcher_PresentMatch{PresentMatch: true}})
		}),
			yes: []*Request{req("GET /?debug"), req("GET /?x=1&debug=0"), req("GET /?debug=")},
			no:  []*Request{req("GET /"), req("GET /?debugx=1")}},
		{name: "query without '=' has the empty value", match: with(func(m *routev3.RouteMatch) { m.QueryParameters = append(m.QueryParameters, query("f", exact(""))) }),
			yes: []*Request{req("GET /?f"), req("GET /?f=")},
			no:  []*Request{req("GET /?f=1"), req("GET /")}},
		{name: "grpc", match: with(func(m *routev3.RouteMatch) { m.Grpc = &routev3.RouteMatch_GrpcRouteMatchOptions{} }),
			yes: []*Request{req("POST /", "content-type: application/grpc"), req("POST /", "content-type: application/grpc+proto")},
			no:  []*Request{req("POST /", "content-type: application/json"), req("POST /")}},
		{name: "ignore_case string match", match: with(func(m *routev3.RouteMatch) {
			m.Headers = append(m.Headers, hdr("x-a", &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "AbC"}, IgnoreCase: true}))
		}),
			yes: []*Request{req("GET /", "x-a: abc"), req("GET /", "x-a: ABC")},
			no:  []*Request{req("GET /", "x-a: abcd")}},
		{name: "all conditions together", match: with(func(m *routev3.RouteMatch) {
			m.Headers = append(m.Headers, hdr(":method", exact("GET")), hdr("x-a", exact("1")))
			m.QueryParameters = append(m.QueryParameters, query("q", exact("1")))
		}),
			yes: []*Request{req("GET /?q=1", "x-a: 1")},
			no:  []*Request{req("POST /?q=1", "x-a: 1"), req("GET /?q=2", "x-a: 1"), req("GET /?q=1", "x-a: 2")}},
		{name: "inverted present_match false: the header must be there", match: with(func(m *routev3.RouteMatch) { m.Headers = append(m.Headers, inverted(present("x-a", false), false)) }),
			yes: []*Request{req("GET /", "x-a: 1")},
			no:  []*Request{req("GET /")}},
		{name: "legacy header specifiers", match: with(func(m *routev3.RouteMatch) {
			m.Headers = append(m.Headers,
				&routev3.HeaderMatcher{Name: "x-e", HeaderMatchSpecifier: &routev3.HeaderMatcher_ExactMatch{ExactMatch: "e"}},
				&routev3.HeaderMatcher{Name: "x-p", HeaderMatchSpecifier: &routev3.HeaderMatcher_PrefixMatch{PrefixMatch: "p"}},
				&routev3.HeaderMatcher{Name: "x-s", HeaderMatchSpecifier: &routev3.HeaderMatcher_SuffixMatch{SuffixMatch: "s"}},
				&routev3.HeaderMatcher{Name: "x-c", HeaderMatchSpecifier: &routev3.HeaderMatcher_ContainsMatch{ContainsMatch: "c"}},
				&routev3.HeaderMatcher{Name: "x-r", HeaderMatchSpecifier: &routev3.HeaderMatcher_SafeRegexMatch{SafeRegexMatch: &matcherv3.RegexMatcher{Regex: "r+"}}})
		}),
			yes: []*Request{req("GET /", "x-e: e", "x-p: px", "x-s: xs", "x-c: xcx", "x-r: rr")},
			no: []*Request{req("GET /", "x-e: ee", "x-p: px", "x-s: xs", "x-c: xcx", "x-r: rr"),
				req("GET /", "x-e: e", "x-p: xp", "x-s: xs", "x-c: xcx", "x-r: rr"),
				req("GET /", "x-e: e", "x-p: px", "x-s: sx", "x-c: xcx", "x-r: rr"),
				req("GET /", "x-e: e", "x-p: px", "x-s: xs", "x-c: xx", "x-r: rr"),
				req("GET /", "x-e: e", "x-p: px", "x-s: xs", "x-c: xcx", "x-r: rx")}},
		{name: "ignore_case prefix, suffix and contains", match: with(func(m *routev3.RouteMatch) {
			m.Headers = append(m.Headers,
				hdr("x-p", &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "Ab"}, IgnoreCase: true}),
				hdr("x-s", &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Suffix{Suffix: "Yz"}, IgnoreCase: true}),
				hdr("x-c", &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Contains{Contains: "Mn"}, IgnoreCase: true}))
		}),
			yes: []*Request{req("GET /", "x-p: aBc", "x-s: xyZ", "x-c: lmNo"), req("GET /", "x-p: ab", "x-s: yz", "x-c: mn")},
			no: []*Request{req("GET /", "x-p: a", "x-s: xyZ", "x-c: lmNo"), req("GET /", "x-p: ab", "x-s: z", "x-c: mn"),
				req("GET /", "x-p: xab", "x-s: yz", "x-c: mn"), req("GET /", "x-p: ab", "x-s: yzx", "x-c: mn"), req("GET /", "x-p: ab", "x-s: yz", "x-c: m n")}},
		{name: "case-sensitive suffix and contains", match: with(func(m *routev3.RouteMatch) {
			m.Headers = append(m.Headers, hdr("x-s", &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Suffix{Suffix: "Yz"}}),
				hdr("x-c", &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Contains{Contains: "Mn"}}))
		}),
			yes: []*Request{req("GET /", "x-s: xYz", "x-c: lMno")},
			no:  []*Request{req("GET /", "x-s: xyz", "x-c: lMno"), req("GET /", "x-s: xYz", "x-c: lmno")}},
		{name: "empty query pairs are skipped", match: with(func(m *routev3.RouteMatch) { m.QueryParameters = append(m.QueryParameters, query("v", exact("2"))) }),
			yes: []*Request{req("GET /?&v=2"), req("GET /?a&&v=2")}},
		{name: ":path needs a path", match: with(func(m *routev3.RouteMatch) { m.Headers = append(m.Headers, present(":path", true)) }),
			yes: []*Request{req("GET /x")},
			no:  []*Request{{Host: "svc", Method: "GET"}}},
		{name: "path_separated_prefix /", match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_PathSeparatedPrefix{PathSeparatedPrefix: "/"}},
			yes: []*Request{req("GET /"), req("GET /x")}},
		{name: "no condition", match: root, yes: []*Request{req("GET /"), req("DELETE /x?y")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb, err := Compile(&routev3.RouteConfiguration{VirtualHosts: []*routev3.VirtualHost{{Name: "v", Domains: []string{"*"},
				Routes: []*routev3.Route{to("hit", tc.match)}}}})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range tc.yes {
				if tb.Route(r) == nil {
					t.Errorf("%s %s?%s %v: no match, want a match", r.Method, r.Path, r.Query, r.Headers)
				}
			}
			for _, r := range tc.no {
				if tb.Route(r) != nil {
					t.Errorf("%s %s?%s %v: matched, want no match", r.Method, r.Path, r.Query, r.Headers)
				}
			}
		})
	}
}

// TestCompileRefusesMatchFields: every RouteMatch field the proxy does not
// implement is NACKed, naming it.
func TestCompileRefusesMatchFields(t *testing.T) {
	for want, m := range map[string]*routev3.RouteMatch{
		"match.tls_context": {PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}, TlsContext: &routev3.RouteMatch_TlsContextMatchOptions{}},
		"match.runtime_fraction": {PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"},
			RuntimeFraction: &corev3.RuntimeFractionalPercent{DefaultValue: &typev3.FractionalPercent{Numerator: 50}}},
		"match.dynamic_metadata": {PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}, DynamicMetadata: []*matcherv3.MetadataMatcher{{Filter: "f"}}},
		"match.filter_state":     {PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}, FilterState: []*matcherv3.FilterStateMatcher{{Key: "k"}}},
		"match.connect_matcher":  {PathSpecifier: &routev3.RouteMatch_ConnectMatcher_{ConnectMatcher: &routev3.RouteMatch_ConnectMatcher{}}},
		"range_match": {PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}, Headers: []*routev3.HeaderMatcher{{Name: "x",
			HeaderMatchSpecifier: &routev3.HeaderMatcher_RangeMatch{RangeMatch: &typev3.Int64Range{Start: 1, End: 2}}}}},
		"ignore_case is not allowed with safe_regex": {PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}, Headers: []*routev3.HeaderMatcher{
			hdr("x", &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: "a"}}, IgnoreCase: true})}},
		"pseudo-header :protocol":         {PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}, Headers: []*routev3.HeaderMatcher{hdr(":protocol", exact("websocket"))}},
		"match.safe_regex":                {PathSpecifier: &routev3.RouteMatch_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: "("}}},
		"match.path is empty":             {PathSpecifier: &routev3.RouteMatch_Path{Path: ""}},
		"path_separated_prefix \"api\"":   {PathSpecifier: &routev3.RouteMatch_PathSeparatedPrefix{PathSeparatedPrefix: "api"}},
		"path_separated_prefix \"/api/\"": {PathSpecifier: &routev3.RouteMatch_PathSeparatedPrefix{PathSeparatedPrefix: "/api/"}},
		"path_separated_prefix \"/a?b\"":  {PathSpecifier: &routev3.RouteMatch_PathSeparatedPrefix{PathSeparatedPrefix: "/a?b"}},
		"match.headers[0] \"x\": error parsing regexp": {PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}, Headers: []*routev3.HeaderMatcher{{Name: "x",
			HeaderMatchSpecifier: &routev3.HeaderMatcher_SafeRegexMatch{SafeRegexMatch: &matcherv3.RegexMatcher{Regex: "("}}}}},
		"match.headers[0] \"\": name is empty": {PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}, Headers: []*routev3.HeaderMatcher{present("", true)}},
		"present_match false is not supported": {PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}, QueryParameters: []*routev3.QueryParameterMatcher{
			{Name: "q", QueryParameterMatchSpecifier: &routev3.QueryParameterMatcher_PresentMatch{PresentMatch: false}}}},
		"match.query_parameters[0]": {PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}, QueryParameters: []*routev3.QueryParameterMatcher{
			query("q", regexSM("["))}},
	} {
		_, err := Compile(&routev3.RouteConfiguration{Name: "rc", VirtualHosts: []*routev3.VirtualHost{{Name: "v", Domains: []string{"*"},
			Routes: []*routev3.Route{to("c", m)}}}})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want one naming %q", err, want)
		}
	}
}

// A RouteMatch with fields this proxy's API version does not know (sent
// by a newer control plane) is NACKed, not routed on what is left.
func TestCompileRefusesUnknownMatchFields(t *testing.T) {
	m := &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}}
	// Field 99, varint 1.
	m.ProtoReflect().SetUnknown([]byte{0x98, 0x06, 0x01})
	_, err := Compile(&routev3.RouteConfiguration{VirtualHosts: []*routev3.VirtualHost{{Name: "v", Domains: []string{"*"},
		Routes: []*routev3.Route{to("c", m)}}}})
	if err == nil || !strings.Contains(err.Error(), "does not know") {
		t.Errorf("error %v, want the unknown fields refused", err)
	}
}

// TestRouteOrder: the first matching route wins, so a narrower route
// placed first is not hidden and a non-matching one falls through.
func TestRouteOrder(t *testing.T) {
	tb, err := Compile(&routev3.RouteConfiguration{VirtualHosts: []*routev3.VirtualHost{{Name: "v", Domains: []string{"*"},
		Routes: []*routev3.Route{
			to("v2", &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"},
				QueryParameters: []*routev3.QueryParameterMatcher{query("v", exact("2"))}}),
			to("v1", &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}}),
		}}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := tb.Route(req("GET /?v=2")).PickCluster(); got != "v2" {
		t.Errorf("?v=2 → %s", got)
	}
	if got := tb.Route(req("GET /?v=1")).PickCluster(); got != "v1" {
		t.Errorf("?v=1 → %s", got)
	}
}
