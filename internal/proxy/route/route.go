// Package route compiles an Envoy RouteConfiguration into an immutable
// table and matches HTTP requests against it: virtual host by Host header,
// then the first matching route.
package route

import (
	"fmt"
	"net/http"
	"sort"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
)

// Table is a compiled RouteConfiguration. It is immutable and safe for
// concurrent use.
type Table struct {
	Name     string
	exact    map[string]*VirtualHost
	suffixes []wildcard // "*.example.com", longest first
	prefixes []wildcard // "example.*", longest first
	any      *VirtualHost
	// ignorePort drops the Host header's port before the virtual host
	// lookup (ignore_port_in_host_matching).
	ignorePort bool
}

type wildcard struct {
	part string // the domain without the '*'
	vh   *VirtualHost
}

// VirtualHost is a compiled virtual host.
type VirtualHost struct {
	Name   string
	Routes []*Route
	// index finds the first matching route among many (pathindex.go);
	// nil: Routes are tested in turn.
	index *pathIndex
}

// Route is one compiled route.
type Route struct {
	Name  string
	match *routeMatch

	// Action is what the route does (action.go).
	Action

	// Filters are the route's per-filter config and mirrors
	// (filters.go); nil when it has none.
	Filters *Filters

	// Decorator is the route's decorator.operation, the name of the
	// HCM's span for it (tracing); DecoratorPropagate its propagate
	// (default true): an egress span's name goes upstream in
	// x-envoy-decorator-operation.
	Decorator          string
	DecoratorPropagate bool
}

// Compile builds a Table. It rejects what it cannot honour, so that an
// unsupported config is NACKed instead of routed wrongly. It takes no
// typed_per_filter_config (CompileWith does).
func Compile(rc *routev3.RouteConfiguration) (*Table, error) {
	return CompileWith(rc, nil)
}

// CompileWith is Compile with the filters' per-route config parsers:
// typed_per_filter_config is compiled here, once, for the request path to
// read (Filters.PerFilter).
func CompileWith(rc *routev3.RouteConfiguration, parsers PerFilterParsers) (*Table, error) {
	if err := checkRouteConfiguration(rc); err != nil {
		return nil, fmt.Errorf("route_config %q: %w", rc.GetName(), err)
	}
	t := &Table{Name: rc.GetName(), exact: map[string]*VirtualHost{}, ignorePort: rc.GetIgnorePortInHostMatching()}
	maxBody := defaultMaxDirectResponseBody
	if v := rc.GetMaxDirectResponseBodySizeBytes(); v != nil {
		maxBody = int(v.GetValue())
	}
	for _, vh := range rc.GetVirtualHosts() {
		cvh := &VirtualHost{Name: vh.GetName()}
		if err := checkVirtualHost(vh); err != nil {
			return nil, fmt.Errorf("route_config %q virtual_host %q: %w", rc.GetName(), vh.GetName(), err)
		}
		vhf, err := compileVirtualHostFilters(vh, parsers)
		if err != nil {
			return nil, fmt.Errorf("route_config %q: %w", rc.GetName(), err)
		}
		for i, r := range vh.GetRoutes() {
			cr, err := compileRoute(r)
			if err == nil {
				cr.Filters, err = compileFilters(r, vhf, parsers) // filters.go
			}
			if err == nil && cr.Direct != nil && len(cr.Direct.Body) > maxBody {
				err = fmt.Errorf("direct_response.body is %d bytes, more than the route configuration's max_direct_response_body_size_bytes (%d; raise it or shorten the body)", len(cr.Direct.Body), maxBody)
			}
			if err != nil {
				return nil, fmt.Errorf("route_config %q virtual_host %q route %d: %w", rc.GetName(), vh.GetName(), i, err)
			}
			cr.IncludeAttemptCount = vh.GetIncludeRequestAttemptCount()
			cvh.Routes = append(cvh.Routes, cr)
		}
		cvh.index = buildPathIndex(cvh.Routes)
		for _, d := range vh.GetDomains() {
			d = strings.ToLower(d)
			dup := false
			switch {
			case d == "*":
				dup = t.any != nil
				t.any = cvh
			case strings.HasPrefix(d, "*"):
				dup = hasWildcard(t.suffixes, d[1:])
				t.suffixes = append(t.suffixes, wildcard{part: d[1:], vh: cvh})
			case strings.HasSuffix(d, "*"):
				dup = hasWildcard(t.prefixes, d[:len(d)-1])
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

// hasWildcard reports whether ws already holds part: Envoy's RouteMatcher
// refuses a repeated wildcard domain as it refuses a repeated exact one.
func hasWildcard(ws []wildcard, part string) bool {
	for _, w := range ws {
		if w.part == part {
			return true
		}
	}
	return false
}

func compileRoute(r *routev3.Route) (*Route, error) {
	cr := &Route{Name: r.GetName(), Decorator: r.GetDecorator().GetOperation(), DecoratorPropagate: true}
	if p := r.GetDecorator().GetPropagate(); p != nil {
		cr.DecoratorPropagate = p.GetValue()
	}
	match, err := compileMatch(r.GetMatch())
	if err != nil {
		return nil, err
	}
	cr.match = match
	if err := cr.compileAction(r); err != nil {
		return nil, err
	}
	return cr, nil
}

// VirtualHostFor selects the virtual host for a Host header: exact domain,
// then the longest "*.suffix", then the longest "prefix*", then "*". When
// the host carries a port and nothing but "*" matches it, the host without
// the port is tried too. With ignore_port_in_host_matching the port is
// dropped first, as Envoy's RouteMatcher::findVirtualHost does.
func (t *Table) VirtualHostFor(host string) *VirtualHost {
	host = strings.ToLower(host)
	if t.ignorePort {
		host, _ = stripPort(host)
	}
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

// Match returns the first route of the selected virtual host matching a
// request with this host, path (without the query string) and headers, and
// no method, scheme or query; Route is the complete form.
func (t *Table) Match(host, path string, h http.Header) *Route {
	return t.Route(&Request{Host: host, Path: path, Headers: httpHeader(h)})
}

// MatchHeaders is Match for any header representation.
func (t *Table) MatchHeaders(host, path string, h HeaderGetter) *Route {
	return t.Route(&Request{Host: host, Path: path, Headers: h})
}

// Route returns the first route of the virtual host selected by req.Host
// whose match the request satisfies, or nil.
func (t *Table) Route(req *Request) *Route {
	vh := t.VirtualHostFor(req.Host)
	if vh == nil {
		return nil
	}
	if vh.index != nil {
		return vh.index.first(vh.Routes, req)
	}
	return firstMatch(vh.Routes, req)
}

// firstMatch returns the first of routes that req matches, or nil.
func firstMatch(routes []*Route, req *Request) *Route {
	for _, r := range routes {
		if r.match.matches(req) {
			return r
		}
	}
	return nil
}
