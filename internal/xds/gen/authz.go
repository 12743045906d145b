package gen

// AuthorizationPolicy → RBAC filters on a workload's inbound chains, as
// Istio's authz builder does (pilot/pkg/security/authz/builder/builder.go,
// model/proxypush.go and model/generator.go): one filter per action present,
// AUDIT (LOG), DENY, then ALLOW, so a DENY match wins over an ALLOW; an
// ALLOW filter whose policies match nothing denies; no policy means no
// filter (everything allowed). Each rule is a policy named
// ns[NS]-policy[NAME]-rule[I]; a policy without rules gets one that never
// matches. A dry-run policy goes into the filter's shadow rules. On TCP
// chains, HTTP-only fields make an ALLOW rule match nothing (the rule is
// left out) and are dropped from a DENY or AUDIT rule (which then matches
// more), as Istio does.
//
// Request principals, audiences, presenter and claims match the request's
// dynamic metadata under "istio_authn" (keys request.auth.principal
// "ISS/SUB", request.auth.audiences, request.auth.presenter,
// request.auth.claims), which strait-proxy's JWT filter writes.
//
// A path with a template ({*} or {**}) becomes Envoy's uri_template
// permission; other paths keep Istio's exact, prefix, suffix and presence
// wildcards.

import (
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	rbacpb "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	routepb "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	rbachttp "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	rbactcp "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/rbac/v3"
	uritemplate "github.com/envoyproxy/go-control-plane/envoy/extensions/path/match/uri_template/v3"
	matcher "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
	security "istio.io/api/security/v1beta1"

	"github.com/straitmesh/strait/internal/istioconfig"
	"github.com/straitmesh/strait/internal/mesh"
	"github.com/straitmesh/strait/internal/proxypush"
)

const (
	httpRBACFilterName    = "envoy.filters.http.rbac"
	networkRBACFilterName = "envoy.filters.network.rbac"
	// authnMetadata is the dynamic metadata namespace of the verified
	// request credentials (Istio's authn filter name).
	authnMetadata = "istio_authn"

	rbacTCPStatPrefix         = "tcp."
	rbacShadowAllowStatPrefix = "istio_dry_run_allow_"
	rbacShadowDenyStatPrefix  = "istio_dry_run_deny_"
)

// errHTTPOnly marks a value that has no meaning on a TCP chain.
var errHTTPOnly = errors.New("HTTP only")

// authzFilters are the RBAC filters of one workload's inbound chains.
type authzFilters struct {
	http []*hcm.HttpFilter
	tcp  []*listener.Filter
}

// buildAuthz translates the policies that apply to the workload; tds is
// the mesh's trust domain bundle, which principals and trust domains of
// the policies are read against (trustdomain.go).
func buildAuthz(pols mesh.AuthorizationPolicies, tds trustDomains) authzFilters {
	var out authzFilters
	if pols.Empty() {
		return out
	}
	for _, a := range []struct {
		pols   []*istioconfig.Config
		action rbacpb.RBAC_Action
	}{{pols.Audit, rbacpb.RBAC_LOG}, {pols.Deny, rbacpb.RBAC_DENY}, {pols.Allow, rbacpb.RBAC_ALLOW}} {
		if len(a.pols) == 0 {
			continue
		}
		rules, shadow := buildRBAC(a.pols, a.action, tds, false)
		out.http = append(out.http, &hcm.HttpFilter{
			Name: httpRBACFilterName,
			ConfigType: &hcm.HttpFilter_TypedConfig{TypedConfig: mustAny(&rbachttp.RBAC{
				Rules: rules, ShadowRules: shadow, ShadowRulesStatPrefix: shadowStatPrefix(shadow),
			})},
		})
		rules, shadow = buildRBAC(a.pols, a.action, tds, true)
		out.tcp = append(out.tcp, &listener.Filter{
			Name: networkRBACFilterName,
			ConfigType: &listener.Filter_TypedConfig{TypedConfig: mustAny(&rbactcp.RBAC{
				Rules: rules, StatPrefix: rbacTCPStatPrefix, ShadowRules: shadow, ShadowRulesStatPrefix: shadowStatPrefix(shadow),
			})},
		})
	}
	return out
}

