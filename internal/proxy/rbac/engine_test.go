package rbac

import (
	"net/netip"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/straitmesh/strait/internal/proxy/httpfilter"
	"github.com/straitmesh/strait/internal/proxy/route"
	"github.com/straitmesh/strait/internal/proxy/stats"
)

// Builders for the configs under test, in the shapes Istio emits.

func exact(s string) *matcherv3.StringMatcher {
	return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: s}}
}

func prefix(s string) *matcherv3.StringMatcher {
	return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: s}}
}

func regex(s string) *matcherv3.StringMatcher {
	return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: s}}}
}

func cidr(ip string, bits uint32) *corev3.CidrRange {
	return &corev3.CidrRange{AddressPrefix: ip, PrefixLen: wrapperspb.UInt32(bits)}
}

var permAny = &rbacv3.Permission{Rule: &rbacv3.Permission_Any{Any: true}}
var idAny = &rbacv3.Principal{Identifier: &rbacv3.Principal_Any{Any: true}}

func permPath(sm *matcherv3.StringMatcher) *rbacv3.Permission {
	return &rbacv3.Permission{Rule: &rbacv3.Permission_UrlPath{UrlPath: &matcherv3.PathMatcher{Rule: &matcherv3.PathMatcher_Path{Path: sm}}}}
}

func permHeader(name string, sm *matcherv3.StringMatcher) *rbacv3.Permission {
	return &rbacv3.Permission{Rule: &rbacv3.Permission_Header{Header: &routev3.HeaderMatcher{Name: name,
		HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: sm}}}}
}

func idAuth(sm *matcherv3.StringMatcher) *rbacv3.Principal {
	return &rbacv3.Principal{Identifier: &rbacv3.Principal_Authenticated_{Authenticated: &rbacv3.Principal_Authenticated{PrincipalName: sm}}}
}

func idMeta(filter string, keys []string, v *matcherv3.ValueMatcher) *rbacv3.Principal {
	var path []*matcherv3.MetadataMatcher_PathSegment
	for _, k := range keys {
		path = append(path, &matcherv3.MetadataMatcher_PathSegment{Segment: &matcherv3.MetadataMatcher_PathSegment_Key{Key: k}})
	}
	return &rbacv3.Principal{Identifier: &rbacv3.Principal_Metadata{Metadata: &matcherv3.MetadataMatcher{Filter: filter, Path: path, Value: v}}}
}

func strValue(sm *matcherv3.StringMatcher) *matcherv3.ValueMatcher {
	return &matcherv3.ValueMatcher{MatchPattern: &matcherv3.ValueMatcher_StringMatch{StringMatch: sm}}
}

func listValue(v *matcherv3.ValueMatcher) *matcherv3.ValueMatcher {
	return &matcherv3.ValueMatcher{MatchPattern: &matcherv3.ValueMatcher_ListMatch{ListMatch: &matcherv3.ListMatcher{
		MatchPattern: &matcherv3.ListMatcher_OneOf{OneOf: v}}}}
}

func one(perm *rbacv3.Permission, id *rbacv3.Principal) *rbacv3.Policy {
	return &rbacv3.Policy{Permissions: []*rbacv3.Permission{perm}, Principals: []*rbacv3.Principal{id}}
}

