// Package route compiles an Envoy RouteConfiguration into an immutable
// table and matches HTTP requests against it: virtual host by Host header,
// then the first matching route.
package route

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"time"

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
	Name  string
	match *routeMatch

	// Timeout is the route action's timeout: from the request being sent
	// upstream until the response is complete (504 UT when it expires). 0
	// means none. Envoy's default is 15 s; Istio sends 0s.
	Timeout time.Duration
	// IdleTimeout, when HasIdleTimeout, replaces the HCM's
	// stream_idle_timeout for this route (0 disables it).
	IdleTimeout    time.Duration
	HasIdleTimeout bool

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
	cr := &Route{Name: r.GetName()}
	match, err := compileMatch(r.GetMatch())
	if err != nil {
		return nil, err
	}
	cr.match = match
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
	for _, r := range vh.Routes {
		if r.match.matches(req) {
			return r
		}
	}
	return nil
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
