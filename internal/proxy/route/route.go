// Package route compiles an Envoy RouteConfiguration into an immutable
// table and matches HTTP requests against it: virtual host by Host header,
// then the first matching route.
package route

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
)

// Table is a compiled RouteConfiguration. It is immutable and safe for
// concurrent use.
type Table struct {
	Name     string
	exact    map[string]*VirtualHost
	suffixes []wildcard // "*.example.com", longest first
	prefixes []wildcard // "example.*", longest first
	any      *VirtualHost
}

type wildcard struct {
	part string // the domain without the '*'
	vh   *VirtualHost
}

// VirtualHost is a compiled virtual host.
type VirtualHost struct {
	Name   string
	Routes []*Route
}

// Route is one compiled route.
type Route struct {
	Name          string
	prefix        string
	path          string
	regex         *regexp.Regexp
	caseSensitive bool
	headers       []headerMatcher

	// Timeout is the route action's timeout: from the request being sent
	// upstream until the response is complete (504 UT when it expires). 0
	// means none. Envoy's default is 15 s; Istio sends 0s.
	Timeout time.Duration
	// IdleTimeout, when HasIdleTimeout, replaces the HCM's
	// stream_idle_timeout for this route (0 disables it).
	IdleTimeout    time.Duration
	HasIdleTimeout bool

	// Hash is the route action's hash_policy (nil: none), for the
	// RING_HASH and MAGLEV load balancers.
	Hash *HashPolicy

	// Action: exactly one of Cluster, weighted or Direct is set.
	Cluster  string
	weighted []WeightedCluster
	total    uint32
	Direct   *DirectResponse
}

// WeightedCluster is one target of route.weighted_clusters.
type WeightedCluster struct {
	Name   string
	Weight uint32
}

// DirectResponse is a route's direct_response action.
type DirectResponse struct {
	Status int
	Body   string
}

type headerMatcher struct {
	name    string
	present bool // present_match
	str     func(string) bool
	invert  bool
}

// defaultTimeout is Envoy's default route timeout.
const defaultTimeout = 15 * time.Second

// Compile builds a Table. It rejects what it cannot honour, so that an
// unsupported config is NACKed instead of routed wrongly.
func Compile(rc *routev3.RouteConfiguration) (*Table, error) {
	t := &Table{Name: rc.GetName(), exact: map[string]*VirtualHost{}}
	for _, vh := range rc.GetVirtualHosts() {
		cvh := &VirtualHost{Name: vh.GetName()}
		for i, r := range vh.GetRoutes() {
			cr, err := compileRoute(r)
			if err != nil {
				return nil, fmt.Errorf("route_config %q virtual_host %q route %d: %w", rc.GetName(), vh.GetName(), i, err)
			}
			cvh.Routes = append(cvh.Routes, cr)
		}
		for _, d := range vh.GetDomains() {
			d = strings.ToLower(d)
			dup := false
			switch {
			case d == "*":
				dup = t.any != nil
				t.any = cvh
			case strings.HasPrefix(d, "*"):
				t.suffixes = append(t.suffixes, wildcard{part: d[1:], vh: cvh})
			case strings.HasSuffix(d, "*"):
				t.prefixes = append(t.prefixes, wildcard{part: d[:len(d)-1], vh: cvh})
			default:
				_, dup = t.exact[d]
				t.exact[d] = cvh
			}
			if dup {
				return nil, fmt.Errorf("route_config %q: domain %q appears in more than one virtual host", rc.GetName(), d)
			}
		}
	}
	longestFirst := func(w []wildcard) {
		sort.SliceStable(w, func(i, j int) bool { return len(w[i].part) > len(w[j].part) })
	}
	longestFirst(t.suffixes)
	longestFirst(t.prefixes)
	return t, nil
}

