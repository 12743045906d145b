package rbac

import (
	"fmt"
	"net/netip"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/straitmesh/strait/internal/proxy/route"
)

// A permission or principal is a compiled predicate on an Input, with the
// semantics of Envoy's source/extensions/filters/common/rbac/matchers.cc.
type (
	predicate  = func(*Input) bool
	permission = predicate
	principal  = predicate
)

// allOf holds when every one of subs holds (and_rules, and_ids).
func allOf(subs []predicate) predicate {
	return func(in *Input) bool {
		for _, s := range subs {
			if !s(in) {
				return false
			}
		}
		return true
	}
}

// anyOf holds when one of subs holds (or_rules, or_ids).
func anyOf(subs []predicate) predicate {
	return func(in *Input) bool {
		for _, s := range subs {
			if s(in) {
				return true
			}
		}
		return false
	}
}

// compileEach compiles the entries of a list field (FIELD.LIST[i]), which
// must not be empty.
func compileEach[T any](field, list string, items []T, compile func(string, T) (predicate, error)) ([]predicate, error) {
	if len(items) == 0 {
		return nil, fmt.Errorf("%s.%s must have at least one entry", field, list)
	}
	out := make([]predicate, 0, len(items))
	for i, it := range items {
		c, err := compile(fmt.Sprintf("%s.%s[%d]", field, list, i), it)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

func compilePermission(field string, p *rbacv3.Permission) (permission, error) {
	switch r := p.GetRule().(type) {
	case *rbacv3.Permission_Any:
		if !r.Any {
			return nil, fmt.Errorf("%s.any must be true", field)
		}
		return func(*Input) bool { return true }, nil
	case *rbacv3.Permission_AndRules:
		subs, err := compilePermissions(field+".and_rules", r.AndRules.GetRules())
		if err != nil {
			return nil, err
		}
		return allOf(subs), nil
	case *rbacv3.Permission_OrRules:
		subs, err := compilePermissions(field+".or_rules", r.OrRules.GetRules())
		if err != nil {
			return nil, err
		}
		return anyOf(subs), nil
	case *rbacv3.Permission_NotRule:
		sub, err := compilePermission(field+".not_rule", r.NotRule)
		if err != nil {
			return nil, err
		}
		return func(in *Input) bool { return !sub(in) }, nil
	case *rbacv3.Permission_Header:
		hm, err := route.CompileHeaderMatch(r.Header)
		if err != nil {
			return nil, fmt.Errorf("%s.header: %w", field, err)
		}
		return func(in *Input) bool { return in.Request != nil && hm.Matches(in.Request) }, nil
	case *rbacv3.Permission_UrlPath:
		m, err := compilePath(field+".url_path", r.UrlPath)
		if err != nil {
			return nil, err
		}
		return permission(m), nil
	case *rbacv3.Permission_UriTemplate:
		return compileURITemplatePermission(field+".uri_template", r.UriTemplate)
	case *rbacv3.Permission_DestinationIp:
		pfx, err := compileCIDR(field+".destination_ip", r.DestinationIp)
		if err != nil {
			return nil, err
		}
		return func(in *Input) bool { return pfx.Contains(in.Conn.Destination.Addr()) }, nil
	case *rbacv3.Permission_DestinationPort:
		port := r.DestinationPort
		if port > 65535 {
			return nil, fmt.Errorf("%s.destination_port %d is not a port (0 to 65535)", field, port)
		}
		return func(in *Input) bool { return uint32(in.Conn.Destination.Port()) == port }, nil
	case *rbacv3.Permission_DestinationPortRange:
		lo, hi := r.DestinationPortRange.GetStart(), r.DestinationPortRange.GetEnd()
		if lo > hi {
			return nil, fmt.Errorf("%s.destination_port_range: start %d is above end %d", field, lo, hi)
		}
		return func(in *Input) bool {
			p := int32(in.Conn.Destination.Port())
			return p >= lo && p < hi // end is exclusive, as Envoy's Int32Range
		}, nil
	case *rbacv3.Permission_Metadata:
		m, err := compileMetadata(field+".metadata", r.Metadata)
		if err != nil {
			return nil, err
		}
		return permission(m), nil
	case *rbacv3.Permission_RequestedServerName:
		f, err := route.CompileStringMatch(r.RequestedServerName)
		if err != nil {
			return nil, fmt.Errorf("%s.requested_server_name: %w", field, err)
		}
		return func(in *Input) bool { return f(in.Conn.SNI) }, nil
	default:
		return nil, fmt.Errorf("%s: rule %s is not supported (want any, header, url_path, uri_template, destination_ip, destination_port, destination_port_range, metadata, requested_server_name, and_rules, or_rules or not_rule)", field, oneofName(p.ProtoReflect(), "rule"))
	}
}

func compilePermissions(field string, ps []*rbacv3.Permission) ([]permission, error) {
	return compileEach(field, "rules", ps, compilePermission)
}

func compilePrincipal(field string, p *rbacv3.Principal) (principal, error) {
	switch id := p.GetIdentifier().(type) {
	case *rbacv3.Principal_Any:
		if !id.Any {
			return nil, fmt.Errorf("%s.any must be true", field)
		}
		return func(*Input) bool { return true }, nil
	case *rbacv3.Principal_AndIds:
		subs, err := compilePrincipals(field+".and_ids", id.AndIds.GetIds())
		if err != nil {
			return nil, err
		}
		return allOf(subs), nil
	case *rbacv3.Principal_OrIds:
		subs, err := compilePrincipals(field+".or_ids", id.OrIds.GetIds())
		if err != nil {
			return nil, err
		}
		return anyOf(subs), nil
	case *rbacv3.Principal_NotId:
		sub, err := compilePrincipal(field+".not_id", id.NotId)
		if err != nil {
			return nil, err
		}
		return func(in *Input) bool { return !sub(in) }, nil
	case *rbacv3.Principal_Authenticated_:
		return compileAuthenticated(field+".authenticated", id.Authenticated)
	case *rbacv3.Principal_SourceIp:
		pfx, err := compileCIDR(field+".source_ip", id.SourceIp)
		if err != nil {
			return nil, err
		}
		return func(in *Input) bool { return pfx.Contains(in.Conn.Source.Addr()) }, nil
	case *rbacv3.Principal_DirectRemoteIp:
		pfx, err := compileCIDR(field+".direct_remote_ip", id.DirectRemoteIp)
		if err != nil {
			return nil, err
		}
		return func(in *Input) bool { return pfx.Contains(in.Conn.Source.Addr()) }, nil
	case *rbacv3.Principal_RemoteIp:
		pfx, err := compileCIDR(field+".remote_ip", id.RemoteIp)
		if err != nil {
			return nil, err
		}
		return func(in *Input) bool { return pfx.Contains(in.remoteIP()) }, nil
	case *rbacv3.Principal_Header:
		hm, err := route.CompileHeaderMatch(id.Header)
		if err != nil {
			return nil, fmt.Errorf("%s.header: %w", field, err)
		}
		return func(in *Input) bool { return in.Request != nil && hm.Matches(in.Request) }, nil
	case *rbacv3.Principal_UrlPath:
		m, err := compilePath(field+".url_path", id.UrlPath)
		if err != nil {
			return nil, err
		}
		return principal(m), nil
	case *rbacv3.Principal_Metadata:
		m, err := compileMetadata(field+".metadata", id.Metadata)
		if err != nil {
			return nil, err
		}
		return principal(m), nil
	default:
		return nil, fmt.Errorf("%s: identifier %s is not supported (want any, authenticated, source_ip, direct_remote_ip, remote_ip, header, url_path, metadata, and_ids, or_ids or not_id)", field, oneofName(p.ProtoReflect(), "identifier"))
	}
}

func compilePrincipals(field string, ps []*rbacv3.Principal) ([]principal, error) {
	return compileEach(field, "ids", ps, compilePrincipal)
}

// compileAuthenticated follows Envoy's AuthenticatedMatcher: only a TLS
// connection is authenticated; without principal_name any such connection
// matches, else the name is matched against the peer certificate's URI
// SANs, then its DNS SANs, then its subject.
func compileAuthenticated(field string, a *rbacv3.Principal_Authenticated) (principal, error) {
	if a.GetPrincipalName() == nil {
		return func(in *Input) bool { return in.Conn.Secure }, nil
	}
	f, err := route.CompileStringMatch(a.GetPrincipalName())
	if err != nil {
		return nil, fmt.Errorf("%s.principal_name: %w", field, err)
	}
	return func(in *Input) bool {
		c := in.Conn
		if !c.Secure {
			return false
		}
		for _, s := range c.URISANs {
			if f(s) {
				return true
			}
		}
		for _, s := range c.DNSSANs {
			if f(s) {
				return true
			}
		}
		return f(c.Subject)
	}, nil
}

// compilePath matches the request path without its query (Envoy's
// PathMatcher); never for a connection.
func compilePath(field string, pm *matcherv3.PathMatcher) (func(*Input) bool, error) {
	sm := pm.GetPath()
	if sm == nil {
		return nil, fmt.Errorf("%s.path must be set", field)
	}
	f, err := route.CompileStringMatch(sm)
	if err != nil {
		return nil, fmt.Errorf("%s.path: %w", field, err)
	}
	return func(in *Input) bool { return in.Request != nil && f(in.Request.Path) }, nil
}

func compileCIDR(field string, c *corev3.CidrRange) (netip.Prefix, error) {
	ip, err := netip.ParseAddr(c.GetAddressPrefix())
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%s.address_prefix %q is not an IP address", field, c.GetAddressPrefix())
	}
	ip = ip.Unmap()
	bits := ip.BitLen()
	if pl := c.GetPrefixLen(); pl != nil {
		bits = int(pl.GetValue())
	}
	p, err := ip.Prefix(bits)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%s.prefix_len %d is out of range for %s", field, bits, ip)
	}
	return p, nil
}