func shadowStatPrefix(r *rbacpb.RBAC) string {
	switch {
	case r == nil:
		return ""
	case r.Action == rbacpb.RBAC_ALLOW:
		return rbacShadowAllowStatPrefix
	case r.Action == rbacpb.RBAC_DENY:
		return rbacShadowDenyStatPrefix
	}
	return ""
}

// matchNever is the policy of an AuthorizationPolicy without rules.
func matchNever() *rbacpb.Policy {
	return &rbacpb.Policy{
		Permissions: []*rbacpb.Permission{{Rule: &rbacpb.Permission_NotRule{NotRule: permAny()}}},
		Principals:  []*rbacpb.Principal{{Identifier: &rbacpb.Principal_NotId{NotId: principalAny()}}},
	}
}

// buildRBAC is the enforced and the shadow (dry-run) rules of one action;
// either is nil when no policy goes there.
func buildRBAC(pols []*istioconfig.Config, action rbacpb.RBAC_Action, tds trustDomains, forTCP bool) (rules, shadow *rbacpb.RBAC) {
	for _, c := range pols {
		dst := &rules
		if mesh.DryRun(c) {
			dst = &shadow
		}
		if *dst == nil {
			*dst = &rbacpb.RBAC{Action: action, Policies: map[string]*rbacpb.Policy{}}
		}
		spec := c.AuthorizationPolicy()
		if len(spec.GetRules()) == 0 {
			(*dst).Policies[rbacPolicyName(c, 0)] = matchNever()
			continue
		}
		for i, r := range spec.GetRules() {
			if r == nil {
				continue
			}
			p, err := translateRule(c.Namespace, r, action, tds, forTCP)
			if err != nil {
				continue // an ALLOW rule with HTTP-only fields on TCP matches nothing
			}
			(*dst).Policies[rbacPolicyName(c, i)] = p
		}
	}
	return rules, shadow
}

func rbacPolicyName(c *istioconfig.Config, i int) string {
	return fmt.Sprintf("ns[%s]-policy[%s]-rule[%d]", c.Namespace, c.Name, i)
}

// authzCond is one key of a rule with its values and not-values.
type authzCond struct {
	key               string
	values, notValues []string
}

// translateRule is one rule as a policy: a permission per `to` (its
// operation ANDed with the when-conditions on the destination), a
// principal per `from` (its source ANDed with the other when-conditions).
func translateRule(policyNS string, r *security.Rule, action rbacpb.RBAC_Action, tds trustDomains, forTCP bool) (*rbacpb.Policy, error) {
	var basePerm, basePrin []authzCond
	for _, w := range r.GetWhen() {
		c := authzCond{w.GetKey(), w.GetValues(), w.GetNotValues()}
		switch w.GetKey() {
		case "destination.ip", "destination.port", "connection.sni":
			basePerm = append(basePerm, c)
		default:
			basePrin = append(basePrin, c)
		}
	}
	g := condGen{ns: policyNS, tds: tds, forTCP: forTCP, lenient: action != rbacpb.RBAC_ALLOW}
	p := &rbacpb.Policy{}
	froms := r.GetFrom()
	if len(froms) == 0 {
		froms = []*security.Rule_From{nil}
	}
	for _, f := range froms {
		var conds []authzCond
		if s := f.GetSource(); s != nil {
			conds = append(conds,
				authzCond{"source.principal", s.Principals, s.NotPrincipals},
				authzCond{"request.auth.principal", s.RequestPrincipals, s.NotRequestPrincipals},
				authzCond{"source.serviceAccount", s.ServiceAccounts, s.NotServiceAccounts},
				authzCond{"source.trustDomain", s.TrustDomains, s.NotTrustDomains},
				authzCond{"source.namespace", s.Namespaces, s.NotNamespaces},
				authzCond{"remote.ip", s.RemoteIpBlocks, s.NotRemoteIpBlocks},
				authzCond{"source.ip", s.IpBlocks, s.NotIpBlocks})
		}
		var and []*rbacpb.Principal
		for _, c := range append(conds, basePrin...) {
			ids, err := g.principals(c)
			if err != nil {
				return nil, err
			}
			and = append(and, ids...)
		}
		if len(and) == 0 {
			and = []*rbacpb.Principal{principalAny()}
		}
		p.Principals = append(p.Principals, &rbacpb.Principal{Identifier: &rbacpb.Principal_AndIds{AndIds: &rbacpb.Principal_Set{Ids: and}}})
	}
	tos := r.GetTo()
	if len(tos) == 0 {
		tos = []*security.Rule_To{nil}
	}
	for _, t := range tos {
		var conds []authzCond
		if o := t.GetOperation(); o != nil {
			conds = append(conds,
				authzCond{":authority", o.Hosts, o.NotHosts},
				authzCond{":method", o.Methods, o.NotMethods},
				authzCond{"path", o.Paths, o.NotPaths},
				authzCond{"destination.port", o.Ports, o.NotPorts})
		}
		var and []*rbacpb.Permission
		for _, c := range append(conds, basePerm...) {
			ps, err := g.permissions(c)
			if err != nil {
				return nil, err
			}
			and = append(and, ps...)
		}
		if len(and) == 0 {
			and = []*rbacpb.Permission{permAny()}
		}
		p.Permissions = append(p.Permissions, &rbacpb.Permission{Rule: &rbacpb.Permission_AndRules{AndRules: &rbacpb.Permission_Set{Rules: and}}})
	}
	return p, nil
}

