package rbac

import (
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	uritemplatev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/path/match/uri_template/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// permTemplate is a Permission in the shape Istio's permissionPathTemplate
// (pilot/pkg/security/authz/model/permission.go) emits.
func permTemplate(t *testing.T, tmpl string) *rbacv3.Permission {
	t.Helper()
	return permTyped(t, &uritemplatev3.UriTemplateMatchConfig{PathTemplate: tmpl})
}

func permTyped(t *testing.T, m proto.Message) *rbacv3.Permission {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return &rbacv3.Permission{Rule: &rbacv3.Permission_UriTemplate{UriTemplate: &corev3.TypedExtensionConfig{Name: "uri-template", TypedConfig: a}}}
}

// TestURITemplateMatch: the examples of Envoy's uri_template_match.proto
// and the template forms Istio emits for {*} and {**}, each with paths it
// must and must not match.
func TestURITemplateMatch(t *testing.T) {
	for _, tc := range []struct {
		tmpl     string
		match    []string
		mismatch []string
	}{
		// Envoy's documented examples.
		{"/videos/*/*/*.m4s", []string{"/videos/123414/hls/1080p5000_00001.m4s"},
			[]string{"/videos/123414/hls/1080p5000_00001.mp4", "/videos/123414/1080p5000_00001.m4s", "/videos/1/2/3/4.m4s", "/videos/1/2/.m4s"}},
		{"/videos/{file}", []string{"/videos/1080p5000_00001.m4s"}, []string{"/videos/", "/videos/a/b", "/videos"}},
		{"/**.mpd", []string{"/content/123/india/dash/55/manifest.mpd", "/.mpd"}, []string{"/content/manifest.mpdx", "/manifest.m3u8"}},
		{"/videos/{name=videos/*}", []string{"/videos/videos/a"}, []string{"/videos/videos/a/b", "/videos/other/a"}},
		{"/{name=**}", []string{"/", "/a", "/a/b/c"}, []string{""}},
		// Istio's path templates, after sanitizePathTemplate.
		{"/api/*/info", []string{"/api/x/info", "/api/x.y-z~_%20/info"}, []string{"/api/x/y/info", "/api//info", "/api/info", "/api/x/info/more", "/API/x/info"}},
		{"/api/**", []string{"/api/", "/api/x", "/api/x/y/z"}, []string{"/api", "/apix", "/other/api/x"}},
		{"/**/info", []string{"/a/info", "/a/b/info", "//info"}, []string{"/info", "/a/info/x"}},
		{"/*", []string{"/a"}, []string{"/", "/a/b"}},
		{"/*/", []string{"/a/"}, []string{"/a", "/a/b/"}},
		// Characters outside the literal class never match an operator,
		// and regexp metacharacters in a literal match themselves.
		{"/a/*", nil, []string{"/a/b=c", "/a/b*c", "/a/b c", "/a/b?c"}},
		{"/a.b/(c)+", []string{"/a.b/(c)+"}, []string{"/aXb/(c)+", "/a.b/cc"}},
	} {
		t.Run(tc.tmpl, func(t *testing.T) {
			re, err := compileURITemplate(tc.tmpl)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range tc.match {
				if !re.MatchString(p) {
					t.Errorf("%q does not match %q (regexp %s)", tc.tmpl, p, re)
				}
			}
			for _, p := range tc.mismatch {
				if re.MatchString(p) {
					t.Errorf("%q matches %q (regexp %s)", tc.tmpl, p, re)
				}
			}
		})
	}
}

// TestURITemplateRefusals: what Envoy's parseURLPatternSyntax rejects,
// and the one newer form strait-proxy does not implement, each named.
func TestURITemplateRefusals(t *testing.T) {
	for _, tc := range []struct{ tmpl, want string }{
		{"", "must start with"},
		{"api/*", "must start with"},
		{"/a b", "must start with"},
		{"/**/*", `operator "*" follows "**"`},
		{"/**/**", `operator "**" follows "**"`},
		{"/**/{x}", `operator "*" follows "**"`},
		{"/{x=**}/*", `operator "*" follows "**"`},
		{"/{x=a/**}/{y=*}", `operator "*" follows "**"`},
		{"/a=b", `segment "a=b" is not a literal`},
		{"/a*", `segment "a*" is not a literal`},
		{"//a", `segment "" is not a literal`},
		{"/*x/y", "must end the template"},
		{"/***", `suffix "*" is not a literal`},
		{"/{x", "no closing"},
		{"/{1x}", `variable name "1x"`},
		{"/{x=}", "empty match"},
		{"/{x=a/}", `match segment ""`},
		{"/{x=a*}", `match segment "a*"`},
		{"/{x}/{x}", "appears twice"},
		{"/{abcdefghijklmnopq}", "longer than 16"},
		{"/{a}/{b}/{c}/{d}/{e}/{f}", "more than 5 variables"},
		{"/api/v{version}", "literal prefix before a {variable}"},
	} {
		t.Run(tc.tmpl, func(t *testing.T) {
			_, err := compileURITemplate(tc.tmpl)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("compileURITemplate(%q): %v, want an error naming %q", tc.tmpl, err, tc.want)
			}
		})
	}
	// The limits are inclusive.
	for _, ok := range []string{"/{abcdefghijklmnop}", "/{a}/{b}/{c}/{d}/{e}", "/{id}.json", "/"} {
		if _, err := compileURITemplate(ok); err != nil {
			t.Errorf("compileURITemplate(%q): %v", ok, err)
		}
	}
}