// compileMetadata matches the request's dynamic metadata: the value at
// path under the filter's namespace (Envoy's MetadataMatcher). A missing
// value matches nothing, except when invert says otherwise.
func compileMetadata(field string, m *matcherv3.MetadataMatcher) (func(*Input) bool, error) {
	if m.GetFilter() == "" {
		return nil, fmt.Errorf("%s.filter must be set", field)
	}
	if len(m.GetPath()) == 0 {
		return nil, fmt.Errorf("%s.path must have at least one key", field)
	}
	keys := make([]string, 0, len(m.GetPath()))
	for i, s := range m.GetPath() {
		if s.GetKey() == "" {
			return nil, fmt.Errorf("%s.path[%d].key must be set", field, i)
		}
		keys = append(keys, s.GetKey())
	}
	if m.GetValue() == nil {
		return nil, fmt.Errorf("%s.value must be set", field)
	}
	vm, err := compileValue(field+".value", m.GetValue())
	if err != nil {
		return nil, err
	}
	filter, invert := m.GetFilter(), m.GetInvert()
	return func(in *Input) bool {
		if in.Metadata == nil {
			return invert // a missing value matches nothing
		}
		v, ok := in.Metadata.Get(filter, keys[0])
		for _, k := range keys[1:] {
			if !ok {
				break
			}
			var mv map[string]any
			if mv, ok = v.(map[string]any); ok {
				v, ok = mv[k]
			}
		}
		return (ok && vm(v)) != invert
	}, nil
}

