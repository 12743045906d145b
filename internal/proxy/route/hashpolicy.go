package route

import (
	"fmt"
	"math/bits"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/straitmesh/strait/internal/proxy/fieldaudit"
)

// HashPolicy is a route action's compiled hash_policy list: how a request
// is hashed for the RING_HASH and MAGLEV load balancers (Envoy's
// Router::HashPolicyImpl). Immutable.
type HashPolicy struct {
	policies []hashPolicy
}

type hashKind int

const (
	hashHeader hashKind = iota
	hashCookie
	hashSourceIP
	hashQuery
)

type hashPolicy struct {
	kind     hashKind
	name     string // header (canonical lookup name), cookie or query parameter
	terminal bool
	// Cookie only: a cookie is generated when absent and ttl is set.
	ttl    time.Duration
	hasTTL bool
	path   string
	attrs  string // "; name=value" for each attribute, in order
}

// HashInput is what hashing reads of a request.
type HashInput struct {
	Headers HeaderGetter
	// Query is the raw query string, with or without its leading '?'.
	Query string
	// Source and Local are the downstream connection's peer and local
	// addresses (they name the connection in generated cookies).
	Source, Local netip.AddrPort
	// Remote is the request's downstream remote address, which source_ip
	// hashes: the HCM's, from x-forwarded-for or the peer by its
	// use_remote_address and xff_num_trusted_hops, as Envoy's router
	// passes the stream's remote address. Zero: Source.
	Remote netip.AddrPort
}

// compileHashPolicy compiles route_action.hash_policy; nil when empty.
func compileHashPolicy(ps []*routev3.RouteAction_HashPolicy) (*HashPolicy, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	hp := &HashPolicy{}
	for i, p := range ps {
		field := fmt.Sprintf("route.hash_policy[%d]", i)
		if err := fieldaudit.Only(field, p.ProtoReflect(), hashPolicyFields); err != nil { // fields.go
			return nil, err
		}
		hc := hashPolicy{terminal: p.GetTerminal()}
		switch s := p.GetPolicySpecifier().(type) {
		case *routev3.RouteAction_HashPolicy_Header_:
			if err := fieldaudit.Only(field+".header", s.Header.ProtoReflect(), hashHeaderFields); err != nil {
				return nil, err
			}
			hc.kind, hc.name = hashHeader, strings.ToLower(s.Header.GetHeaderName())
		case *routev3.RouteAction_HashPolicy_Cookie_:
			if err := fieldaudit.Only(field+".cookie", s.Cookie.ProtoReflect(), hashCookieFields); err != nil {
				return nil, err
			}
			hc.kind, hc.name, hc.path = hashCookie, s.Cookie.GetName(), s.Cookie.GetPath()
			for j, a := range s.Cookie.GetAttributes() {
				if a.GetName() == "" || strings.ContainsAny(a.GetName()+a.GetValue(), ";\r\n") {
					return nil, fmt.Errorf("%s.cookie.attributes[%d]: name %q, value %q: want a name, and no ';' or line break", field, j, a.GetName(), a.GetValue())
				}
				hc.attrs += "; " + a.GetName()
				if a.GetValue() != "" {
					hc.attrs += "=" + a.GetValue()
				}
			}
			if s.Cookie.GetTtl() != nil {
				hc.ttl, hc.hasTTL = s.Cookie.GetTtl().AsDuration(), true
			}
		case *routev3.RouteAction_HashPolicy_ConnectionProperties_:
			if err := fieldaudit.Only(field+".connection_properties", s.ConnectionProperties.ProtoReflect(), hashConnectionPropertiesFields); err != nil {
				return nil, err
			}
			if !s.ConnectionProperties.GetSourceIp() {
				return nil, fmt.Errorf("%s.connection_properties: source_ip must be true", field)
			}
			hc.kind = hashSourceIP
		case *routev3.RouteAction_HashPolicy_QueryParameter_:
			if err := fieldaudit.Only(field+".query_parameter", s.QueryParameter.ProtoReflect(), hashQueryParameterFields); err != nil {
				return nil, err
			}
			hc.kind, hc.name = hashQuery, s.QueryParameter.GetName()
		default:
			return nil, fmt.Errorf("%s: %T is not supported by strait-proxy (want header, cookie, connection_properties or query_parameter)", field, s)
		}
		if hc.kind != hashSourceIP && hc.name == "" {
			return nil, fmt.Errorf("%s: the name is empty", field)
		}
		hp.policies = append(hp.policies, hc)
	}
	return hp, nil
}

