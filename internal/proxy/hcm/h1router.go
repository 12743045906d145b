package hcm

// This file is the HTTP/1.1 path's side of the router decisions (package
// router): the x-envoy-* request headers, header mutations and rewrites on
// the codec's header slices, redirects and direct responses, and the wait
// and host choice between retries.

import (
	"net/netip"
	"strconv"
	"time"

	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/http1"
	"github.com/straitmesh/strait/internal/proxy/route"
	"github.com/straitmesh/strait/internal/proxy/router"
)

// retryBufferLimit is the largest request body buffered so that a request
// can be retried (Envoy's per_request_buffer_limit_bytes default, the
// listener's 1 MiB buffer limit); a larger or unsized body is streamed and
// its request is not retried once sent.
const retryBufferLimit = 1 << 20

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

// backOff waits before a retry, and reports false when the route timeout
// (routeExpiry; zero: none) would pass first.
func backOff(r *router.Retry, routeExpiry time.Time) bool {
	d := r.BackOff()
	if !routeExpiry.IsZero() && time.Now().Add(d).After(routeExpiry) {
		return false
	}
	if d > 0 {
		time.Sleep(d)
	}
	return true
}

// retrySlot is a request's hold on its cluster's retry circuit breaker
// (max_retries): a retry is admitted only while the breaker has room, and
// holds its slot until the next retry or the end of the exchange, as
// Envoy counts a retry active until its attempt completes.
type retrySlot struct {
	cl   *cluster.Cluster
	held bool
}

// admit releases the previous retry's slot and takes one for the next
// retry; false (counted as upstream_rq_retry_overflow) means no retry.
func (s *retrySlot) admit(cl *cluster.Cluster) bool {
	s.release()
	if !cl.BeginRetry() {
		return false
	}
	s.cl, s.held = cl, true
	return true
}

// release gives the slot back, if one is held.
func (s *retrySlot) release() {
	if s.held {
		s.cl.EndRetry()
		s.held = false
	}
}

// retryEndpoint counts a retry and chooses its endpoint.
func (c *h1conn) retryEndpoint(cl *cluster.Cluster, r *router.Retry, tried []string, prev cluster.Endpoint) cluster.Endpoint {
	cl.Stats.Router.Retry.Add(1)
	return repick(cl, r, c.dst, c.src, tried, prev)
}

// repick chooses the endpoint of a retry (prev is the last attempt's):
// with the previous_hosts predicate, one not tried yet if one turns up
// within the allowed picks; with the previous_priorities retry priority,
// outside the priority levels it excludes by now.
func repick(cl *cluster.Cluster, r *router.Retry, dst netip.AddrPort, src cluster.OriginalSource, tried []string, prev cluster.Endpoint) cluster.Endpoint {
	avoid, picks := r.AvoidPreviousHosts()
	if !avoid {
		picks = 1
	}
	excluded := r.ExcludedPriorities(prev.Priority())
	ep := prev
	for i := 0; i < picks; i++ {
		next, err := cl.PickExcluding(dst, excluded)
		if err != nil {
			return prev
		}
		next.Source = src
		next.Downstream = prev.Downstream
		ep = next
		if !avoid || !contains(tried, next.Address) {
			break
		}
	}
	return ep
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
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

// countRetryOutcome counts how a request that may have been retried ended
// (responded: with an upstream response rather than a local reply).
func countRetryOutcome(cl *cluster.Cluster, r *router.Retry, responded bool) {
	switch {
	case r.LimitExceeded:
		cl.Stats.Router.RetryLimitExceeded.Add(1)
	case responded && r.Retried > 0:
		cl.Stats.Router.RetrySuccess.Add(1)
	}
}