// compileValue compiles a ValueMatcher for the Go values the filters put
// in Metadata: string, bool, float64, []string, []any and map[string]any.
func compileValue(field string, vm *matcherv3.ValueMatcher) (func(any) bool, error) {
	switch p := vm.GetMatchPattern().(type) {
	case *matcherv3.ValueMatcher_StringMatch:
		f, err := route.CompileStringMatch(p.StringMatch)
		if err != nil {
			return nil, fmt.Errorf("%s.string_match: %w", field, err)
		}
		return func(v any) bool {
			s, ok := v.(string)
			return ok && f(s)
		}, nil
	case *matcherv3.ValueMatcher_BoolMatch:
		b := p.BoolMatch
		return func(v any) bool {
			x, ok := v.(bool)
			return ok && x == b
		}, nil
	case *matcherv3.ValueMatcher_PresentMatch:
		want := p.PresentMatch
		return func(v any) bool { return (v != nil) == want }, nil
	case *matcherv3.ValueMatcher_ListMatch:
		one := p.ListMatch.GetOneOf()
		if one == nil {
			return nil, fmt.Errorf("%s.list_match.one_of must be set", field)
		}
		f, err := compileValue(field+".list_match.one_of", one)
		if err != nil {
			return nil, err
		}
		return func(v any) bool {
			switch l := v.(type) {
			case []string:
				for _, s := range l {
					if f(s) {
						return true
					}
				}
			case []any:
				for _, x := range l {
					if f(x) {
						return true
					}
				}
			}
			return false
		}, nil
	case *matcherv3.ValueMatcher_OrMatch:
		var subs []func(any) bool
		for i, s := range p.OrMatch.GetValueMatchers() {
			f, err := compileValue(fmt.Sprintf("%s.or_match.value_matchers[%d]", field, i), s)
			if err != nil {
				return nil, err
			}
			subs = append(subs, f)
		}
		if len(subs) < 2 {
			return nil, fmt.Errorf("%s.or_match.value_matchers must have at least two entries", field)
		}
		return func(v any) bool {
			for _, f := range subs {
				if f(v) {
					return true
				}
			}
			return false
		}, nil
	default:
		return nil, fmt.Errorf("%s: %s is not supported (want string_match, bool_match, present_match, list_match or or_match)", field, oneofName(vm.ProtoReflect(), "match_pattern"))
	}
}

// oneofName names the field set in a oneof, for messages.
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
