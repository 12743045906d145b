package xds

import (
	"slices"
	"strings"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/straitmesh/strait/internal/proxypush"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// Partial EDS on state-of-the-world streams.
//
// EDS may be pushed partially, as Istio does: the xDS protocol requires
// every resource in a state-of-the-world response only for LDS and CDS; the
// proxy keeps the EDS resources a response omits (envoyproxy/envoy#13009).
// So an endpoints-only push (req not Full, not the proxy's own request, not
// forced) sends only the ClusterLoadAssignments whose version differs from
// the one last sent on this connection, or that were never sent. Everything
// else sends the whole set: full pushes, answers to the proxy's requests,
// forced pushes, the first push after a NACK (shouldRespond forgets what was
// sent), and a push in which a resource sent before is no longer generated
// (a partial response cannot say so). An endpoints-only push whose set
// changed only in order sends nothing.

// pushEndpoints is sotwStream.pushType for an endpoints-only EDS push when
// the proxy is known to hold held (sorted by name): it sends the load
// assignments that changed, or the whole set when a partial response
// cannot stand for it.
func (ss *sotwStream) pushEndpoints(names []string, held []*discovery.Resource, req *proxypush.PushRequest, version string, start time.Time) error {
	if done, err := ss.pushNarrowedEndpoints(names, held, req, version, start); done || err != nil {
		return err
	}
	res, ok := ss.s.generate(ss.con, xdsapi.EndpointType, names, req)
	if !ok {
		return nil
	}
	h, anys := hashResources(res)
	if h == ss.sent[xdsapi.EndpointType].hash {
		ss.s.log.Debug("push skipped, resources unchanged", "connection", ss.con.id, "type", typeLabel(xdsapi.EndpointType))
		return nil
	}
	current := byName(res)
	changed, whole := changedResources(current, held)
	switch {
	case whole:
		return ss.send(xdsapi.EndpointType, anys, req, version, start, &sotwSent{hash: h, eds: current}, false)
	case len(changed) == 0:
		// Same resources at the same versions, in another order: the
		// proxy holds the whole current set already.
		ss.sent[xdsapi.EndpointType].hash = h
		ss.s.log.Debug("push skipped, no resource changed", "connection", ss.con.id, "type", typeLabel(xdsapi.EndpointType))
		return nil
	}
	return ss.send(xdsapi.EndpointType, changed, req, version, start, &sotwSent{hash: h, eds: current}, true)
}

// pushNarrowedEndpoints is pushEndpoints' fast path when the server has an
// EndpointsNarrower: it generates only the load assignments the request
// may have changed, instead of every one the proxy watches, and sends the
// ones whose version differs from what the proxy holds. It reports false,
// having sent nothing, when the whole set must be generated: there is no
// narrower, it cannot narrow, generating fails, or a narrowed name yields
// no resource (it went away, which only the whole set can say).
func (ss *sotwStream) pushNarrowedEndpoints(names []string, held []*discovery.Resource,
	req *proxypush.PushRequest, version string, start time.Time) (bool, error) {
	s, con := ss.s, ss.con
	if s.narrower == nil {
		return false, nil
	}
	subset, ok := s.narrower.ChangedEndpoints(con.proxy, names, req)
	if !ok {
		return false, nil
	}
	subset = normalizeNames(subset)
	var res []*discovery.Resource
	if len(subset) > 0 {
		var err error
		if res, err = s.opts.Generator.Generate(con.proxy, xdsapi.EndpointType, subset, req); err != nil {
			return false, nil // the whole-set path reports it
		}
	}
	fresh := byName(res)
	if len(fresh) != len(subset) {
		return false, nil
	}
	next := slices.Clone(held)
	var changed []*anypb.Any
	for _, r := range fresh {
		i, found := slices.BinarySearchFunc(next, r.GetName(), func(e *discovery.Resource, name string) int {
			return strings.Compare(e.GetName(), name)
		})
		switch {
		case found && (next[i] == r || resourceVersion(next[i]) == resourceVersion(r)):
			continue
		case found:
			next[i] = r
		default:
			next = slices.Insert(next, i, r)
		}
		changed = append(changed, r.GetResource())
	}
	if len(changed) == 0 {
		s.log.Debug("push skipped, no resource changed", "connection", con.id, "type", typeLabel(xdsapi.EndpointType))
		return true, nil
	}
	h, _ := hashResources(next)
	return true, ss.send(xdsapi.EndpointType, changed, req, version, start, &sotwSent{hash: h, eds: next}, true)
}

// isEndpointsOnly reports whether req is a server-initiated push of
// endpoint changes only, the kind that may be sent as a partial EDS
// response.
func isEndpointsOnly(req *proxypush.PushRequest) bool {
	return !req.Full && !slices.Contains(req.Reason, proxypush.ProxyRequest)
}

// byName returns the resources of res that carry one, sorted by name, one
// per name (the first).
func byName(res []*discovery.Resource) []*discovery.Resource {
	out := make([]*discovery.Resource, 0, len(res))
	for _, r := range res {
		if r != nil && r.GetResource() != nil {
			out = append(out, r)
		}
	}
	slices.SortStableFunc(out, func(a, b *discovery.Resource) int { return strings.Compare(a.GetName(), b.GetName()) })
	return slices.CompactFunc(out, func(a, b *discovery.Resource) bool { return a.GetName() == b.GetName() })
}

// changedResources compares two sets sorted by name (byName): it returns
// the resources of current whose version differs from the one in sent, or
// that sent lacks. whole is true when a partial response cannot stand for
// current because a resource in sent is no longer in it.
func changedResources(current, sent []*discovery.Resource) (changed []*anypb.Any, whole bool) {
	changed = []*anypb.Any{}
	i := 0
	for _, r := range current {
		for i < len(sent) && sent[i].GetName() < r.GetName() {
			return nil, true // sent[i] is gone
		}
		if i < len(sent) && sent[i].GetName() == r.GetName() {
			old := sent[i]
			i++
			if old == r || resourceVersion(old) == resourceVersion(r) {
				continue
			}
		}
		changed = append(changed, r.GetResource())
	}
	if i < len(sent) {
		return nil, true
	}
	return changed, false
}
