package route

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"github.com/straitmesh/strait/internal/proxy/fieldaudit"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Request is what route matching reads of a request.
type Request struct {
	// Host is the Host header (HTTP/1.1) or :authority (HTTP/2).
	Host string
	// Path is the request path without the query string.
	Path string
	// Query is the query string without its '?' ("" when none).
	Query string
	// Method is the request method (":method").
	Method string
	// Scheme is ":scheme": "http", or "https" on a TLS connection.
	Scheme string
	// Headers gives the request's header values; nil means none.
	Headers HeaderGetter
}

// HTTPHeader adapts net/http's header map to HeaderGetter.
func HTTPHeader(h http.Header) HeaderGetter { return httpHeader(h) }

// routeMatch is a compiled envoy.config.route.v3.RouteMatch: the path
// specifier, then every header matcher, query parameter matcher and the
// gRPC condition must hold (Envoy's RouteEntryImplBase::matchRoute).
type routeMatch struct {
	prefix        string
	path          string
	sepPrefix     string // path_separated_prefix
	hasSepPrefix  bool
	regex         *regexp.Regexp
	caseSensitive bool
	headers       []headerMatcher
	query         []queryMatcher
	grpc          bool
}

type headerMatcher struct {
	name string // canonical header name, or a pseudo-header (":method")
	// present: a present_match (or a matcher with no specifier).
	present      bool
	presentValue bool // the present_match value
	str          func(string) bool
	invert       bool
	// missingAsEmpty: treat_missing_header_as_empty.
	missingAsEmpty bool
}

type queryMatcher struct {
	name    string
	present bool
	str     func(string) bool
}

// compileMatch compiles a RouteMatch. It refuses every field it does not
// implement, naming it, so that a config it cannot honour is NACKed.
func compileMatch(m *routev3.RouteMatch) (*routeMatch, error) {
	if err := fieldaudit.Only("match", m.ProtoReflect(), implementedMatch); err != nil { // fields.go
		return nil, err
	}
	rm := &routeMatch{caseSensitive: true}
	if cs := m.GetCaseSensitive(); cs != nil {
		rm.caseSensitive = cs.GetValue()
	}
	switch ps := m.GetPathSpecifier().(type) {
	case *routev3.RouteMatch_Prefix:
		rm.prefix = ps.Prefix
	case *routev3.RouteMatch_Path:
		rm.path = ps.Path
		if rm.path == "" {
			return nil, fmt.Errorf("match.path is empty")
		}
	case *routev3.RouteMatch_SafeRegex:
		if err := checkRegex("match.safe_regex", ps.SafeRegex); err != nil {
			return nil, err
		}
		re, err := compileRegex(ps.SafeRegex)
		if err != nil {
			return nil, fmt.Errorf("match.safe_regex: %w", err)
		}
		rm.regex = re
	case *routev3.RouteMatch_PathSeparatedPrefix:
		p := ps.PathSeparatedPrefix
		if !strings.HasPrefix(p, "/") || (len(p) > 1 && strings.HasSuffix(p, "/")) || strings.ContainsAny(p, "?#") {
			return nil, fmt.Errorf("match.path_separated_prefix %q must start with '/', not end with '/' and hold no '?' or '#'", p)
		}
		rm.sepPrefix, rm.hasSepPrefix = p, true
	default:
		return nil, fmt.Errorf("match path specifier %s is not supported (want prefix, path, safe_regex or path_separated_prefix)", oneofName(m.ProtoReflect(), "path_specifier"))
	}
	if !rm.caseSensitive {
		rm.prefix, rm.path, rm.sepPrefix = strings.ToLower(rm.prefix), strings.ToLower(rm.path), strings.ToLower(rm.sepPrefix)
	}
	rm.grpc = m.GetGrpc() != nil
	for i, h := range m.GetHeaders() {
		hm, err := compileHeader(h)
		if err != nil {
			return nil, fmt.Errorf("match.headers[%d] %q: %w", i, h.GetName(), err)
		}
		rm.headers = append(rm.headers, hm)
	}
	for i, q := range m.GetQueryParameters() {
		qm, err := compileQuery(q)
		if err != nil {
			return nil, fmt.Errorf("match.query_parameters[%d] %q: %w", i, q.GetName(), err)
		}
		rm.query = append(rm.query, qm)
	}
	return rm, nil
}