// condGen turns conditions into matchers. lenient (DENY, AUDIT) drops a
// value that cannot be generated instead of failing the rule.
type condGen struct {
	ns      string
	tds     trustDomains
	forTCP  bool
	lenient bool
}

func (g condGen) check(err error) error {
	if g.lenient {
		return nil
	}
	return err
}

// principals: the values ORed, the not-values ORed under a NOT.
func (g condGen) principals(c authzCond) ([]*rbacpb.Principal, error) {
	// Principals and trust domains name the mesh's trust domain as Istio's
	// Model.MigrateTrustDomain reads them: cluster.local and the aliases
	// stand for the whole bundle.
	switch c.key {
	case "source.principal":
		c.values, c.notValues = g.tds.principals(c.values), g.tds.principals(c.notValues)
	case "source.trustDomain":
		c.values, c.notValues = g.tds.expand(c.values), g.tds.expand(c.notValues)
	}
	var out []*rbacpb.Principal
	for i, vs := range [][]string{c.values, c.notValues} {
		if len(vs) == 0 {
			continue
		}
		var or []*rbacpb.Principal
		if extendedPrincipal(c.key) {
			p, err := g.extended(c.key, vs)
			if err := g.check(err); err != nil {
				return nil, err
			}
			if p != nil {
				or = append(or, p)
			}
		} else {
			for _, v := range vs {
				p, err := g.principal(c.key, v)
				if err := g.check(err); err != nil {
					return nil, err
				}
				if p != nil {
					or = append(or, p)
				}
			}
		}
		if len(or) == 0 {
			continue
		}
		p := or[0]
		if !extendedPrincipal(c.key) {
			p = &rbacpb.Principal{Identifier: &rbacpb.Principal_OrIds{OrIds: &rbacpb.Principal_Set{Ids: or}}}
		}
		if i == 1 {
			p = &rbacpb.Principal{Identifier: &rbacpb.Principal_NotId{NotId: p}}
		}
		out = append(out, p)
	}
	return out, nil
}

func (g condGen) permissions(c authzCond) ([]*rbacpb.Permission, error) {
	var out []*rbacpb.Permission
	for i, vs := range [][]string{c.values, c.notValues} {
		var or []*rbacpb.Permission
		for _, v := range vs {
			p, err := g.permission(c.key, v)
			if err := g.check(err); err != nil {
				return nil, err
			}
			if p != nil {
				or = append(or, p)
			}
		}
		if len(or) == 0 {
			continue
		}
		p := &rbacpb.Permission{Rule: &rbacpb.Permission_OrRules{OrRules: &rbacpb.Permission_Set{Rules: or}}}
		if i == 1 {
			p = &rbacpb.Permission{Rule: &rbacpb.Permission_NotRule{NotRule: p}}
		}
		out = append(out, p)
	}
	return out, nil
}

