package rbac

import (
	"fmt"
	"regexp"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	uritemplatev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/path/match/uri_template/v3"
)

// Envoy's uri_template path matcher (source/extensions/path/uri_template_lib,
// parseURLPatternSyntax and toRegexPattern), which Istio emits for the
// AuthorizationPolicy path templates {*} and {**}. A template is "/"
// followed by segments separated by "/"; a segment is
//
//   - a literal of RFC 3986 pchar characters other than "*" and "=";
//   - "*": exactly one non-empty path segment;
//   - "**": zero or more characters including "/", and no operator (nor
//     implicit variable) may follow it;
//   - "{name}" or "{name=match}": a named variable; without a match it is
//     "*", with one the match is literals and operators joined by "/".
//
// An operator or variable may be followed, without a "/", by a literal
// suffix that ends the template ("/videos/*.m3u8"); a single trailing "/"
// is kept as an empty last segment. At most five variables, with unique
// names of one to sixteen characters. Newer Envoy also accepts a literal
// prefix glued to a variable ("/api/v{version}"); strait-proxy refuses
// that form by name. Envoy compiles the template to a
// regular expression matched against the whole path without its query;
// so does compileURITemplate.

const (
	uriTemplateTypeURL = "type.googleapis.com/envoy.extensions.path.match.uri_template.v3.UriTemplateMatchConfig"

	// A literal is pchar without "*" and "=": the class
	// a-zA-Z0-9 and -._~%!$&'()+,;:@. uriPathGlobRE is "*" (one or more
	// of them), uriTextGlobRE "**" (any number of them or "/").
	uriPathGlobRE = `[a-zA-Z0-9\-._~%!$&'()+,;:@]+`
	uriTextGlobRE = `[a-zA-Z0-9\-._~%!$&'()+,;:@/]*`

	uriMaxVariables  = 5
	uriMaxVarNameLen = 16
)