func compileHeader(h *routev3.HeaderMatcher) (headerMatcher, error) {
	if err := fieldaudit.Only("header_matcher", h.ProtoReflect(), headerMatcherFields); err != nil { // fields.go
		return headerMatcher{}, err
	}
	name := h.GetName()
	if name == "" {
		return headerMatcher{}, fmt.Errorf("name is empty")
	}
	if !strings.HasPrefix(name, ":") {
		name = http.CanonicalHeaderKey(name)
	} else {
		name = strings.ToLower(name)
		switch name {
		case ":method", ":authority", ":scheme", ":path":
		default:
			return headerMatcher{}, fmt.Errorf("pseudo-header %s is not supported (want :method, :authority, :scheme or :path)", name)
		}
	}
	hm := headerMatcher{name: name, invert: h.GetInvertMatch(), missingAsEmpty: h.GetTreatMissingHeaderAsEmpty()}
	switch s := h.GetHeaderMatchSpecifier().(type) {
	case *routev3.HeaderMatcher_PresentMatch:
		hm.present, hm.presentValue = true, s.PresentMatch
	case nil:
		// No specifier: Envoy matches on presence.
		hm.present, hm.presentValue = true, true
	case *routev3.HeaderMatcher_ExactMatch:
		v := s.ExactMatch
		hm.str = func(x string) bool { return x == v }
	case *routev3.HeaderMatcher_PrefixMatch:
		v := s.PrefixMatch
		hm.str = func(x string) bool { return strings.HasPrefix(x, v) }
	case *routev3.HeaderMatcher_SuffixMatch:
		v := s.SuffixMatch
		hm.str = func(x string) bool { return strings.HasSuffix(x, v) }
	case *routev3.HeaderMatcher_ContainsMatch:
		v := s.ContainsMatch
		hm.str = func(x string) bool { return strings.Contains(x, v) }
	case *routev3.HeaderMatcher_SafeRegexMatch:
		if err := checkRegex("safe_regex_match", s.SafeRegexMatch); err != nil {
			return hm, err
		}
		re, err := compileRegex(s.SafeRegexMatch)
		if err != nil {
			return hm, err
		}
		hm.str = re.MatchString
	case *routev3.HeaderMatcher_StringMatch:
		f, err := compileStringMatch(s.StringMatch)
		if err != nil {
			return hm, err
		}
		hm.str = f
	default:
		return hm, fmt.Errorf("%s is not supported (want string_match, present_match, exact, prefix, suffix, contains or safe_regex)", oneofName(h.ProtoReflect(), "header_match_specifier"))
	}
	return hm, nil
}

func compileQuery(q *routev3.QueryParameterMatcher) (queryMatcher, error) {
	if err := fieldaudit.Only("query_parameter_matcher", q.ProtoReflect(), queryParameterMatcherFields); err != nil { // fields.go
		return queryMatcher{}, err
	}
	if q.GetName() == "" {
		return queryMatcher{}, fmt.Errorf("name is empty")
	}
	qm := queryMatcher{name: q.GetName()}
	switch s := q.GetQueryParameterMatchSpecifier().(type) {
	case *routev3.QueryParameterMatcher_PresentMatch:
		if !s.PresentMatch {
			return qm, fmt.Errorf("present_match false is not supported")
		}
		qm.present = true
	case *routev3.QueryParameterMatcher_StringMatch:
		f, err := compileStringMatch(s.StringMatch)
		if err != nil {
			return qm, err
		}
		qm.str = f
	case nil:
		// Envoy: a matcher without a specifier matches a present
		// parameter.
		qm.present = true
	default:
		return qm, fmt.Errorf("%s is not supported (want string_match or present_match)", oneofName(q.ProtoReflect(), "query_parameter_match_specifier"))
	}
	return qm, nil
}

// oneofName names the set field of a oneof, for messages.
func oneofName(m protoreflect.Message, oneof protoreflect.Name) string {
	od := m.Descriptor().Oneofs().ByName(oneof)
	if od == nil {
		return string(oneof)
	}
	if fd := m.WhichOneof(od); fd != nil {
		return string(fd.Name())
	}
	return "(none)"
}

// compileRegex compiles an Envoy RegexMatcher, matched against the whole
// value as Envoy's RE2 matcher does.
func compileRegex(r *matcherv3.RegexMatcher) (*regexp.Regexp, error) {
	return regexp.Compile("^(?:" + r.GetRegex() + ")$")
}

func compileStringMatch(sm *matcherv3.StringMatcher) (func(string) bool, error) {
	if err := fieldaudit.Only("string_match", sm.ProtoReflect(), stringMatcherFields); err != nil { // fields.go
		return nil, err
	}
	fold := sm.GetIgnoreCase()
	switch p := sm.GetMatchPattern().(type) {
	case *matcherv3.StringMatcher_Exact:
		v := p.Exact
		if fold {
			return func(x string) bool { return strings.EqualFold(x, v) }, nil
		}
		return func(x string) bool { return x == v }, nil
	case *matcherv3.StringMatcher_Prefix:
		v := p.Prefix
		if fold {
			return func(x string) bool { return len(x) >= len(v) && strings.EqualFold(x[:len(v)], v) }, nil
		}
		return func(x string) bool { return strings.HasPrefix(x, v) }, nil
	case *matcherv3.StringMatcher_Suffix:
		v := p.Suffix
		if fold {
			return func(x string) bool { return len(x) >= len(v) && strings.EqualFold(x[len(x)-len(v):], v) }, nil
		}
		return func(x string) bool { return strings.HasSuffix(x, v) }, nil
	case *matcherv3.StringMatcher_Contains:
		v := strings.ToLower(p.Contains)
		if fold {
			return func(x string) bool { return strings.Contains(strings.ToLower(x), v) }, nil
		}
		v = p.Contains
		return func(x string) bool { return strings.Contains(x, v) }, nil
	case *matcherv3.StringMatcher_SafeRegex:
		if fold {
			// Envoy's config validation rejects it too.
			return nil, fmt.Errorf("string_match: ignore_case is not allowed with safe_regex")
		}
		if err := checkRegex("string_match.safe_regex", p.SafeRegex); err != nil {
			return nil, err
		}
		re, err := compileRegex(p.SafeRegex)
		if err != nil {
			return nil, err
		}
		return re.MatchString, nil
	default:
		return nil, fmt.Errorf("string_match.%s is not supported (want exact, prefix, suffix, contains or safe_regex)", oneofName(sm.ProtoReflect(), "match_pattern"))
	}
}