func (g condGen) permission(key, v string) (*rbacpb.Permission, error) {
	switch key {
	case "destination.ip":
		cidr, err := cidrRange(v)
		if err != nil {
			return nil, err
		}
		return &rbacpb.Permission{Rule: &rbacpb.Permission_DestinationIp{DestinationIp: cidr}}, nil
	case "destination.port":
		port, err := strconv.ParseUint(v, 10, 32)
		if err != nil || port > 65535 {
			return nil, fmt.Errorf("invalid port %q", v)
		}
		return &rbacpb.Permission{Rule: &rbacpb.Permission_DestinationPort{DestinationPort: uint32(port)}}, nil
	case "connection.sni":
		return &rbacpb.Permission{Rule: &rbacpb.Permission_RequestedServerName{RequestedServerName: wildcardMatcher(v, "")}}, nil
	}
	if g.forTCP {
		return nil, errHTTPOnly
	}
	switch key {
	case ":authority":
		return &rbacpb.Permission{Rule: &rbacpb.Permission_Header{Header: headerWildcard(key, v, true)}}, nil
	case ":method":
		return &rbacpb.Permission{Rule: &rbacpb.Permission_Header{Header: headerWildcard(key, v, false)}}, nil
	case "path":
		if istioconfig.ContainsPathTemplate(v) {
			return pathTemplatePermission(v), nil
		}
		return &rbacpb.Permission{Rule: &rbacpb.Permission_UrlPath{UrlPath: &matcher.PathMatcher{
			Rule: &matcher.PathMatcher_Path{Path: wildcardMatcher(v, "")}}}}, nil
	}
	return nil, fmt.Errorf("unknown permission key %q", key)
}

// pathTemplatePermission matches a path with Istio's templates ({*} one
// segment, {**} any number of segments) through Envoy's uri_template path
// matcher extension, as Istio's pathGenerator and permissionPathTemplate
// do (pilot/pkg/security/authz/model): {*} becomes "*" and {**} "**".
func pathTemplatePermission(v string) *rbacpb.Permission {
	tmpl := strings.NewReplacer("{**}", "**", "{*}", "*").Replace(v)
	return &rbacpb.Permission{Rule: &rbacpb.Permission_UriTemplate{UriTemplate: &core.TypedExtensionConfig{
		Name:        "uri-template",
		TypedConfig: mustAny(&uritemplate.UriTemplateMatchConfig{PathTemplate: tmpl}),
	}}}
}

func extendedPrincipal(key string) bool {
	switch key {
	case "request.auth.principal", "request.auth.audiences", "request.auth.presenter":
		return true
	}
	return strings.HasPrefix(key, "request.auth.claims")
}

func (g condGen) principal(key, v string) (*rbacpb.Principal, error) {
	authn := func(sm *matcher.StringMatcher) *rbacpb.Principal {
		return &rbacpb.Principal{Identifier: &rbacpb.Principal_Authenticated_{Authenticated: &rbacpb.Principal_Authenticated{PrincipalName: sm}}}
	}
	switch key {
	case "source.ip", "remote.ip":
		cidr, err := cidrRange(v)
		if err != nil {
			return nil, err
		}
		if key == "remote.ip" {
			return &rbacpb.Principal{Identifier: &rbacpb.Principal_RemoteIp{RemoteIp: cidr}}, nil
		}
		return &rbacpb.Principal{Identifier: &rbacpb.Principal_DirectRemoteIp{DirectRemoteIp: cidr}}, nil
	case "source.namespace":
		parts := strings.Split(v, "*")
		for i := range parts {
			parts[i] = regexp.QuoteMeta(parts[i])
		}
		return authn(regexMatcher(fmt.Sprintf(".*/ns/%s/.*", strings.Join(parts, ".*")))), nil
	case "source.serviceAccount":
		ns, sa, ok := strings.Cut(v, "/")
		if !ok {
			ns, sa = g.ns, v
		}
		return authn(regexMatcher(fmt.Sprintf("spiffe://.+/ns/%s/(.+/|)sa/%s(/.+)?", regexp.QuoteMeta(ns), regexp.QuoteMeta(sa)))), nil
	case "source.trustDomain":
		switch {
		case v == "*":
			return authn(prefixMatcher("spiffe://")), nil
		case !strings.Contains(v, "*"):
			return authn(prefixMatcher("spiffe://" + v + "/")), nil
		}
		pre, post, _ := strings.Cut(v, "*")
		return authn(regexMatcher(fmt.Sprintf("spiffe://%s[^/]*%s/.*", regexp.QuoteMeta(pre), regexp.QuoteMeta(post)))), nil
	case "source.principal":
		return authn(wildcardMatcher(v, "spiffe://")), nil
	}
	if g.forTCP {
		return nil, errHTTPOnly
	}
	if name, ok := strings.CutPrefix(key, "request.headers["); ok && strings.HasSuffix(name, "]") {
		return &rbacpb.Principal{Identifier: &rbacpb.Principal_Header{Header: headerWildcard(strings.TrimSuffix(name, "]"), v, false)}}, nil
	}
	return nil, fmt.Errorf("unknown principal key %q", key)
}

