package xds

import (
	"maps"
	"slices"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/straitmesh/strait/internal/proxypush"
)

// DeltaAggregatedResources serves one delta (incremental) ADS stream with
// the shared lifecycle (receiveLoop, processLoop): the same receive goroutine and
// processing loop, the same push queue, generators and ACK bookkeeping as
// state of the world. What differs is per type: the subscription is a set
// of names (or a wildcard) changed by subscribe/unsubscribe lists, and a
// response carries only the resources whose version changed plus the names
// of the ones removed.
func (s *Server) DeltaAggregatedResources(stream discovery.AggregatedDiscoveryService_DeltaAggregatedResourcesServer) error {
	ctx := stream.Context()
	ds := newDeltaStream(s, peerAddr(ctx), stream)
	defer close(ds.con.stop)
	go receiveLoop(ctx, s, ds.con, stream.Recv, ds.reqs)
	return processLoop(s, ds.con, ds.reqs, ds.processRequest)
}

// deltaStream is one delta stream: its gRPC stream and what the proxy
// holds of each type, resource by resource.
type deltaStream struct {
	// Set at creation, read-only.
	s      *Server
	con    *Connection
	stream discovery.AggregatedDiscoveryService_DeltaAggregatedResourcesServer
	// reqs carries requests from the receive goroutine to the processing
	// loop; the receive goroutine closes it.
	reqs chan *discovery.DeltaDiscoveryRequest

	// held holds, per subscribed type URL, what the proxy holds. Only the
	// processing loop touches it.
	held map[string]*deltaHeld
}

// deltaHeld is what the proxy holds of one type on a delta stream.
type deltaHeld struct {
	// versions maps each resource name the proxy holds to the version
	// last sent.
	versions map[string]string
	// undo restores versions if the proxy NACKs the last response.
	undo map[string]undoEntry
}

func newDeltaStream(s *Server, peer string, stream discovery.AggregatedDiscoveryService_DeltaAggregatedResourcesServer) *deltaStream {
	ds := &deltaStream{
		s:      s,
		con:    newConnection(peer),
		stream: stream,
		reqs:   make(chan *discovery.DeltaDiscoveryRequest, 1),
		held:   make(map[string]*deltaHeld),
	}
	ds.con.protocol = ds
	return ds
}

func (ds *deltaStream) delta() bool { return true }

func (ds *deltaStream) push(typeURL string, req *proxypush.PushRequest, version string) error {
	return ds.pushType(typeURL, req, version, false)
}

// processRequest applies one DeltaDiscoveryRequest and answers it when
// it is the first for its type or subscribes to new names.
func (ds *deltaStream) processRequest(req *discovery.DeltaDiscoveryRequest) error {
	typeURL := req.GetTypeUrl()
	if typeURL == "" {
		ds.s.log.Warn("delta request without type_url ignored", "connection", ds.con.id)
		return nil
	}
	respond, first := ds.updateSubscription(req)
	if !respond {
		return nil
	}
	return ds.pushType(typeURL, proxyRequest(), ds.s.nextVersion(), first)
}

// updateDeltaSubscription records req's ACK or NACK and subscription
// changes. respond is true for the first request of a type and when names
// were added; first is true for the first request of a type (answered even
// when there is nothing to send, so that the proxy stops waiting).
//
// Unlike state of the world, subscription changes are applied whatever the
// nonce: they are deltas, and dropping one would desynchronise the two
// sides. A stale nonce only means the ACK/NACK part is ignored.
func (ds *deltaStream) updateSubscription(req *discovery.DeltaDiscoveryRequest) (respond, first bool) {
	s, con := ds.s, ds.con
	typeURL, nonce := req.GetTypeUrl(), req.GetResponseNonce()
	label := typeLabel(typeURL)

	con.mu.Lock()
	defer con.mu.Unlock()
	w := con.watched[typeURL]
	held := ds.held[typeURL]
	if w == nil {
		first = true
		w = &WatchedResource{TypeURL: typeURL}
		con.watched[typeURL] = w
		// An empty first subscribe list is the legacy wildcard.
		w.Wildcard = len(req.GetResourceNamesSubscribe()) == 0
		// After a reconnect the proxy says what it already has, so that
		// unchanged resources are not sent again.
		held = &deltaHeld{versions: maps.Clone(req.GetInitialResourceVersions())}
		if held.versions == nil {
			held.versions = map[string]string{}
		}
		ds.held[typeURL] = held
	}

	switch {
	case nonce == "":
	case nonce != w.NonceSent:
		s.log.Debug("stale delta nonce ignored", "connection", con.id, "type", label, "nonce", nonce, "nonce_sent", w.NonceSent)
	case req.GetErrorDetail() != nil:
		w.NackError = req.GetErrorDetail().GetMessage()
		w.NonceNacked = nonce
		w.LastNack = time.Now()
		// The proxy kept what it had before this response.
		for name, prev := range held.undo {
			if prev.had {
				held.versions[name] = prev.version
			} else {
				delete(held.versions, name)
			}
		}
		held.undo = nil
		s.metrics.rejects.WithLabelValues(label).Inc()
		con.acked(nonce, false, s.metrics)
		s.log.Warn("proxy rejected configuration", "connection", con.id, "type", label,
			"version_sent", w.VersionSent, "nonce", nonce, "error", w.NackError)
	default:
		w.VersionAcked, w.NonceAcked = w.VersionSent, nonce
		w.NackError, w.NonceNacked = "", ""
		held.undo = nil
		con.acked(nonce, true, s.metrics)
	}

	names := make(map[string]bool, len(w.ResourceNames))
	for _, n := range w.ResourceNames {
		names[n] = true
	}
	added := false
	for _, n := range req.GetResourceNamesSubscribe() {
		switch {
		case n == "*":
			added = added || !w.Wildcard
			w.Wildcard = true
		case !names[n]:
			names[n] = true
			added = true
		}
	}
	for _, n := range req.GetResourceNamesUnsubscribe() {
		if n == "*" {
			w.Wildcard = false
			continue
		}
		delete(names, n)
		if !w.Wildcard {
			delete(held.versions, n)
		}
	}
	if !w.Wildcard {
		// Without the wildcard the proxy holds only what it names.
		for n := range held.versions {
			if !names[n] {
				delete(held.versions, n)
			}
		}
	}
	w.ResourceNames = slices.Sorted(maps.Keys(names))
	return first || added, first
}