func compileRoute(r *routev3.Route) (*Route, error) {
	m := r.GetMatch()
	cr := &Route{Name: r.GetName(), caseSensitive: true}
	if cs := m.GetCaseSensitive(); cs != nil {
		cr.caseSensitive = cs.GetValue()
	}
	switch ps := m.GetPathSpecifier().(type) {
	case *routev3.RouteMatch_Prefix:
		cr.prefix = ps.Prefix
	case *routev3.RouteMatch_Path:
		cr.path = ps.Path
		if cr.path == "" {
			return nil, fmt.Errorf("match.path is empty")
		}
	case *routev3.RouteMatch_SafeRegex:
		re, err := regexp.Compile("^(?:" + ps.SafeRegex.GetRegex() + ")$")
		if err != nil {
			return nil, fmt.Errorf("match.safe_regex: %w", err)
		}
		cr.regex = re
	default:
		return nil, fmt.Errorf("match path specifier %T is not supported (want prefix, path or safe_regex)", ps)
	}
	if !cr.caseSensitive {
		cr.prefix, cr.path = strings.ToLower(cr.prefix), strings.ToLower(cr.path)
	}
	if len(m.GetQueryParameters()) > 0 || m.GetGrpc() != nil || m.GetTlsContext() != nil ||
		len(m.GetDynamicMetadata()) > 0 || m.GetRuntimeFraction() != nil || m.GetFilterState() != nil {
		return nil, fmt.Errorf("match: only path/prefix/safe_regex and headers are supported")
	}
	for _, h := range m.GetHeaders() {
		hm, err := compileHeader(h)
		if err != nil {
			return nil, fmt.Errorf("header matcher %q: %w", h.GetName(), err)
		}
		cr.headers = append(cr.headers, hm)
	}
	switch a := r.GetAction().(type) {
	case *routev3.Route_Route:
		cr.Timeout = defaultTimeout
		if d := a.Route.GetTimeout(); d != nil {
			if err := d.CheckValid(); err != nil || d.AsDuration() < 0 {
				return nil, fmt.Errorf("route.timeout %v is not a valid duration", d)
			}
			cr.Timeout = d.AsDuration()
		}
		if d := a.Route.GetIdleTimeout(); d != nil {
			if err := d.CheckValid(); err != nil || d.AsDuration() < 0 {
				return nil, fmt.Errorf("route.idle_timeout %v is not a valid duration", d)
			}
			cr.IdleTimeout, cr.HasIdleTimeout = d.AsDuration(), true
		}
		hp, err := compileHashPolicy(a.Route.GetHashPolicy())
		if err != nil {
			return nil, err
		}
		cr.Hash = hp
		switch cs := a.Route.GetClusterSpecifier().(type) {
		case *routev3.RouteAction_Cluster:
			cr.Cluster = cs.Cluster
		case *routev3.RouteAction_WeightedClusters:
			for _, wc := range cs.WeightedClusters.GetClusters() {
				w := wc.GetWeight().GetValue()
				if wc.GetName() == "" {
					return nil, fmt.Errorf("weighted_clusters: only named clusters are supported")
				}
				if w == 0 {
					continue
				}
				cr.weighted = append(cr.weighted, WeightedCluster{Name: wc.GetName(), Weight: w})
				cr.total += w
			}
			if cr.total == 0 {
				return nil, fmt.Errorf("weighted_clusters: total weight is 0")
			}
		default:
			return nil, fmt.Errorf("route action cluster specifier %T is not supported (want cluster or weighted_clusters)", cs)
		}
	case *routev3.Route_DirectResponse:
		cr.Direct = &DirectResponse{Status: int(a.DirectResponse.GetStatus()), Body: a.DirectResponse.GetBody().GetInlineString()}
	default:
		return nil, fmt.Errorf("route action %T is not supported (want route or direct_response)", a)
	}
	return cr, nil
}

func compileHeader(h *routev3.HeaderMatcher) (headerMatcher, error) {
	hm := headerMatcher{name: http.CanonicalHeaderKey(h.GetName()), invert: h.GetInvertMatch()}
	switch s := h.GetHeaderMatchSpecifier().(type) {
	case *routev3.HeaderMatcher_PresentMatch:
		hm.present = true
		if !s.PresentMatch {
			hm.invert = !hm.invert
		}
	case *routev3.HeaderMatcher_ExactMatch:
		v := s.ExactMatch
		hm.str = func(x string) bool { return x == v }
	case *routev3.HeaderMatcher_PrefixMatch:
		v := s.PrefixMatch
		hm.str = func(x string) bool { return strings.HasPrefix(x, v) }
	case *routev3.HeaderMatcher_SuffixMatch:
		v := s.SuffixMatch
		hm.str = func(x string) bool { return strings.HasSuffix(x, v) }
	case *routev3.HeaderMatcher_StringMatch:
		f, err := compileStringMatch(s.StringMatch)
		if err != nil {
			return hm, err
		}
		hm.str = f
	case nil:
		hm.present = true
	default:
		return hm, fmt.Errorf("%T is not supported (want string_match or present_match)", s)
	}
	return hm, nil
}

