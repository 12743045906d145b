package route

import "slices"

// pathIndex finds a virtual host's first matching route without testing
// every route's path in turn. A route whose path specifier is a
// case-sensitive prefix, path or path_separated_prefix can only match a
// path that starts with that string (its literal); the index keeps the
// routes by literal, so a request looks up each prefix of its path whose
// length some literal has and tests only the routes found there (plus the
// routes without a literal: safe_regex and case-insensitive ones), in
// their configuration order, with the route's whole match. The answer is
// the linear scan's (Envoy's RouteMatcher: the first route that matches),
// only the routes that cannot match are skipped.
//
// An ingress gateway with a route per service prefix (/r0/ … /r99/) tests
// one or two routes per request instead of half of them on average.
//
// Immutable once built; safe for concurrent use.
type pathIndex struct {
	// byLiteral: the indexes (into VirtualHost.Routes, ascending) of the
	// routes with this literal.
	byLiteral map[string][]int32
	// lengths: the literals' distinct lengths, ascending.
	lengths []int
	// any: the routes without a literal, ascending; candidates for every
	// path.
	any []int32
}

// Index only where it pays: a lookup costs about as much as testing a few
// routes' paths, and the candidate lists are merged on the stack.
const (
	maxIndexLengths = 16 // distinct literal lengths
	minIndexRoutes  = 8
)

// buildPathIndex returns the index of routes, or nil when the linear scan
// is as cheap (few routes, or literals of many different lengths).
func buildPathIndex(routes []*Route) *pathIndex {
	if len(routes) < minIndexRoutes {
		return nil
	}
	ix := &pathIndex{byLiteral: map[string][]int32{}}
	for i, r := range routes {
		lit, ok := r.match.literal()
		if !ok {
			ix.any = append(ix.any, int32(i))
			continue
		}
		if _, seen := ix.byLiteral[lit]; !seen && !slices.Contains(ix.lengths, len(lit)) {
			ix.lengths = append(ix.lengths, len(lit))
		}
		ix.byLiteral[lit] = append(ix.byLiteral[lit], int32(i))
	}
	if len(ix.lengths) > maxIndexLengths || len(ix.lengths)*4 > len(routes) {
		return nil
	}
	slices.Sort(ix.lengths)
	return ix
}

// literal is the string every path this match accepts starts with, when
// the path specifier has one that a byte comparison decides: not for
// safe_regex, nor for a case-insensitive match (the path is lowered
// first).
func (m *routeMatch) literal() (string, bool) {
	if m.regex != nil || !m.caseSensitive {
		return "", false
	}
	switch {
	case m.hasSepPrefix:
		return m.sepPrefix, true // "/p" matches "/p" and "/p/..."; "/" matches "/..."
	case m.path != "":
		return m.path, true
	default:
		return m.prefix, true
	}
}

// first returns the first of routes (whose index ix is) that req matches,
// or nil.
func (ix *pathIndex) first(routes []*Route, req *Request) *Route {
	// The candidate lists: at most one per literal length, and any.
	var lists [maxIndexLengths + 1][]int32
	n := 0
	if len(ix.any) > 0 {
		lists[n] = ix.any
		n++
	}
	path := req.Path
	for _, l := range ix.lengths {
		if l > len(path) {
			break
		}
		if rs, ok := ix.byLiteral[path[:l]]; ok {
			lists[n] = rs
			n++
		}
	}
	// Merge them in route order, testing each candidate once.
	for n > 0 {
		m := 0
		for i := 1; i < n; i++ {
			if lists[i][0] < lists[m][0] {
				m = i
			}
		}
		r := routes[lists[m][0]]
		if r.match.matches(req) {
			return r
		}
		lists[m] = lists[m][1:]
		if len(lists[m]) == 0 {
			n--
			lists[m] = lists[n]
		}
	}
	return nil
}