func mustCompile(t *testing.T, action rbacv3.RBAC_Action, policies map[string]*rbacv3.Policy) *Engine {
	t.Helper()
	e, err := Compile("rules", &rbacv3.RBAC{Action: action, Policies: policies})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// fooConn is a mutual TLS connection from the SPIFFE identity of
// ns/foo/sa/client at 10.0.0.5 to 10.0.0.9:8080.
func fooConn() *Connection {
	return &Connection{
		Source:      netip.MustParseAddrPort("10.0.0.5:40000"),
		Destination: netip.MustParseAddrPort("10.0.0.9:8080"),
		SNI:         "outbound_.80_._.echo.foo.svc.cluster.local",
		Secure:      true,
		URISANs:     []string{"spiffe://cluster.local/ns/foo/sa/client"},
	}
}

type hdrs map[string]string

func (h hdrs) Lookup(name string) (string, bool) {
	for k, v := range h {
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return "", false
}

func httpIn(method, path string, h hdrs) *Input {
	return &Input{Conn: fooConn(), Request: &route.Request{Method: method, Path: path, Host: "echo", Scheme: "http", Headers: h}}
}

func TestEngineMatchers(t *testing.T) {
	md := &httpfilter.Metadata{}
	md.Set("istio_authn", "request.auth.principal", "https://issuer.example/alice")
	md.Set("istio_authn", "request.auth.claims", map[string]any{"groups": []any{"dev", "ops"}, "iss": "https://issuer.example"})
	md.Set("istio_authn", "request.auth.audiences", []string{"api", "web"})
	plain := &Connection{Source: netip.MustParseAddrPort("192.168.1.7:1234"), Destination: netip.MustParseAddrPort("10.0.0.9:9000")}
	for _, tc := range []struct {
		name string
		perm *rbacv3.Permission
		id   *rbacv3.Principal
		in   *Input
		want bool
	}{
		{"any any", permAny, idAny, httpIn("GET", "/", nil), true},
		{"url_path exact", permPath(exact("/admin")), idAny, httpIn("GET", "/admin", nil), true},
		{"url_path ignores the query", permPath(exact("/admin")), idAny, &Input{Conn: fooConn(), Request: &route.Request{Path: "/admin", Query: "x=1"}}, true},
		{"url_path other", permPath(exact("/admin")), idAny, httpIn("GET", "/admins", nil), false},
		{"url_path on a connection", permPath(prefix("/")), idAny, &Input{Conn: fooConn()}, false},
		{"method header", permHeader(":method", exact("POST")), idAny, httpIn("POST", "/", nil), true},
		{"method header other", permHeader(":method", exact("POST")), idAny, httpIn("GET", "/", nil), false},
		{"header on a connection", permHeader(":method", exact("GET")), idAny, &Input{Conn: fooConn()}, false},
		{"destination_port", &rbacv3.Permission{Rule: &rbacv3.Permission_DestinationPort{DestinationPort: 8080}}, idAny, httpIn("GET", "/", nil), true},
		{"destination_port other", &rbacv3.Permission{Rule: &rbacv3.Permission_DestinationPort{DestinationPort: 8081}}, idAny, httpIn("GET", "/", nil), false},
		{"destination_port_range end exclusive", &rbacv3.Permission{Rule: &rbacv3.Permission_DestinationPortRange{DestinationPortRange: &typev3.Int32Range{Start: 8000, End: 8080}}}, idAny, httpIn("GET", "/", nil), false},
		{"destination_port_range", &rbacv3.Permission{Rule: &rbacv3.Permission_DestinationPortRange{DestinationPortRange: &typev3.Int32Range{Start: 8000, End: 8081}}}, idAny, httpIn("GET", "/", nil), true},
		{"destination_ip", &rbacv3.Permission{Rule: &rbacv3.Permission_DestinationIp{DestinationIp: cidr("10.0.0.0", 24)}}, idAny, httpIn("GET", "/", nil), true},
		{"destination_ip other", &rbacv3.Permission{Rule: &rbacv3.Permission_DestinationIp{DestinationIp: cidr("10.0.1.0", 24)}}, idAny, httpIn("GET", "/", nil), false},
		{"requested_server_name", &rbacv3.Permission{Rule: &rbacv3.Permission_RequestedServerName{RequestedServerName: prefix("outbound_.80_")}}, idAny, httpIn("GET", "/", nil), true},
		{"requested_server_name other", &rbacv3.Permission{Rule: &rbacv3.Permission_RequestedServerName{RequestedServerName: exact("x")}}, idAny, httpIn("GET", "/", nil), false},
		{"and_rules all", &rbacv3.Permission{Rule: &rbacv3.Permission_AndRules{AndRules: &rbacv3.Permission_Set{Rules: []*rbacv3.Permission{permPath(exact("/a")), permHeader(":method", exact("GET"))}}}}, idAny, httpIn("GET", "/a", nil), true},
		{"and_rules one fails", &rbacv3.Permission{Rule: &rbacv3.Permission_AndRules{AndRules: &rbacv3.Permission_Set{Rules: []*rbacv3.Permission{permPath(exact("/a")), permHeader(":method", exact("GET"))}}}}, idAny, httpIn("PUT", "/a", nil), false},
		{"or_rules one", &rbacv3.Permission{Rule: &rbacv3.Permission_OrRules{OrRules: &rbacv3.Permission_Set{Rules: []*rbacv3.Permission{permPath(exact("/a")), permPath(exact("/b"))}}}}, idAny, httpIn("GET", "/b", nil), true},
		{"or_rules none", &rbacv3.Permission{Rule: &rbacv3.Permission_OrRules{OrRules: &rbacv3.Permission_Set{Rules: []*rbacv3.Permission{permPath(exact("/a")), permPath(exact("/b"))}}}}, idAny, httpIn("GET", "/c", nil), false},
		{"not_rule", &rbacv3.Permission{Rule: &rbacv3.Permission_NotRule{NotRule: permPath(exact("/a"))}}, idAny, httpIn("GET", "/a", nil), false},
		{"not_rule other", &rbacv3.Permission{Rule: &rbacv3.Permission_NotRule{NotRule: permPath(exact("/a"))}}, idAny, httpIn("GET", "/b", nil), true},
		{"permission metadata", &rbacv3.Permission{Rule: &rbacv3.Permission_Metadata{Metadata: &matcherv3.MetadataMatcher{Filter: "istio_authn",
			Path:  []*matcherv3.MetadataMatcher_PathSegment{{Segment: &matcherv3.MetadataMatcher_PathSegment_Key{Key: "request.auth.principal"}}},
			Value: strValue(prefix("https://issuer.example/"))}}}, idAny, &Input{Conn: fooConn(), Metadata: md}, true},

		{"authenticated exact", permAny, idAuth(exact("spiffe://cluster.local/ns/foo/sa/client")), httpIn("GET", "/", nil), true},
		{"authenticated other sa", permAny, idAuth(exact("spiffe://cluster.local/ns/foo/sa/other")), httpIn("GET", "/", nil), false},
		{"authenticated namespace regex", permAny, idAuth(regex(".*/ns/foo/.*")), httpIn("GET", "/", nil), true},
		{"authenticated plaintext", permAny, idAuth(regex(".*")), &Input{Conn: plain}, false},
		{"authenticated without name", permAny, &rbacv3.Principal{Identifier: &rbacv3.Principal_Authenticated_{Authenticated: &rbacv3.Principal_Authenticated{}}}, httpIn("GET", "/", nil), true},
		{"authenticated without name plaintext", permAny, &rbacv3.Principal{Identifier: &rbacv3.Principal_Authenticated_{Authenticated: &rbacv3.Principal_Authenticated{}}}, &Input{Conn: plain}, false},
		{"authenticated DNS SAN", permAny, idAuth(exact("echo.example")), &Input{Conn: &Connection{Secure: true, DNSSANs: []string{"echo.example"}}}, true},
		{"authenticated subject", permAny, idAuth(exact("CN=echo")), &Input{Conn: &Connection{Secure: true, Subject: "CN=echo"}}, true},
		{"direct_remote_ip", permAny, &rbacv3.Principal{Identifier: &rbacv3.Principal_DirectRemoteIp{DirectRemoteIp: cidr("10.0.0.0", 16)}}, httpIn("GET", "/", nil), true},
		{"direct_remote_ip other", permAny, &rbacv3.Principal{Identifier: &rbacv3.Principal_DirectRemoteIp{DirectRemoteIp: cidr("10.1.0.0", 16)}}, httpIn("GET", "/", nil), false},
		{"direct_remote_ip single address", permAny, &rbacv3.Principal{Identifier: &rbacv3.Principal_DirectRemoteIp{DirectRemoteIp: &corev3.CidrRange{AddressPrefix: "10.0.0.5"}}}, httpIn("GET", "/", nil), true},
		{"source_ip", permAny, &rbacv3.Principal{Identifier: &rbacv3.Principal_SourceIp{SourceIp: cidr("10.0.0.5", 32)}}, httpIn("GET", "/", nil), true},
		{"remote_ip from the peer", permAny, &rbacv3.Principal{Identifier: &rbacv3.Principal_RemoteIp{RemoteIp: cidr("10.0.0.5", 32)}}, httpIn("GET", "/", nil), true},
		{"remote_ip from x-forwarded-for", permAny, &rbacv3.Principal{Identifier: &rbacv3.Principal_RemoteIp{RemoteIp: cidr("203.0.113.0", 24)}},
			&Input{Conn: fooConn(), RemoteIP: netip.MustParseAddr("203.0.113.8")}, true},
		{"remote_ip not the peer when forwarded", permAny, &rbacv3.Principal{Identifier: &rbacv3.Principal_RemoteIp{RemoteIp: cidr("10.0.0.5", 32)}},
			&Input{Conn: fooConn(), RemoteIP: netip.MustParseAddr("203.0.113.8")}, false},
		{"header principal", permAny, &rbacv3.Principal{Identifier: &rbacv3.Principal_Header{Header: &routev3.HeaderMatcher{Name: "x-user",
			HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: exact("alice")}}}}, httpIn("GET", "/", hdrs{"X-User": "alice"}), true},
		{"header principal absent", permAny, &rbacv3.Principal{Identifier: &rbacv3.Principal_Header{Header: &routev3.HeaderMatcher{Name: "x-user",
			HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: exact("alice")}}}}, httpIn("GET", "/", nil), false},
		{"url_path principal", permAny, &rbacv3.Principal{Identifier: &rbacv3.Principal_UrlPath{UrlPath: &matcherv3.PathMatcher{Rule: &matcherv3.PathMatcher_Path{Path: exact("/p")}}}}, httpIn("GET", "/p", nil), true},
		{"request principal", permAny, idMeta("istio_authn", []string{"request.auth.principal"}, strValue(exact("https://issuer.example/alice"))), &Input{Conn: fooConn(), Metadata: md}, true},
		{"request principal other", permAny, idMeta("istio_authn", []string{"request.auth.principal"}, strValue(exact("https://issuer.example/bob"))), &Input{Conn: fooConn(), Metadata: md}, false},
		{"request principal without metadata", permAny, idMeta("istio_authn", []string{"request.auth.principal"}, strValue(regex(".+"))), httpIn("GET", "/", nil), false},
		{"claim in a list", permAny, idMeta("istio_authn", []string{"request.auth.claims", "groups"}, listValue(strValue(exact("ops")))), &Input{Conn: fooConn(), Metadata: md}, true},
		{"claim not in the list", permAny, idMeta("istio_authn", []string{"request.auth.claims", "groups"}, listValue(strValue(exact("qa")))), &Input{Conn: fooConn(), Metadata: md}, false},
		{"claim string through or_match", permAny, idMeta("istio_authn", []string{"request.auth.claims", "iss"}, &matcherv3.ValueMatcher{MatchPattern: &matcherv3.ValueMatcher_OrMatch{OrMatch: &matcherv3.OrMatcher{
			ValueMatchers: []*matcherv3.ValueMatcher{listValue(strValue(exact("https://issuer.example"))), strValue(exact("https://issuer.example"))}}}}), &Input{Conn: fooConn(), Metadata: md}, true},
		{"claim path through a non-map", permAny, idMeta("istio_authn", []string{"request.auth.principal", "x"}, strValue(regex(".*"))), &Input{Conn: fooConn(), Metadata: md}, false},
		{"audiences []string", permAny, idMeta("istio_authn", []string{"request.auth.audiences"}, listValue(strValue(exact("web")))), &Input{Conn: fooConn(), Metadata: md}, true},
		{"metadata invert", permAny, &rbacv3.Principal{Identifier: &rbacv3.Principal_Metadata{Metadata: &matcherv3.MetadataMatcher{Filter: "istio_authn", Invert: true,
			Path:  []*matcherv3.MetadataMatcher_PathSegment{{Segment: &matcherv3.MetadataMatcher_PathSegment_Key{Key: "request.auth.principal"}}},
			Value: strValue(exact("x"))}}}, &Input{Conn: fooConn(), Metadata: md}, true},
		{"metadata invert without metadata", permAny, &rbacv3.Principal{Identifier: &rbacv3.Principal_Metadata{Metadata: &matcherv3.MetadataMatcher{Filter: "istio_authn", Invert: true,
			Path:  []*matcherv3.MetadataMatcher_PathSegment{{Segment: &matcherv3.MetadataMatcher_PathSegment_Key{Key: "request.auth.principal"}}},
			Value: strValue(exact("x"))}}}, httpIn("GET", "/", nil), true},
		{"and_ids", permAny, &rbacv3.Principal{Identifier: &rbacv3.Principal_AndIds{AndIds: &rbacv3.Principal_Set{Ids: []*rbacv3.Principal{idAuth(regex(".*/ns/foo/.*")), idAuth(regex(".*/sa/client"))}}}}, httpIn("GET", "/", nil), true},
		{"and_ids one fails", permAny, &rbacv3.Principal{Identifier: &rbacv3.Principal_AndIds{AndIds: &rbacv3.Principal_Set{Ids: []*rbacv3.Principal{idAuth(regex(".*/ns/foo/.*")), idAuth(regex(".*/sa/x"))}}}}, httpIn("GET", "/", nil), false},
		{"or_ids", permAny, &rbacv3.Principal{Identifier: &rbacv3.Principal_OrIds{OrIds: &rbacv3.Principal_Set{Ids: []*rbacv3.Principal{idAuth(exact("a")), idAuth(regex(".*/sa/client"))}}}}, httpIn("GET", "/", nil), true},
		{"or_ids none", permAny, &rbacv3.Principal{Identifier: &rbacv3.Principal_OrIds{OrIds: &rbacv3.Principal_Set{Ids: []*rbacv3.Principal{idAuth(exact("a")), idAuth(exact("b"))}}}}, httpIn("GET", "/", nil), false},
		{"not_id", permAny, &rbacv3.Principal{Identifier: &rbacv3.Principal_NotId{NotId: idAuth(exact("spiffe://cluster.local/ns/foo/sa/client"))}}, httpIn("GET", "/", nil), false},
		{"not_id plaintext", permAny, &rbacv3.Principal{Identifier: &rbacv3.Principal_NotId{NotId: idAuth(regex(".*"))}}, &Input{Conn: plain}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := mustCompile(t, rbacv3.RBAC_ALLOW, map[string]*rbacv3.Policy{"p": one(tc.perm, tc.id)})
			ok, id := e.Evaluate(tc.in)
			if ok != tc.want {
				t.Fatalf("allowed %v, want %v", ok, tc.want)
			}
			if ok && id != "p" || !ok && id != "" {
				t.Errorf("policy id %q", id)
			}
		})
	}
}