func compileStringMatch(sm *matcherv3.StringMatcher) (func(string) bool, error) {
	fold := sm.GetIgnoreCase()
	norm := func(s string) string {
		if fold {
			return strings.ToLower(s)
		}
		return s
	}
	switch p := sm.GetMatchPattern().(type) {
	case *matcherv3.StringMatcher_Exact:
		v := norm(p.Exact)
		return func(x string) bool { return norm(x) == v }, nil
	case *matcherv3.StringMatcher_Prefix:
		v := norm(p.Prefix)
		return func(x string) bool { return strings.HasPrefix(norm(x), v) }, nil
	case *matcherv3.StringMatcher_Suffix:
		v := norm(p.Suffix)
		return func(x string) bool { return strings.HasSuffix(norm(x), v) }, nil
	case *matcherv3.StringMatcher_Contains:
		v := norm(p.Contains)
		return func(x string) bool { return strings.Contains(norm(x), v) }, nil
	case *matcherv3.StringMatcher_SafeRegex:
		re, err := regexp.Compile("^(?:" + p.SafeRegex.GetRegex() + ")$")
		if err != nil {
			return nil, err
		}
		return re.MatchString, nil
	default:
		return nil, fmt.Errorf("string_match %T is not supported", p)
	}
}

// VirtualHostFor selects the virtual host for a Host header: exact domain,
// then the longest "*.suffix", then the longest "prefix*", then "*". When
// the host carries a port and nothing but "*" matches it, the host without
// the port is tried too.
func (t *Table) VirtualHostFor(host string) *VirtualHost {
	host = strings.ToLower(host)
	if vh := t.lookup(host); vh != nil {
		return vh
	}
	if h, ok := stripPort(host); ok {
		if vh := t.lookup(h); vh != nil {
			return vh
		}
	}
	return t.any
}

func (t *Table) lookup(host string) *VirtualHost {
	if vh, ok := t.exact[host]; ok {
		return vh
	}
	for _, w := range t.suffixes {
		if len(host) > len(w.part) && strings.HasSuffix(host, w.part) {
			return w.vh
		}
	}
	for _, w := range t.prefixes {
		if len(host) > len(w.part) && strings.HasPrefix(host, w.part) {
			return w.vh
		}
	}
	return nil
}

func stripPort(host string) (string, bool) {
	i := strings.LastIndexByte(host, ':')
	if i < 0 || strings.HasSuffix(host, "]") {
		return host, false
	}
	return host[:i], true
}

// HeaderGetter gives route matching a request's header values without
// tying it to one representation (net/http's map, or the codec's slice).
type HeaderGetter interface {
	// Lookup returns the values of the (case-insensitive) field name joined
	// with ",", and whether it is present. The result is used only during
	// the match, so it may alias a buffer.
	Lookup(name string) (string, bool)
}

// httpHeader adapts http.Header.
type httpHeader http.Header

func (h httpHeader) Lookup(name string) (string, bool) {
	vals, ok := h[name]
	if !ok {
		vals, ok = h[http.CanonicalHeaderKey(name)]
	}
	if !ok {
		return "", false
	}
	if len(vals) == 1 {
		return vals[0], true
	}
	return strings.Join(vals, ","), true
}

// Match returns the first route of the selected virtual host matching the
// request, or nil. path is the request path without the query string.
func (t *Table) Match(host, path string, h http.Header) *Route {
	return t.MatchHeaders(host, path, httpHeader(h))
}

// MatchHeaders is Match for any header representation.
func (t *Table) MatchHeaders(host, path string, h HeaderGetter) *Route {
	vh := t.VirtualHostFor(host)
	if vh == nil {
		return nil
	}
	for _, r := range vh.Routes {
		if r.matches(path, h) {
			return r
		}
	}
	return nil
}

func (r *Route) matches(path string, h HeaderGetter) bool {
	p := path
	if !r.caseSensitive {
		p = strings.ToLower(p)
	}
	switch {
	case r.regex != nil:
		if !r.regex.MatchString(p) {
			return false
		}
	case r.path != "":
		if p != r.path {
			return false
		}
	default:
		if !strings.HasPrefix(p, r.prefix) {
			return false
		}
	}
	for _, hm := range r.headers {
		val, ok := h.Lookup(hm.name)
		var m bool
		if hm.present {
			m = ok
		} else if ok {
			m = hm.str(val)
		}
		if m == hm.invert {
			return false
		}
	}
	return true
}

// PickCluster returns the target cluster, choosing among weighted clusters
// at random in proportion to their weights.
func (r *Route) PickCluster() string {
	if r.weighted == nil {
		return r.Cluster
	}
	n := rand.Uint32N(r.total)
	for _, wc := range r.weighted {
		if n < wc.Weight {
			return wc.Name
		}
		n -= wc.Weight
	}
	return r.weighted[len(r.weighted)-1].Name
}