// extended generates the keys that match all their values at once, in the
// request's dynamic metadata.
func (g condGen) extended(key string, vs []string) (*rbacpb.Principal, error) {
	if g.forTCP {
		return nil, errHTTPOnly
	}
	meta := func(path []string, v *matcher.ValueMatcher) *rbacpb.Principal {
		var segs []*matcher.MetadataMatcher_PathSegment
		for _, k := range path {
			segs = append(segs, &matcher.MetadataMatcher_PathSegment{Segment: &matcher.MetadataMatcher_PathSegment_Key{Key: k}})
		}
		return &rbacpb.Principal{Identifier: &rbacpb.Principal_Metadata{Metadata: &matcher.MetadataMatcher{Filter: authnMetadata, Path: segs, Value: v}}}
	}
	switch key {
	case "request.auth.principal":
		var or []*rbacpb.Principal
		for _, v := range vs {
			or = append(or, meta([]string{key}, stringValue(wildcardMatcher(v, ""))))
		}
		if len(or) == 1 {
			return or[0], nil
		}
		return &rbacpb.Principal{Identifier: &rbacpb.Principal_OrIds{OrIds: &rbacpb.Principal_Set{Ids: or}}}, nil
	case "request.auth.audiences":
		return meta([]string{key}, listValue(stringsValue(vs))), nil
	case "request.auth.presenter":
		return meta([]string{key}, stringsValue(vs)), nil
	}
	claims, err := claimPath(strings.TrimPrefix(key, "request.auth.claims"))
	if err != nil {
		return nil, err
	}
	// A claim is a string or a list of strings: match either.
	v := stringsValue(vs)
	return meta(append([]string{"request.auth.claims"}, claims...), &matcher.ValueMatcher{MatchPattern: &matcher.ValueMatcher_OrMatch{
		OrMatch: &matcher.OrMatcher{ValueMatchers: []*matcher.ValueMatcher{listValue(v), v}}}}), nil
}

// claimPath reads "[a][b]" as ["a", "b"] (one level: "[a.b]" is one name).
func claimPath(s string) ([]string, error) {
	var out []string
	for s != "" {
		if s[0] != '[' {
			return nil, fmt.Errorf("claim %q: want [NAME]", s)
		}
		end := strings.IndexByte(s, ']')
		if end < 2 {
			return nil, fmt.Errorf("claim %q: want [NAME]", s)
		}
		out = append(out, s[1:end])
		s = s[end+1:]
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no claim name")
	}
	return out, nil
}

func permAny() *rbacpb.Permission { return &rbacpb.Permission{Rule: &rbacpb.Permission_Any{Any: true}} }

func principalAny() *rbacpb.Principal {
	return &rbacpb.Principal{Identifier: &rbacpb.Principal_Any{Any: true}}
}

func cidrRange(v string) (*core.CidrRange, error) {
	if p, err := netip.ParsePrefix(v); err == nil {
		return &core.CidrRange{AddressPrefix: p.Addr().String(), PrefixLen: wrapperspb.UInt32(uint32(p.Bits()))}, nil
	}
	a, err := netip.ParseAddr(v)
	if err != nil {
		return nil, fmt.Errorf("%q is not an IP address or CIDR", v)
	}
	return &core.CidrRange{AddressPrefix: a.String(), PrefixLen: wrapperspb.UInt32(uint32(a.BitLen()))}, nil
}