// TestEngineActions: ALLOW allows on a match only (no policy: nothing is
// allowed), DENY denies on a match only, LOG allows always and reports
// the match; a policy needs a permission and a principal to match.
func TestEngineActions(t *testing.T) {
	admin := map[string]*rbacv3.Policy{"admin": one(permPath(prefix("/admin")), idAny)}
	in := func(p string) *Input { return httpIn("GET", p, nil) }
	for _, tc := range []struct {
		name     string
		action   rbacv3.RBAC_Action
		policies map[string]*rbacv3.Policy
		path     string
		want     bool
		wantID   string
	}{
		{"allow match", rbacv3.RBAC_ALLOW, admin, "/admin/x", true, "admin"},
		{"allow no match", rbacv3.RBAC_ALLOW, admin, "/x", false, ""},
		{"allow no policies", rbacv3.RBAC_ALLOW, nil, "/x", false, ""},
		{"deny match", rbacv3.RBAC_DENY, admin, "/admin", false, "admin"},
		{"deny no match", rbacv3.RBAC_DENY, admin, "/x", true, ""},
		{"deny no policies", rbacv3.RBAC_DENY, nil, "/x", true, ""},
		{"log match", rbacv3.RBAC_LOG, admin, "/admin", true, "admin"},
		{"log no match", rbacv3.RBAC_LOG, admin, "/x", true, ""},
		{"principal must match too", rbacv3.RBAC_ALLOW, map[string]*rbacv3.Policy{"p": one(permAny, idAuth(exact("nobody")))}, "/x", false, ""},
		{"first policy by name", rbacv3.RBAC_ALLOW, map[string]*rbacv3.Policy{"b": one(permAny, idAny), "a": one(permAny, idAny)}, "/x", true, "a"},
		{"any permission of several", rbacv3.RBAC_ALLOW, map[string]*rbacv3.Policy{"p": {
			Permissions: []*rbacv3.Permission{permPath(exact("/1")), permPath(exact("/2"))}, Principals: []*rbacv3.Principal{idAuth(exact("x")), idAny}}}, "/2", true, "p"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := mustCompile(t, tc.action, tc.policies)
			ok, id := e.Evaluate(in(tc.path))
			if ok != tc.want || id != tc.wantID {
				t.Errorf("got %v %q, want %v %q", ok, id, tc.want, tc.wantID)
			}
		})
	}
}

func TestCompileRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    *rbacv3.Policy
		want string
	}{
		{"no permissions", &rbacv3.Policy{Principals: []*rbacv3.Principal{idAny}}, "permissions must have"},
		{"no principals", &rbacv3.Policy{Permissions: []*rbacv3.Permission{permAny}}, "principals must have"},
		{"filter_state", one(permAny, &rbacv3.Principal{Identifier: &rbacv3.Principal_FilterState{}}), "filter_state"},
		{"uri_template", one(&rbacv3.Permission{Rule: &rbacv3.Permission_UriTemplate{}}, idAny), "uri_template"},
		{"matcher", one(&rbacv3.Permission{Rule: &rbacv3.Permission_Matcher{}}, idAny), "matcher"},
		{"empty and_rules", one(&rbacv3.Permission{Rule: &rbacv3.Permission_AndRules{AndRules: &rbacv3.Permission_Set{}}}, idAny), "and_rules.rules"},
		{"empty or_ids", one(permAny, &rbacv3.Principal{Identifier: &rbacv3.Principal_OrIds{OrIds: &rbacv3.Principal_Set{}}}), "or_ids.ids"},
		{"bad cidr", one(permAny, &rbacv3.Principal{Identifier: &rbacv3.Principal_DirectRemoteIp{DirectRemoteIp: &corev3.CidrRange{AddressPrefix: "ten"}}}), "direct_remote_ip.address_prefix"},
		{"cidr too long", one(permAny, &rbacv3.Principal{Identifier: &rbacv3.Principal_RemoteIp{RemoteIp: cidr("10.0.0.0", 33)}}), "remote_ip.prefix_len"},
		{"bad regex", one(permAny, idAuth(regex("("))), "principal_name"},
		{"double_match", one(permAny, idMeta("f", []string{"k"}, &matcherv3.ValueMatcher{MatchPattern: &matcherv3.ValueMatcher_DoubleMatch{}})), "double_match"},
		{"metadata without filter", one(permAny, idMeta("", []string{"k"}, strValue(exact("x")))), "metadata.filter"},
		{"any false", one(&rbacv3.Permission{Rule: &rbacv3.Permission_Any{}}, idAny), "any must be true"},
		{"port too big", one(&rbacv3.Permission{Rule: &rbacv3.Permission_DestinationPort{DestinationPort: 70000}}, idAny), "destination_port"},
		{"unknown pseudo-header", one(permHeader(":protocol", exact("x")), idAny), ":protocol"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compile("rules", &rbacv3.RBAC{Policies: map[string]*rbacv3.Policy{"p": tc.p}})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "rules.policies[p]") {
				t.Errorf("Compile: %v, want an error at rules.policies[p] naming %q", err, tc.want)
			}
		})
	}
	if _, err := Compile("rules", &rbacv3.RBAC{AuditLoggingOptions: &rbacv3.RBAC_AuditLoggingOptions{}}); err == nil || !strings.Contains(err.Error(), "audit_logging_options") {
		t.Errorf("audit_logging_options: %v", err)
	}
}

