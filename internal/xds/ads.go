package xds

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/straitmesh/strait/internal/model"
)

// StreamAggregatedResources serves one state-of-the-world ADS stream. A
// receive goroutine reads requests and feeds them, through reqCh, to the
// processing loop below, which also takes pushes from the push workers; the
// processing loop is the only sender on the stream and the only writer of
// the connection's watched resources.
func (s *Server) StreamAggregatedResources(stream discovery.AggregatedDiscoveryService_StreamAggregatedResourcesServer) error {
	ctx := stream.Context()
	con := newConnection(peerAddr(ctx), stream)
	defer close(con.stop)
	go s.receive(con)
	return processLoop(s, con, con.reqCh, func(req *discovery.DiscoveryRequest) error { return s.processRequest(con, req) })
}

// processLoop is a stream's processing loop, for state of the world and
// delta alike: it handles the requests the receive goroutine passes on
// reqs and the pushes the push workers hand over, and is the only sender
// on the stream. It returns when reqs is closed (the receive error) or a
// request or push fails.
func processLoop[T any](s *Server, con *Connection, reqs <-chan T, process func(T) error) error {
	for {
		select {
		case req, ok := <-reqs:
			if !ok {
				return con.recvErr
			}
			if err := process(req); err != nil {
				return err
			}
		case ev := <-con.pushCh:
			err := s.pushConnection(con, ev.req)
			close(ev.done)
			if err != nil {
				return err
			}
		}
	}
}

// receive reads the stream until it ends. The first request registers the
// connection (initConnection); the connection is unregistered when receive
// returns.
func (s *Server) receive(con *Connection) {
	defer close(con.reqCh)
	receiveLoop(s, con, con.stream.Context(), con.stream.Recv, con.reqCh)
}

// receiveLoop is the receive goroutine of either protocol: it reads
// requests with recv and forwards them to out, registering the connection
// on the first one and unregistering it on return.
func receiveLoop[T interface{ GetNode() *core.Node }](s *Server, con *Connection, ctx context.Context, recv func() (T, error), out chan<- T) {
	first := true
	for {
		req, err := recv()
		if err != nil {
			if !isExpectedStreamEnd(err) {
				con.recvErr = err
				s.log.Warn("receive failed", "connection", con.id, "peer", con.peer, "error", err)
			}
			return
		}
		if first {
			first = false
			if err := s.initConnection(req.GetNode(), con); err != nil {
				con.recvErr = err
				s.log.Warn("connection rejected", "peer", con.peer, "node", req.GetNode().GetId(), "error", err)
				return
			}
			defer s.closeConnection(con)
		}
		select {
		case out <- req:
		case <-ctx.Done():
			return
		}
	}
}

func isExpectedStreamEnd(err error) bool {
	if errors.Is(err, io.EOF) {
		return true
	}
	switch status.Code(err) {
	case codes.Canceled, codes.DeadlineExceeded:
		return true
	}
	return false
}

// initConnection builds the proxy from the first request's node, runs the
// resolve and authorize hooks, and registers the connection.
func (s *Server) initConnection(node *core.Node, con *Connection) error {
	if node.GetId() == "" {
		return status.Error(codes.InvalidArgument, "first DiscoveryRequest has no node.id (want TYPE~IP~POD.NAMESPACE~DOMAIN)")
	}
	proxy, err := model.ParseNodeID(node.GetId())
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	proxy.Metadata = nodeMetadata(node)
	if s.opts.ResolveProxy != nil {
		if err := s.opts.ResolveProxy(proxy); err != nil {
			return status.Errorf(codes.FailedPrecondition, "proxy %s: %v", proxy.ID, err)
		}
	}
	if s.opts.Authorize != nil {
		if err := s.opts.Authorize(proxy); err != nil {
			return status.Errorf(codes.PermissionDenied, "proxy %s: %v", proxy.ID, err)
		}
	}
	con.proxy = proxy
	con.id = proxy.ID + "-" + strconv.FormatUint(s.conIDs.Add(1), 10)

	s.mu.Lock()
	s.clients[con.id] = con
	s.mu.Unlock()
	s.metrics.connections.Inc()
	s.log.Info("new connection", "connection", con.id, "peer", con.peer)
	return nil
}

func (s *Server) closeConnection(con *Connection) {
	s.mu.Lock()
	delete(s.clients, con.id)
	s.mu.Unlock()
	s.metrics.connections.Dec()
	s.log.Info("connection closed", "connection", con.id, "duration", time.Since(con.connectedAt).Round(time.Millisecond))
}

// processRequest handles one DiscoveryRequest: it records the subscription
// and ACK/NACK state, and answers a new subscription or a changed resource
// name list.
func (s *Server) processRequest(con *Connection, req *discovery.DiscoveryRequest) error {
	typeURL := req.GetTypeUrl()
	if typeURL == "" {
		s.log.Warn("request without type_url ignored", "connection", con.id)
		return nil
	}
	if !s.shouldRespond(con, req) {
		return nil
	}
	pr := &model.PushRequest{Full: true, Reason: []model.TriggerReason{model.ProxyRequest}, Start: time.Now()}
	return s.pushType(con, typeURL, pr, s.nextVersion(), true)
}