func regexMatcher(re string) *matcher.StringMatcher {
	return &matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_SafeRegex{SafeRegex: &matcher.RegexMatcher{Regex: re}}}
}

func prefixMatcher(p string) *matcher.StringMatcher {
	return &matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_Prefix{Prefix: p}}
}

// wildcardMatcher is Istio's StringMatcherWithPrefix: "*" is any
// non-empty value, "*x" a suffix, "x*" a prefix, else exact; prefix is
// put in front of the value ("spiffe://" for principals).
func wildcardMatcher(v, prefix string) *matcher.StringMatcher {
	switch {
	case v == "*":
		return regexMatcher(".+")
	case strings.HasPrefix(v, "*"):
		if prefix == "" {
			return &matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_Suffix{Suffix: v[1:]}}
		}
		return regexMatcher(prefix + ".*" + regexp.QuoteMeta(v[1:]))
	case strings.HasSuffix(v, "*"):
		return prefixMatcher(prefix + strings.TrimSuffix(v, "*"))
	}
	return &matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_Exact{Exact: prefix + v}}
}

// headerWildcard is Istio's HeaderMatcher (HostMatcher when ignoreCase):
// "*" is presence, "*x" a suffix, "x*" a prefix, else exact.
func headerWildcard(name, v string, ignoreCase bool) *routepb.HeaderMatcher {
	var sm *matcher.StringMatcher
	switch {
	case v == "*":
		return &routepb.HeaderMatcher{Name: name, HeaderMatchSpecifier: &routepb.HeaderMatcher_PresentMatch{PresentMatch: true}}
	case strings.HasPrefix(v, "*"):
		sm = &matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_Suffix{Suffix: v[1:]}}
	case strings.HasSuffix(v, "*"):
		sm = prefixMatcher(v[:len(v)-1])
	default:
		sm = &matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_Exact{Exact: v}}
	}
	sm.IgnoreCase = ignoreCase
	return &routepb.HeaderMatcher{Name: name, HeaderMatchSpecifier: &routepb.HeaderMatcher_StringMatch{StringMatch: sm}}
}

func stringValue(sm *matcher.StringMatcher) *matcher.ValueMatcher {
	return &matcher.ValueMatcher{MatchPattern: &matcher.ValueMatcher_StringMatch{StringMatch: sm}}
}

// stringsValue matches any of vs (Istio's StringOrMatcher).
func stringsValue(vs []string) *matcher.ValueMatcher {
	if len(vs) == 1 {
		return stringValue(wildcardMatcher(vs[0], ""))
	}
	var or []*matcher.ValueMatcher
	for _, v := range vs {
		or = append(or, stringValue(wildcardMatcher(v, "")))
	}
	return &matcher.ValueMatcher{MatchPattern: &matcher.ValueMatcher_OrMatch{OrMatch: &matcher.OrMatcher{ValueMatchers: or}}}
}

func listValue(v *matcher.ValueMatcher) *matcher.ValueMatcher {
	return &matcher.ValueMatcher{MatchPattern: &matcher.ValueMatcher_ListMatch{ListMatch: &matcher.ListMatcher{
		MatchPattern: &matcher.ListMatcher_OneOf{OneOf: v}}}}
}

// inboundAuthorizationPolicies are the policies of the proxy's workload
// (its WorkloadEntry's namespace and labels; without one, the proxy's
// namespace and no labels).
func inboundAuthorizationPolicies(snap *mesh.Snapshot, proxy *proxypush.Proxy) mesh.AuthorizationPolicies {
	if proxy == nil {
		return mesh.AuthorizationPolicies{}
	}
	if w := snap.WorkloadByIP(proxyIP(proxy)); w != nil {
		return snap.AuthorizationPoliciesFor(w.Namespace, w.Labels)
	}
	return snap.AuthorizationPoliciesFor(proxy.Namespace, nil)
}