// matches reports whether req satisfies the match.
func (m *routeMatch) matches(req *Request) bool {
	if !m.matchPath(req.Path) {
		return false
	}
	if m.grpc {
		ct, _ := req.header("Content-Type")
		if !strings.HasPrefix(ct, "application/grpc") {
			return false
		}
	}
	for i := range m.headers {
		if !m.headers[i].matches(req) {
			return false
		}
	}
	for i := range m.query {
		if !m.query[i].matches(req.Query) {
			return false
		}
	}
	return true
}

func (m *routeMatch) matchPath(path string) bool {
	if m.regex != nil {
		// Envoy: case_sensitive does not apply to safe_regex.
		return m.regex.MatchString(path)
	}
	p := path
	if !m.caseSensitive {
		p = strings.ToLower(p)
	}
	switch {
	case m.hasSepPrefix:
		if m.sepPrefix == "/" {
			return strings.HasPrefix(p, "/")
		}
		return p == m.sepPrefix || strings.HasPrefix(p, m.sepPrefix+"/")
	case m.path != "":
		return p == m.path
	default:
		return strings.HasPrefix(p, m.prefix)
	}
}

// header returns a header or pseudo-header of the request.
func (req *Request) header(name string) (string, bool) {
	switch name {
	case ":method":
		return req.Method, req.Method != ""
	case ":authority":
		return req.Host, req.Host != ""
	case ":scheme":
		return req.Scheme, req.Scheme != ""
	case ":path":
		if req.Query != "" {
			return req.Path + "?" + req.Query, true
		}
		return req.Path, req.Path != ""
	}
	if req.Headers == nil {
		return "", false
	}
	return req.Headers.Lookup(name)
}

// matches follows Envoy's HeaderUtility::HeaderDataBaseImpl::matchesHeaders:
// a missing header matches only a present_match that wants it absent (or,
// inverted, present), unless treat_missing_header_as_empty matches "".
func (hm *headerMatcher) matches(req *Request) bool {
	val, ok := req.header(hm.name)
	if !ok && !hm.missingAsEmpty {
		if hm.invert {
			return hm.present && hm.presentValue
		}
		return hm.present && !hm.presentValue
	}
	// The header is there (or treated as ""): a present_match yields its
	// value, as Envoy's HeaderDataPresentMatch does.
	m := hm.presentValue
	if !hm.present {
		m = hm.str(val)
	}
	return m != hm.invert
}

// matches follows Envoy's QueryParameterMatcher: the first value of the
// parameter in the raw (not decoded) query string; a parameter without '='
// has the value "".
func (qm *queryMatcher) matches(query string) bool {
	val, ok := firstQueryValue(query, qm.name)
	if !ok {
		return false
	}
	if qm.present {
		return true
	}
	return qm.str(val)
}

// firstQueryValue finds the first "name=value" (or "name") of a raw query
// string, splitting on '&' as Envoy's QueryParamsMulti::parseQueryString.
func firstQueryValue(query, name string) (string, bool) {
	for query != "" {
		var kv string
		kv, query, _ = strings.Cut(query, "&")
		if kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		if k == name {
			return v, true
		}
	}
	return "", false
}

// HeaderMatch is a compiled Envoy HeaderMatcher, for filters that match
// headers outside a route (the RBAC filter's header permission and
// principal).
type HeaderMatch struct{ hm headerMatcher }

// CompileHeaderMatch compiles h with the semantics a route's header
// matcher has (pseudo-headers :method, :authority, :scheme and :path
// included).
func CompileHeaderMatch(h *routev3.HeaderMatcher) (*HeaderMatch, error) {
	hm, err := compileHeader(h)
	if err != nil {
		return nil, err
	}
	return &HeaderMatch{hm: hm}, nil
}

// Matches reports whether req satisfies the matcher.
func (m *HeaderMatch) Matches(req *Request) bool { return m.hm.matches(req) }

// CompileStringMatch compiles an Envoy StringMatcher with the semantics
// route matching gives it.
func CompileStringMatch(sm *matcherv3.StringMatcher) (func(string) bool, error) {
	return compileStringMatch(sm)
}