// undoEntry is a resource's version before the last response, restored if
// the proxy NACKs that response.
type undoEntry struct {
	version string
	had     bool
}

// pushType generates one type and sends the resources whose version
// differs from what the proxy holds, and the names of those it holds that
// no longer exist. Nothing is sent when nothing changed unless force is
// set.
func (ds *deltaStream) pushType(typeURL string, req *proxypush.PushRequest, version string, force bool) error {
	s, con := ds.s, ds.con
	con.mu.RLock()
	w := con.watched[typeURL]
	wildcard := w.Wildcard
	names := slices.Clone(w.ResourceNames)
	con.mu.RUnlock()
	held := ds.held[typeURL]

	start := time.Now()
	label := typeLabel(typeURL)
	var res []*discovery.Resource
	if wildcard || len(names) > 0 {
		var watched []string
		if !wildcard {
			watched = names
		}
		var ok bool
		if res, ok = s.generate(con, typeURL, watched, req); !ok {
			return nil
		}
	}

	seen := make(map[string]bool, len(res))
	var changed []*discovery.Resource
	for _, r := range res {
		if r == nil || r.GetResource() == nil {
			continue
		}
		seen[r.Name] = true
		v := resourceVersion(r)
		if old, ok := held.versions[r.Name]; ok && old == v {
			continue
		}
		changed = append(changed, &discovery.Resource{Name: r.Name, Version: v, Resource: r.Resource})
	}
	var removed []string
	for n := range held.versions {
		if !seen[n] {
			removed = append(removed, n)
		}
	}
	slices.Sort(removed)
	if len(changed) == 0 && len(removed) == 0 && !force {
		s.log.Debug("delta push skipped, resources unchanged", "connection", con.id, "type", label)
		return nil
	}

	resp := &discovery.DeltaDiscoveryResponse{
		SystemVersionInfo: version,
		TypeUrl:           typeURL,
		Resources:         changed,
		RemovedResources:  removed,
		Nonce:             s.nextNonce(),
	}
	sendStart := time.Now()
	if err := ds.stream.Send(resp); err != nil {
		if !isExpectedStreamEnd(err) {
			s.log.Warn("send failed", "connection", con.id, "type", label, "error", err)
		}
		return err
	}
	now := time.Now()
	s.observeSend(typeURL, start, sendStart, now)

	undo := make(map[string]undoEntry, len(changed)+len(removed))
	for _, r := range changed {
		old, had := held.versions[r.Name]
		undo[r.Name] = undoEntry{version: old, had: had}
		held.versions[r.Name] = r.Version
	}
	for _, n := range removed {
		if old, had := held.versions[n]; had {
			undo[n] = undoEntry{version: old, had: true}
			delete(held.versions, n)
		}
	}
	held.undo = undo
	con.mu.Lock()
	w.VersionSent, w.NonceSent, w.LastSent = version, resp.Nonce, now
	con.awaitAck(resp.Nonce, req)
	con.mu.Unlock()
	s.log.Debug("pushed delta", "connection", con.id, "type", label, "version", version,
		"changed", len(changed), "removed", len(removed), "reasons", req.Reason)
	return nil
}
