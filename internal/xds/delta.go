package xds

import (
	"maps"
	"slices"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/straitmesh/strait/internal/model"
)

// DeltaAggregatedResources serves one delta (incremental) ADS stream. It
// shares everything with state of the world but the wire format: the same
// receive goroutine and processing loop, the same push queue, generators and
// ACK bookkeeping. What differs is per type: the subscription is a set of
// names (or a wildcard) changed by subscribe/unsubscribe lists, and a
// response carries only the resources whose version changed plus the names
// of the ones removed.
func (s *Server) DeltaAggregatedResources(stream discovery.AggregatedDiscoveryService_DeltaAggregatedResourcesServer) error {
	ctx := stream.Context()
	con := newDeltaConnection(peerAddr(ctx), stream)
	defer close(con.stop)
	go func() {
		defer close(con.deltaReqCh)
		receiveLoop(s, con, ctx, stream.Recv, con.deltaReqCh)
	}()
	return processLoop(s, con, con.deltaReqCh, func(req *discovery.DeltaDiscoveryRequest) error { return s.processDeltaRequest(con, req) })
}

// processDeltaRequest applies one DeltaDiscoveryRequest and answers it when
// it is the first for its type or subscribes to new names.
func (s *Server) processDeltaRequest(con *Connection, req *discovery.DeltaDiscoveryRequest) error {
	typeURL := req.GetTypeUrl()
	if typeURL == "" {
		s.log.Warn("delta request without type_url ignored", "connection", con.id)
		return nil
	}
	respond, first := s.updateDeltaSubscription(con, req)
	if !respond {
		return nil
	}
	pr := &model.PushRequest{Full: true, Reason: []model.TriggerReason{model.ProxyRequest}, Start: time.Now()}
	return s.pushDeltaType(con, typeURL, pr, s.nextVersion(), first)
}

// updateDeltaSubscription records req's ACK or NACK and subscription
// changes. respond is true for the first request of a type and when names
// were added; first is true for the first request of a type (answered even
// when there is nothing to send, so that the proxy stops waiting).
//
// Unlike state of the world, subscription changes are applied whatever the
// nonce: they are deltas, and dropping one would desynchronise the two
// sides. A stale nonce only means the ACK/NACK part is ignored.
func (s *Server) updateDeltaSubscription(con *Connection, req *discovery.DeltaDiscoveryRequest) (respond, first bool) {
	typeURL, nonce := req.GetTypeUrl(), req.GetResponseNonce()
	label := typeLabel(typeURL)

	con.mu.Lock()
	defer con.mu.Unlock()
	w := con.watched[typeURL]
	if w == nil {
		first = true
		w = &WatchedResource{TypeURL: typeURL, versions: map[string]string{}}
		con.watched[typeURL] = w
		// An empty first subscribe list is the legacy wildcard.
		w.Wildcard = len(req.GetResourceNamesSubscribe()) == 0
		// After a reconnect the proxy says what it already has, so that
		// unchanged resources are not sent again.
		maps.Copy(w.versions, req.GetInitialResourceVersions())
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
		for name, prev := range w.undo {
			if prev.had {
				w.versions[name] = prev.version
			} else {
				delete(w.versions, name)
			}
		}
		w.undo = nil
		s.metrics.rejects.WithLabelValues(label).Inc()
		con.acked(nonce, false, s.metrics)
		s.log.Warn("proxy rejected configuration", "connection", con.id, "type", label,
			"version_sent", w.VersionSent, "nonce", nonce, "error", w.NackError)
	default:
		w.VersionAcked, w.NonceAcked = w.VersionSent, nonce
		w.NackError, w.NonceNacked = "", ""
		w.undo = nil
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
			delete(w.versions, n)
		}
	}
	if !w.Wildcard {
		// Without the wildcard the proxy holds only what it names.
		for n := range w.versions {
			if !names[n] {
				delete(w.versions, n)
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

// pushDeltaType generates one type for a delta connection and sends the
// resources whose version differs from what the proxy holds, and the names
// of those it holds that no longer exist. Nothing is sent when nothing
// changed unless force is set. Only the processing loop calls it.
func (s *Server) pushDeltaType(con *Connection, typeURL string, req *model.PushRequest, version string, force bool) error {
	con.mu.RLock()
	w := con.watched[typeURL]
	wildcard := w.Wildcard
	names := slices.Clone(w.ResourceNames)
	held := maps.Clone(w.versions)
	con.mu.RUnlock()

	start := time.Now()
	label := typeLabel(typeURL)
	var res []*discovery.Resource
	if wildcard || len(names) > 0 {
		var watched []string
		if !wildcard {
			watched = names
		}
		var err error
		res, err = s.opts.Generator.Generate(con.proxy, typeURL, watched, req)
		if err != nil {
			s.metrics.generateFailures.WithLabelValues(label).Inc()
			s.log.Error("generate failed", "connection", con.id, "type", label, "error", err)
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
		if old, ok := held[r.Name]; ok && old == v {
			continue
		}
		changed = append(changed, &discovery.Resource{Name: r.Name, Version: v, Resource: r.Resource})
	}
	var removed []string
	for n := range held {
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
	if err := con.deltaStream.Send(resp); err != nil {
		if !isExpectedStreamEnd(err) {
			s.log.Warn("send failed", "connection", con.id, "type", label, "error", err)
		}
		return err
	}
	now := time.Now()
	s.metrics.sendTime.Observe(now.Sub(sendStart).Seconds())
	s.metrics.pushTime.WithLabelValues(label).Observe(now.Sub(start).Seconds())
	s.metrics.pushes.WithLabelValues(label).Inc()

	con.mu.Lock()
	undo := make(map[string]undoEntry, len(changed)+len(removed))
	for _, r := range changed {
		old, had := w.versions[r.Name]
		undo[r.Name] = undoEntry{version: old, had: had}
		w.versions[r.Name] = r.Version
	}
	for _, n := range removed {
		if old, had := w.versions[n]; had {
			undo[n] = undoEntry{version: old, had: true}
			delete(w.versions, n)
		}
	}
	w.undo = undo
	w.VersionSent, w.NonceSent, w.LastSent = version, resp.Nonce, now
	w.sent = true
	con.awaitAck(resp.Nonce, req)
	con.mu.Unlock()
	s.log.Debug("pushed delta", "connection", con.id, "type", label, "version", version,
		"changed", len(changed), "removed", len(removed), "reasons", req.Reason)
	return nil
}
