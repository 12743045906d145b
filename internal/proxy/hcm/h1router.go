package hcm

// This file is the HTTP/1.1 path's side of the router decisions (package
// router): the x-envoy-* request headers, header mutations and rewrites on
// the codec's header slices, redirects and direct responses, and the wait
// and host choice between retries.

import (
	"strconv"

	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/forward"
	"github.com/straitmesh/strait/internal/proxy/http1"
	"github.com/straitmesh/strait/internal/proxy/route"
	"github.com/straitmesh/strait/internal/proxy/router"
)

// h1Headers edits a parsed head's fields in place for router.HeaderOps: a
// removed field is marked Hop (not forwarded), an added one goes to extra,
// written after the others.
type h1Headers struct {
	hs    http1.Headers
	extra *[]http1.Header
}

func (e h1Headers) Has(name string) bool {
	for i := range e.hs {
		if !e.hs[i].Hop && http1.EqualFold(e.hs[i].Name, name) {
			return true
		}
	}
	for _, h := range *e.extra {
		if http1.EqualFold(h.Name, name) {
			return true
		}
	}
	return false
}

func (e h1Headers) Del(name string) {
	for i := range e.hs {
		if http1.EqualFold(e.hs[i].Name, name) {
			e.hs[i].Hop = true
		}
	}
	x := (*e.extra)[:0]
	for _, h := range *e.extra {
		if !http1.EqualFold(h.Name, name) {
			x = append(x, h)
		}
	}
	*e.extra = x
}

func (e h1Headers) Add(name, value string) {
	*e.extra = append(*e.extra, http1.Header{Name: []byte(name), Value: []byte(value)})
}

var _ router.HeaderEditor = h1Headers{}

// routerOverrides reads the router's x-envoy-* request headers and marks
// them not to be forwarded, as Envoy removes them; so is a client's
// x-envoy-attempt-count when the proxy sets its own (attemptCount).
func (c *h1conn) routerOverrides(attemptCount bool) (router.Overrides, bool) {
	var o router.Overrides
	found := false
	hs := c.req.Headers
	for i := range hs {
		h := &hs[i]
		if len(h.Name) < 16 || (h.Name[0] != 'x' && h.Name[0] != 'X') || !http1.EqualFold(h.Name[:8], "x-envoy-") {
			continue
		}
		name := http1.UnsafeString(h.Name)
		if router.IsRouterHeader(name) {
			o.Set(name, string(h.Value))
			h.Hop = true
			found = true
		} else if attemptCount && http1.EqualFold(h.Name, router.HeaderAttemptCount) {
			h.Hop = true
		}
	}
	return o, found
}

var attemptCountField = []byte(router.HeaderAttemptCount + ": ")

// setAttemptCount rewrites the x-envoy-attempt-count value w[at:end] to n,
// returning the head and the value's new end.
func setAttemptCount(w []byte, at, end, n int) ([]byte, int) {
	v := strconv.AppendInt(nil, int64(n), 10)
	if len(v) == end-at {
		copy(w[at:end], v)
		return w, end
	}
	out := make([]byte, 0, len(w)+len(v))
	out = append(out, w[:at]...)
	out = append(out, v...)
	out = append(out, w[end:]...)
	return out, at + len(v)
}

// mutateRequest applies the route's rewrites and request header mutations
// for target t to the request about to be written (appendRequestHead
// writes what they leave in c.reqExtra, c.hostOverride and
// c.pathOverride).
func (c *h1conn) mutateRequest(rt *route.Route, t *route.WeightedCluster) {
	req := &c.req
	if rt.Rewrite != nil {
		p := http1.UnsafeString(req.Path)
		c.pathOverride = []byte(rt.Rewrite.Apply(p, rt.MatchedLen(p)))
	}
	if h := rt.RequestHostRewrite(t); h != "" {
		c.hostOverride = []byte(h)
	}
	e := h1Headers{hs: req.Headers, extra: &c.reqExtra}
	t.RequestHeaders.Apply(e)
	rt.RequestHeaders.Apply(e)
}

// mutateResponse applies the response header mutations to c.resp.
func (c *h1conn) mutateResponse(rt *route.Route, t *route.WeightedCluster) {
	if t.ResponseHeaders.Empty() && rt.ResponseHeaders.Empty() {
		return
	}
	e := h1Headers{hs: c.resp.Headers, extra: &c.respExtra}
	t.ResponseHeaders.Apply(e)
	rt.ResponseHeaders.Apply(e)
}

// resetRouterState forgets the previous request's mutations.
func (c *h1conn) resetRouterState() {
	c.reqExtra = c.reqExtra[:0]
	c.respExtra = c.respExtra[:0]
	c.hostOverride, c.pathOverride = nil, nil
}

// redirectReply answers with the route's redirect.
func (c *h1conn) redirectReply(rt *route.Route) bool {
	req := &c.req
	scheme := c.forwardedProto()
	path := http1.UnsafeString(req.Path)
	loc := rt.Redirect.Location(scheme, string(req.Host), path, string(req.Query), rt.MatchedLen(path))
	c.respExtra = append(c.respExtra[:0], http1.Header{Name: []byte("location"), Value: []byte(loc)})
	c.applyLocalResponseHeaders(rt)
	return c.localReply(rt.Redirect.Code, "", "")
}

// directReply answers with the route's direct_response.
func (c *h1conn) directReply(rt *route.Route) bool {
	c.respExtra = c.respExtra[:0]
	c.applyLocalResponseHeaders(rt)
	return c.localReply(rt.Direct.Status, "", rt.Direct.Body)
}

// applyLocalResponseHeaders applies the route's response header mutations
// to a reply the proxy makes (its fields are only c.respExtra).
func (c *h1conn) applyLocalResponseHeaders(rt *route.Route) {
	if rt.ResponseHeaders.Empty() {
		return
	}
	rt.ResponseHeaders.Apply(h1Headers{extra: &c.respExtra})
}

// retryEndpoint counts a retry and chooses its endpoint.
func (c *h1conn) retryEndpoint(cl *cluster.Cluster, r *router.Retry, tried []string, prev cluster.Endpoint) cluster.Endpoint {
	cl.Stats.Router.Retry.Add(1)
	return forward.Repick(cl, r, c.dst, c.src, tried, prev)
}

// grpcStatusOf returns a response's grpc-status, -1 when absent.
func grpcStatusOf(v []byte, ok bool) int {
	if !ok {
		return -1
	}
	n, err := strconv.Atoi(string(v))
	if err != nil {
		return -1
	}
	return n
}