// shouldRespond updates the connection's watched resources from req and
// reports whether req asks for a response:
//   - a NACK of the last sent nonce is recorded and not answered (the proxy
//     keeps its previous config; re-sending the same thing would loop); any
//     NACK, stale or not, makes the next EDS push send the whole set;
//   - a request with a nonce other than the last sent one is stale: ignored;
//   - the first request for a type, or one with an empty nonce, is answered;
//   - an ACK is recorded and answered only if the resource names changed.
func (s *Server) shouldRespond(con *Connection, req *discovery.DiscoveryRequest) bool {
	typeURL, nonce := req.GetTypeUrl(), req.GetResponseNonce()
	names := normalizeNames(req.GetResourceNames())

	con.mu.Lock()
	defer con.mu.Unlock()
	w := con.watched[typeURL]

	if req.GetErrorDetail() != nil {
		if w != nil {
			// The proxy kept its previous version of some resources, so
			// the next push cannot send only what changed (pushType). This
			// holds for a stale NACK too: a partial response sent since
			// did not carry the rejected resources again.
			w.sentEDS = nil
		}
		if w == nil || nonce != w.NonceSent {
			s.log.Debug("stale nack ignored", "connection", con.id, "type", typeLabel(typeURL), "nonce", nonce)
			return false
		}
		w.NackError = req.GetErrorDetail().GetMessage()
		w.NonceNacked = nonce
		w.LastNack = time.Now()
		s.metrics.rejects.WithLabelValues(typeLabel(typeURL)).Inc()
		con.acked(nonce, false, s.metrics)
		s.log.Warn("proxy rejected configuration", "connection", con.id, "type", typeLabel(typeURL),
			"version_sent", w.VersionSent, "version_acked", req.GetVersionInfo(), "nonce", nonce, "error", w.NackError)
		return false
	}

	if w == nil {
		con.watched[typeURL] = &WatchedResource{TypeURL: typeURL, ResourceNames: names}
		return true
	}
	if nonce == "" {
		// A new subscription for a type already watched on this stream: the
		// proxy lost its state for it, so answer.
		w.ResourceNames = names
		return true
	}
	if nonce != w.NonceSent {
		s.log.Debug("stale request ignored", "connection", con.id, "type", typeLabel(typeURL), "nonce", nonce, "nonce_sent", w.NonceSent)
		return false
	}
	w.VersionAcked, w.NonceAcked = req.GetVersionInfo(), nonce
	w.NackError, w.NonceNacked = "", ""
	con.acked(nonce, true, s.metrics)
	if !slices.Equal(w.ResourceNames, names) {
		w.ResourceNames = names
		return true
	}
	return false
}

// normalizeNames sorts and dedups resource names so that reordering is not
// a change.
func normalizeNames(names []string) []string {
	if len(names) == 0 {
		return nil
	}
	out := slices.Clone(names)
	slices.Sort(out)
	return slices.Compact(out)
}

