package hcm

// This file is the HTTP/1.1 path's side of the router decisions (package
// router): the x-envoy-* request headers, request header mutations and
// rewrites on the codec's header slices (h1.HeaderEditor), redirects and
// direct responses. The exchange that carries them out is package
// forward/h1's.

import (
	"github.com/straitmesh/strait/internal/proxy/forward/h1"
	"github.com/straitmesh/strait/internal/proxy/http1"
	"github.com/straitmesh/strait/internal/proxy/route"
	"github.com/straitmesh/strait/internal/proxy/router"
)

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

// mutateRequest applies the route's rewrites and request header mutations
// for target t to the request about to be written (the exchange, package
// forward/h1, writes what they leave in c.x.ReqExtra, c.x.HostOverride and
// c.x.PathOverride).
func (c *h1conn) mutateRequest(rt *route.Route, t *route.WeightedCluster) {
	req := &c.req
	if rt.Rewrite != nil {
		p := http1.UnsafeString(req.Path)
		c.x.PathOverride = []byte(rt.Rewrite.Apply(p, rt.MatchedLen(p)))
	}
	if h := rt.RequestHostRewrite(t); h != "" {
		c.x.HostOverride = []byte(h)
	}
	e := h1.HeaderEditor{HS: req.Headers, Extra: &c.x.ReqExtra}
	t.RequestHeaders.Apply(e)
	rt.RequestHeaders.Apply(e)
}

// redirectReply answers with the route's redirect.
func (c *h1conn) redirectReply(rt *route.Route) bool {
	req := &c.req
	scheme := c.forwardedProto()
	path := http1.UnsafeString(req.Path)
	loc := rt.Redirect.Location(scheme, string(req.Host), path, string(req.Query), rt.MatchedLen(path))
	c.x.RespExtra = append(c.x.RespExtra[:0], http1.Header{Name: []byte("location"), Value: []byte(loc)})
	c.applyLocalResponseHeaders(rt)
	return c.localReply(rt.Redirect.Code, "", "")
}

// directReply answers with the route's direct_response.
func (c *h1conn) directReply(rt *route.Route) bool {
	c.x.RespExtra = c.x.RespExtra[:0]
	c.applyLocalResponseHeaders(rt)
	return c.localReply(rt.Direct.Status, "", rt.Direct.Body)
}

// applyLocalResponseHeaders applies the route's response header mutations
// to a reply the proxy makes (its fields are only c.x.RespExtra).
func (c *h1conn) applyLocalResponseHeaders(rt *route.Route) {
	if rt.ResponseHeaders.Empty() {
		return
	}
	rt.ResponseHeaders.Apply(h1.HeaderEditor{Extra: &c.x.RespExtra})
}