// Hash computes the request's hash as Envoy does: each policy that yields
// a value is combined into the hash (rotate left by one, xor), and a
// terminal policy that yields one ends the list. ok is false when no policy
// yields a value (the load balancer then picks at random). setCookie, when
// not empty, is a Set-Cookie value the response must carry: a cookie
// policy with a ttl found no cookie and generated one, as Envoy's router
// does (Filter::addDownstreamSetCookie).
func (p *HashPolicy) Hash(in HashInput) (hash uint64, ok bool, setCookie string) {
	if p == nil {
		return 0, false, ""
	}
	for _, hc := range p.policies {
		v, found, cookie := hc.value(in)
		if !found {
			continue
		}
		if cookie != "" {
			setCookie = cookie
		}
		h := xxhash.Sum64String(v)
		if ok {
			hash = bits.RotateLeft64(hash, 1) ^ h
		} else {
			hash, ok = h, true
		}
		if hc.terminal {
			break
		}
	}
	return hash, ok, setCookie
}

func (hc *hashPolicy) value(in HashInput) (string, bool, string) {
	switch hc.kind {
	case hashHeader:
		if in.Headers == nil {
			return "", false, ""
		}
		v, ok := in.Headers.Lookup(hc.name)
		return v, ok, ""
	case hashSourceIP:
		src := in.Remote
		if !src.IsValid() {
			src = in.Source
		}
		if !src.IsValid() {
			return "", false, ""
		}
		return src.Addr().String(), true, ""
	case hashQuery:
		return queryParam(in.Query, hc.name)
	}
	// Cookie.
	if in.Headers != nil {
		if all, ok := in.Headers.Lookup("cookie"); ok {
			if v, ok := cookieValue(all, hc.name); ok {
				return v, true, ""
			}
		}
	}
	if !hc.hasTTL {
		return "", false, ""
	}
	// The value names the downstream connection, so that requests racing
	// on one connection get the same cookie (Envoy hashes the remote and
	// local addresses).
	v := fmt.Sprintf("%016x", xxhash.Sum64String(in.Source.String()+in.Local.String()))
	sc := hc.name + `="` + v + `"`
	if hc.ttl > 0 {
		sc += "; Max-Age=" + strconv.FormatInt(int64(hc.ttl/time.Second), 10)
	}
	if hc.path != "" {
		sc += "; Path=" + hc.path
	}
	sc += hc.attrs + "; HttpOnly"
	return v, true, sc
}

// cookieValue finds name in Cookie header values ("a=1; b=2", several
// headers joined with ","), unquoting a quoted value.
func cookieValue(all, name string) (string, bool) {
	for len(all) > 0 {
		var part string
		i := strings.IndexAny(all, ";,")
		if i < 0 {
			part, all = all, ""
		} else {
			part, all = all[:i], all[i+1:]
		}
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || k != name {
			continue
		}
		if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
			v = v[1 : len(v)-1]
		}
		return v, true
	}
	return "", false
}

// queryParam returns the first value of name in a raw query, as Envoy's
// QueryParameterHashMethod does (decoded, the empty value counts).
func queryParam(q, name string) (string, bool, string) {
	q = strings.TrimPrefix(q, "?")
	for len(q) > 0 {
		var kv string
		kv, q, _ = strings.Cut(q, "&")
		k, v, _ := strings.Cut(kv, "=")
		if k != name {
			if uk, err := url.QueryUnescape(k); err != nil || uk != name {
				continue
			}
		}
		if uv, err := url.QueryUnescape(v); err == nil {
			v = uv
		}
		return v, true, ""
	}
	return "", false, ""
}