// TestFilterShadow: shadow rules are counted and recorded in the
// metadata, never enforced; the rules decide.
func TestFilterShadow(t *testing.T) {
	deny := &rbacv3.RBAC{Action: rbacv3.RBAC_DENY, Policies: map[string]*rbacv3.Policy{"ns[foo]-policy[dry]-rule[0]": one(permPath(prefix("/")), idAny)}}
	f, err := NewFilter(nil, deny, "", "istio_dry_run_deny_")
	if err != nil {
		t.Fatal(err)
	}
	st := stats.New()
	f.UseStats(st, "http.inbound_0.0.0.0_8080.")
	md := &httpfilter.Metadata{}
	in := httpIn("GET", "/x", nil)
	in.Metadata = md
	if !f.Check(in) {
		t.Fatal("a shadow deny was enforced")
	}
	if v, _ := md.Get(MetadataNamespace, "istio_dry_run_deny_shadow_engine_result"); v != "denied" {
		t.Errorf("shadow_engine_result %v, want denied", v)
	}
	if v, _ := md.Get(MetadataNamespace, "istio_dry_run_deny_shadow_effective_policy_id"); v != "ns[foo]-policy[dry]-rule[0]" {
		t.Errorf("shadow_effective_policy_id %v", v)
	}
	if n := st.Counter("http.inbound_0.0.0.0_8080.rbac.istio_dry_run_deny_shadow_denied").Load(); n != 1 {
		t.Errorf("shadow_denied %d, want 1", n)
	}
	if n := st.Counter("http.inbound_0.0.0.0_8080.rbac.allowed").Load(); n != 0 {
		t.Errorf("allowed %d without rules, want 0", n)
	}

	allow := &rbacv3.RBAC{Action: rbacv3.RBAC_ALLOW, Policies: map[string]*rbacv3.Policy{"p": one(permPath(exact("/ok")), idAny)}}
	f, err = NewFilter(allow, nil, "", "")
	if err != nil {
		t.Fatal(err)
	}
	f.UseStats(st, "tcp.")
	if !f.Check(httpIn("GET", "/ok", nil)) || f.Check(httpIn("GET", "/no", nil)) {
		t.Error("rules not enforced")
	}
	if a, d := st.Counter("tcp.rbac.allowed").Load(), st.Counter("tcp.rbac.denied").Load(); a != 1 || d != 1 {
		t.Errorf("allowed %d denied %d, want 1 and 1", a, d)
	}
}