// pushConnection sends req's resource types to con: a full push sends every
// watched type in push order, an endpoints-only push only EDS. Types whose
// resources did not change since the last send are skipped.
func (s *Server) pushConnection(con *Connection, req *model.PushRequest) error {
	types := con.watchedTypes()
	if !req.Full {
		types = slices.DeleteFunc(types, func(t string) bool { return t != EndpointType })
	}
	version := s.nextVersion()
	for _, t := range types {
		var err error
		if con.IsDelta() {
			err = s.pushDeltaType(con, t, req, version, false)
		} else {
			err = s.pushType(con, t, req, version, false)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// pushType generates and sends one type to con. Unless force is set, it
// skips sending resources identical to the last sent ones. A generator error
// is logged and the type skipped; only a send error is returned (it ends the
// stream). Only the processing loop calls it.
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
// (a partial response cannot say so; the whole set is what the seed sent).
// An endpoints-only push whose set changed only in order sends nothing.
func (s *Server) pushType(con *Connection, typeURL string, req *model.PushRequest, version string, force bool) error {
	con.mu.RLock()
	w := con.watched[typeURL]
	names := slices.Clone(w.ResourceNames)
	lastHash, sent, sentEDS := w.hash, w.sent, w.sentEDS
	con.mu.RUnlock()

	start := time.Now()
	label := typeLabel(typeURL)
	if typeURL == EndpointType && !force && isEndpointsOnly(req) && sentEDS != nil {
		if done, err := s.pushChangedEndpoints(con, w, names, sentEDS, req, version, start); done || err != nil {
			return err
		}
	}
	res, err := s.opts.Generator.Generate(con.proxy, typeURL, names, req)
	if err != nil {
		s.metrics.generateFailures.WithLabelValues(label).Inc()
		s.log.Error("generate failed", "connection", con.id, "type", label, "error", err)
		return nil
	}
	h, anys := hashResources(res)
	if !force && sent && h == lastHash {
		s.log.Debug("push skipped, resources unchanged", "connection", con.id, "type", label)
		return nil
	}

	// current is the generated set sorted by name, kept for EDS only;
	// changed is the partial response, nil for a whole-set one.
	var current []*discovery.Resource
	var changed []*anypb.Any
	if typeURL == EndpointType {
		current = byName(res)
		if !force && isEndpointsOnly(req) && sentEDS != nil {
			var whole bool
			changed, whole = changedResources(current, sentEDS)
			switch {
			case whole:
				changed = nil
			case len(changed) == 0:
				// Same resources at the same versions, in another order:
				// the proxy holds the whole current set already.
				con.mu.Lock()
				w.hash = h
				con.mu.Unlock()
				s.log.Debug("push skipped, no resource changed", "connection", con.id, "type", label)
				return nil
			}
		}
	}
	partial := changed != nil
	if partial {
		anys = changed
	}

	return s.send(con, w, typeURL, anys, req, version, start, h, current, partial)
}

// send sends anys as the response of one type, then records what the proxy
// holds (the hash of the whole set, and for EDS the set itself) and awaits
// the ACK. Only a send error is returned.
func (s *Server) send(con *Connection, w *WatchedResource, typeURL string, anys []*anypb.Any, req *model.PushRequest,
	version string, start time.Time, h [32]byte, held []*discovery.Resource, partial bool) error {
	label := typeLabel(typeURL)
	resp := &discovery.DiscoveryResponse{
		VersionInfo: version,
		TypeUrl:     typeURL,
		Nonce:       s.nextNonce(),
		Resources:   anys,
	}
	sendStart := time.Now()
	if err := con.stream.Send(resp); err != nil {
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
	w.VersionSent, w.NonceSent, w.LastSent = version, resp.Nonce, now
	// After a partial response too the proxy holds exactly held: a
	// partial one is sent only when every name sent before is still in
	// the set, and it carries every name whose version changed.
	w.hash, w.sent, w.sentEDS = h, true, held
	con.awaitAck(resp.Nonce, req)
	con.mu.Unlock()
	s.log.Debug("pushed", "connection", con.id, "type", label, "version", version, "resources", len(anys),
		"partial", partial, "reasons", req.Reason)
	return nil
}

// pushChangedEndpoints is pushType's fast path for an endpoints-only EDS
// push when the generator can name the resources the request may have
// changed (EndpointsNarrower): it generates only those, instead of every
// load assignment the proxy watches, and sends the ones whose version
// differs from what the proxy holds (held, sorted by name). It reports
// false, having sent nothing, when the whole set must be generated: the
// generator cannot narrow, fails, or a narrowed name yields no resource
// (it went away, which only the whole set can say).
func (s *Server) pushChangedEndpoints(con *Connection, w *WatchedResource, names []string, held []*discovery.Resource,
	req *model.PushRequest, version string, start time.Time) (bool, error) {
	n, ok := s.opts.Generator.(EndpointsNarrower)
	if !ok {
		return false, nil
	}
	subset, ok := n.ChangedEndpoints(con.proxy, names, req)
	if !ok {
		return false, nil
	}
	subset = normalizeNames(subset)
	var res []*discovery.Resource
	if len(subset) > 0 {
		var err error
		if res, err = s.opts.Generator.Generate(con.proxy, EndpointType, subset, req); err != nil {
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
		s.log.Debug("push skipped, no resource changed", "connection", con.id, "type", typeLabel(EndpointType))
		return true, nil
	}
	h, _ := hashResources(next)
	return true, s.send(con, w, EndpointType, changed, req, version, start, h, next, true)
}

// isEndpointsOnly reports whether req is a server-initiated push of
// endpoint changes only, the kind that may be sent as a partial EDS
// response.
func isEndpointsOnly(req *model.PushRequest) bool {
	return !req.Full && !slices.Contains(req.Reason, model.ProxyRequest)
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

// resourceVersion is the version of one generated resource: the
// generator's Version when it set one (a content hash it cached), else a
// hash of the serialized resource.
func resourceVersion(r *discovery.Resource) string {
	if r.GetVersion() != "" {
		return r.GetVersion()
	}
	sum := sha256.Sum256(r.GetResource().GetValue())
	return hex.EncodeToString(sum[:12])
}

// hashResources returns the resources as Anys and a hash of their names and
// serialized bytes (or, for resources whose generator set a content
// version, that version).
func hashResources(res []*discovery.Resource) ([32]byte, []*anypb.Any) {
	h := sha256.New()
	anys := make([]*anypb.Any, 0, len(res))
	var n [8]byte
	write := func(b []byte) {
		// Length-prefix every field so that boundaries cannot shift.
		for i, l := 0, uint64(len(b)); i < 8; i++ {
			n[i] = byte(l >> (8 * i))
		}
		h.Write(n[:])
		h.Write(b)
	}
	for _, r := range res {
		if r == nil || r.GetResource() == nil {
			continue
		}
		anys = append(anys, r.GetResource())
		write([]byte(r.GetName()))
		write([]byte(r.GetResource().GetTypeUrl()))
		if r.GetVersion() != "" {
			write([]byte(r.GetVersion()))
		} else {
			write(r.GetResource().GetValue())
		}
	}
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	return sum, anys
}

// peerAddr is the remote address of a stream, or "" when gRPC does not know it.
func peerAddr(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}