var (
	uriLiteralRE = regexp.MustCompile(`^[a-zA-Z0-9\-._~%!$&'()+,;:@]+$`)
	uriVarNameRE = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9_]*$`)
	uriPrintable = regexp.MustCompile(`^/[[:graph:]]*$`)
)

// compileURITemplatePermission compiles a Permission.uri_template: a typed
// extension that must be Envoy's UriTemplateMatchConfig (the only path
// matcher extension Envoy has).
func compileURITemplatePermission(field string, tc *corev3.TypedExtensionConfig) (permission, error) {
	a := tc.GetTypedConfig()
	if a == nil {
		return nil, fmt.Errorf("%s.typed_config must be set (want %s)", field, uriTemplateTypeURL)
	}
	if a.GetTypeUrl() != uriTemplateTypeURL {
		return nil, fmt.Errorf("%s.typed_config: type %s is not supported (want %s)", field, a.GetTypeUrl(), uriTemplateTypeURL)
	}
	var cfg uritemplatev3.UriTemplateMatchConfig
	if err := a.UnmarshalTo(&cfg); err != nil {
		return nil, fmt.Errorf("%s.typed_config: %w", field, err)
	}
	re, err := compileURITemplate(cfg.GetPathTemplate())
	if err != nil {
		return nil, fmt.Errorf("%s.typed_config.path_template: %w", field, err)
	}
	return func(in *Input) bool { return in.Request != nil && re.MatchString(in.Request.Path) }, nil
}

// compileURITemplate parses a uri_template path template and returns the
// anchored regular expression that matches the paths it stands for.
func compileURITemplate(tmpl string) (*regexp.Regexp, error) {
	if !uriPrintable.MatchString(tmpl) {
		return nil, fmt.Errorf("%q must start with \"/\" and hold only printable characters without spaces (e.g. \"/api/*/info\")", tmpl)
	}
	p := uriTemplateParser{names: map[string]bool{}}
	var segs []string
	rest := tmpl[1:]
	for rest != "" {
		var (
			re       string
			operator bool
			err      error
		)
		switch rest[0] {
		case '*':
			re, rest, err = p.operator(tmpl, rest)
			operator = true
		case '{':
			re, rest, err = p.variable(tmpl, rest)
			operator = true
		default:
			// A literal runs to the next "/"; it may follow "**" ("/**/info").
			lit, _, _ := strings.Cut(rest, "/")
			if i := strings.IndexByte(lit, '{'); i > 0 && uriLiteralRE.MatchString(lit[:i]) {
				return nil, fmt.Errorf("%q: segment %q: a literal prefix before a {variable} in one segment (Envoy's \"v{version}\" form) is not supported by strait-proxy (put the variable in a segment of its own)", tmpl, lit)
			}
			if !uriLiteralRE.MatchString(lit) {
				return nil, fmt.Errorf("%q: segment %q is not a literal (letters, digits and -._~%%!$&'()+,;:@), \"*\", \"**\" or a {variable}", tmpl, lit)
			}
			re = regexp.QuoteMeta(lit)
			rest = rest[len(lit):]
		}
		if err != nil {
			return nil, err
		}
		segs = append(segs, re)
		switch {
		case rest == "":
		case rest == "/":
			segs = append(segs, "") // a trailing "/" is an empty last segment
			rest = ""
		case rest[0] == '/':
			rest = rest[1:]
		case operator:
			// A suffix: a literal glued to the operator, ending the template.
			if strings.Contains(rest, "/") {
				return nil, fmt.Errorf("%q: suffix %q after an operator must end the template (a prefix such as \"/a*/b\" is not supported)", tmpl, rest)
			}
			if !uriLiteralRE.MatchString(rest) {
				return nil, fmt.Errorf("%q: suffix %q is not a literal (letters, digits and -._~%%!$&'()+,;:@)", tmpl, rest)
			}
			segs[len(segs)-1] += regexp.QuoteMeta(rest)
			rest = ""
		}
	}
	return regexp.Compile(`^/` + strings.Join(segs, "/") + `$`)
}

// uriTemplateParser holds what the checks across segments need: the
// variable names seen and whether a "**" came before.
type uriTemplateParser struct {
	names    map[string]bool
	textGlob bool
}

// glob checks and records one operator, "*" or "**".
func (p *uriTemplateParser) glob(tmpl, op string) (string, error) {
	if p.textGlob {
		return "", fmt.Errorf("%q: operator %q follows \"**\" (\"**\" must be the last operator)", tmpl, op)
	}
	if op == "**" {
		p.textGlob = true
		return uriTextGlobRE, nil
	}
	return uriPathGlobRE, nil
}

func (p *uriTemplateParser) operator(tmpl, rest string) (re, after string, err error) {
	op := "*"
	if strings.HasPrefix(rest, "**") {
		op = "**"
	}
	re, err = p.glob(tmpl, op)
	return re, rest[len(op):], err
}

func (p *uriTemplateParser) variable(tmpl, rest string) (re, after string, err error) {
	body, after, ok := strings.Cut(rest[1:], "}")
	if !ok {
		return "", "", fmt.Errorf("%q: variable %q has no closing \"}\"", tmpl, rest)
	}
	name, match, hasMatch := strings.Cut(body, "=")
	if !uriVarNameRE.MatchString(name) {
		return "", "", fmt.Errorf("%q: variable name %q is not valid (a letter, then letters, digits or \"_\")", tmpl, name)
	}
	if len(name) > uriMaxVarNameLen {
		return "", "", fmt.Errorf("%q: variable name %q is longer than %d characters", tmpl, name, uriMaxVarNameLen)
	}
	if p.names[name] {
		return "", "", fmt.Errorf("%q: variable %q appears twice", tmpl, name)
	}
	if len(p.names) == uriMaxVariables {
		return "", "", fmt.Errorf("%q: more than %d variables", tmpl, uriMaxVariables)
	}
	p.names[name] = true
	if !hasMatch {
		re, err = p.glob(tmpl, "*")
		return "(?:" + re + ")", after, err
	}
	if match == "" {
		return "", "", fmt.Errorf("%q: variable %q has an empty match after \"=\"", tmpl, name)
	}
	var parts []string
	for _, m := range strings.Split(match, "/") {
		switch {
		case m == "*" || m == "**":
			r, err := p.glob(tmpl, m)
			if err != nil {
				return "", "", err
			}
			parts = append(parts, r)
		case uriLiteralRE.MatchString(m):
			parts = append(parts, regexp.QuoteMeta(m))
		default:
			return "", "", fmt.Errorf("%q: variable %q match segment %q is not a literal, \"*\" or \"**\"", tmpl, name, m)
		}
	}
	return "(?:" + strings.Join(parts, "/") + ")", after, nil
}