// TestURITemplatePermission: the permission in an RBAC policy matches the
// request path (the query is not part of it), never a connection, and a
// typed_config other than UriTemplateMatchConfig is refused by type.
func TestURITemplatePermission(t *testing.T) {
	e := mustCompile(t, rbacv3.RBAC_ALLOW, map[string]*rbacv3.Policy{"p": one(permTemplate(t, "/api/*/info"), idAny)})
	for _, tc := range []struct {
		path string
		want bool
	}{{"/api/x/info", true}, {"/api/x/y/info", false}, {"/api/info", false}} {
		if got, _ := e.Evaluate(httpIn("GET", tc.path, nil)); got != tc.want {
			t.Errorf("GET %s allowed = %v, want %v", tc.path, got, tc.want)
		}
	}
	if ok, _ := e.Evaluate(&Input{Conn: fooConn()}); ok {
		t.Error("a connection without a request matched a uri_template")
	}
	notRule := &rbacv3.Permission{Rule: &rbacv3.Permission_NotRule{NotRule: permTemplate(t, "/api/**")}}
	deny := mustCompile(t, rbacv3.RBAC_DENY, map[string]*rbacv3.Policy{"p": one(notRule, idAny)})
	okAPI, _ := deny.Evaluate(httpIn("GET", "/api/a/b", nil))
	okOther, _ := deny.Evaluate(httpIn("GET", "/other", nil))
	if !okAPI || okOther {
		t.Error("DENY notPaths /api/{**}: want /api/a/b allowed and /other denied")
	}

	for _, tc := range []struct {
		name string
		perm *rbacv3.Permission
		want string
	}{
		{"bad template", permTemplate(t, "/a/**/*"), "uri_template.typed_config.path_template"},
		{"other type", permTyped(t, wrapperspb.String("/a")), "type.googleapis.com/google.protobuf.StringValue is not supported"},
		{"no typed_config", &rbacv3.Permission{Rule: &rbacv3.Permission_UriTemplate{UriTemplate: &corev3.TypedExtensionConfig{Name: "uri-template"}}}, "uri_template.typed_config must be set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compile("rules", &rbacv3.RBAC{Policies: map[string]*rbacv3.Policy{"p": one(tc.perm, idAny)}})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Compile: %v, want an error naming %q", err, tc.want)
			}
		})
	}
}

// FuzzURITemplate: a template from the control plane never panics the
// parser, and what it compiles to only matches paths made of "/" and the
// literal characters (so "?", "#", spaces or "=" never slip through an
// operator); a template of literals alone matches itself.
func FuzzURITemplate(f *testing.F) {
	for _, s := range []string{"/api/*/info", "/**.mpd", "/{a=b/**}", "/{x}.json", "/a/", "/**/*", "/{x", "/a/b"} {
		f.Add(s, "/api/x/info")
	}
	f.Fuzz(func(t *testing.T, tmpl, path string) {
		re, err := compileURITemplate(tmpl)
		if err != nil {
			return
		}
		if re.MatchString(path) && strings.Trim(path, "/"+uriLiteralSet) != "" {
			t.Errorf("%q matches %q, which holds characters outside the literal set", tmpl, path)
		}
		if !strings.ContainsAny(tmpl, "*{") && !re.MatchString(tmpl) {
			t.Errorf("literal template %q does not match itself", tmpl)
		}
	})
}

// uriLiteralSet is the literal character class, spelled out for strings.Trim.
const uriLiteralSet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~%!$&'()+,;:@"
