package router

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
)

// PathRewrite is a route's prefix_rewrite or regex_rewrite. Immutable.
type PathRewrite struct {
	prefix    string
	hasPrefix bool
	re        *regexp.Regexp
	subst     string // in regexp.Expand form
}

// CompilePathRewrite compiles prefix_rewrite or regex_rewrite (both empty:
// nil). field prefixes error messages.
func CompilePathRewrite(field, prefix string, rr *matcherv3.RegexMatchAndSubstitute) (*PathRewrite, error) {
	switch {
	case prefix != "" && rr != nil:
		return nil, fmt.Errorf("%s: prefix_rewrite and regex_rewrite are both set (use one)", field)
	case prefix != "":
		return &PathRewrite{prefix: prefix, hasPrefix: true}, nil
	case rr != nil:
		re, err := regexp.Compile(rr.GetPattern().GetRegex())
		if err != nil {
			return nil, fmt.Errorf("%s.regex_rewrite.pattern: %w", field, err)
		}
		return &PathRewrite{re: re, subst: expandForm(rr.GetSubstitution())}, nil
	}
	return nil, nil
}

// expandForm turns an RE2 substitution (\1 for a group) into Go's
// regexp.Expand form (${1}), escaping '$'.
func expandForm(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '$':
			b.WriteString("$$")
		case c == '\\' && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9':
			b.WriteString("${" + strconv.Itoa(int(s[i+1]-'0')) + "}")
			i++
		case c == '\\' && i+1 < len(s) && s[i+1] == '\\':
			b.WriteByte('\\')
			i++
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// Apply rewrites path (without its query). matched is how many leading
// bytes of path the route matched: the prefix of a prefix match, the whole
// path for a path or regex match; prefix_rewrite replaces them.
// regex_rewrite replaces every match of its pattern.
func (p *PathRewrite) Apply(path string, matched int) string {
	if p.hasPrefix {
		return p.prefix + path[min(matched, len(path)):]
	}
	return p.re.ReplaceAllString(path, p.subst)
}

// Redirect is a compiled redirect action. Immutable.
type Redirect struct {
	Code        int
	scheme      string // "": keep the request's
	host        string
	port        uint32
	path        string // path_redirect; "" keeps the path
	rewrite     *PathRewrite
	stripQuery  bool
	pathHasQery bool
}

var redirectCodes = map[routev3.RedirectAction_RedirectResponseCode]int{
	routev3.RedirectAction_MOVED_PERMANENTLY:  301,
	routev3.RedirectAction_FOUND:              302,
	routev3.RedirectAction_SEE_OTHER:          303,
	routev3.RedirectAction_TEMPORARY_REDIRECT: 307,
	routev3.RedirectAction_PERMANENT_REDIRECT: 308,
}

// CompileRedirect compiles a route's redirect action. Envoy's regex_rewrite
// in a redirect is refused.
func CompileRedirect(ra *routev3.RedirectAction) (*Redirect, error) {
	code, ok := redirectCodes[ra.GetResponseCode()]
	if !ok {
		return nil, fmt.Errorf("redirect.response_code %v is not supported", ra.GetResponseCode())
	}
	r := &Redirect{Code: code, host: ra.GetHostRedirect(), port: ra.GetPortRedirect(), stripQuery: ra.GetStripQuery()}
	switch s := ra.GetSchemeRewriteSpecifier().(type) {
	case *routev3.RedirectAction_HttpsRedirect:
		if s.HttpsRedirect {
			r.scheme = "https"
		}
	case *routev3.RedirectAction_SchemeRedirect:
		r.scheme = strings.ToLower(s.SchemeRedirect)
	}
	switch p := ra.GetPathRewriteSpecifier().(type) {
	case *routev3.RedirectAction_PathRedirect:
		r.path = p.PathRedirect
		r.pathHasQery = strings.Contains(p.PathRedirect, "?")
	case *routev3.RedirectAction_PrefixRewrite:
		r.rewrite = &PathRewrite{prefix: p.PrefixRewrite, hasPrefix: true}
	case *routev3.RedirectAction_RegexRewrite:
		return nil, fmt.Errorf("redirect.regex_rewrite is not supported by strait-proxy (use path_redirect or prefix_rewrite)")
	}
	return r, nil
}

// Location is the redirect's Location for a request with this scheme,
// Host, path (without query), query (with its '?', or empty) and matched
// prefix length (see PathRewrite.Apply). It follows Envoy's
// RouteEntryImplBase::newUri.
func (r *Redirect) Location(scheme, host, path, query string, matched int) string {
	finalScheme := scheme
	if r.scheme != "" {
		finalScheme = r.scheme
	}
	finalHost := host
	if r.host != "" {
		finalHost = r.host
	}
	switch {
	case r.port != 0:
		finalHost = hostWithoutPort(finalHost) + ":" + strconv.FormatUint(uint64(r.port), 10)
	case r.host == "" && finalScheme != scheme:
		// A scheme change drops the request's port (it was the old
		// scheme's).
		finalHost = hostWithoutPort(finalHost)
	}
	finalPath := path
	switch {
	case r.path != "":
		finalPath = r.path
		if r.pathHasQery {
			query = ""
		}
	case r.rewrite != nil:
		finalPath = r.rewrite.Apply(path, matched)
	}
	if r.stripQuery {
		query = ""
	}
	return finalScheme + "://" + finalHost + finalPath + query
}

func hostWithoutPort(h string) string {
	i := strings.LastIndexByte(h, ':')
	if i < 0 || strings.HasSuffix(h, "]") {
		return h
	}
	return h[:i]
}

// compileRegexRewrite is CompilePathRewrite for a pattern and substitution.
func compileRegexRewrite(pattern, subst string) (*PathRewrite, error) {
	return CompilePathRewrite("route", "", &matcherv3.RegexMatchAndSubstitute{Pattern: &matcherv3.RegexMatcher{Regex: pattern}, Substitution: subst})
}
