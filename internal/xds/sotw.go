package xds

import (
	"slices"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/straitmesh/strait/internal/proxypush"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// StreamAggregatedResources serves one state-of-the-world ADS stream with
// the shared lifecycle (receiveLoop, processLoop).
func (s *Server) StreamAggregatedResources(stream discovery.AggregatedDiscoveryService_StreamAggregatedResourcesServer) error {
	ctx := stream.Context()
	ss := newSotwStream(s, peerAddr(ctx), stream)
	defer close(ss.con.stop)
	go receiveLoop(ctx, s, ss.con, stream.Recv, ss.reqs)
	return processLoop(s, ss.con, ss.reqs, ss.processRequest)
}

// sotwStream is one state-of-the-world stream: its gRPC stream and what
// the processing loop remembers of the responses it sent. A response
// carries the whole set of a type (but EDS, see pushType), so what matters
// is whether the set changed since the last send.
type sotwStream struct {
	// Set at creation, read-only.
	s      *Server
	con    *Connection
	stream discovery.AggregatedDiscoveryService_StreamAggregatedResourcesServer
	// reqs carries requests from the receive goroutine to the processing
	// loop; the receive goroutine closes it.
	reqs chan *discovery.DiscoveryRequest

	// sent holds, per type URL, what the proxy holds after the last send;
	// a type absent has not been sent. Only the processing loop touches it.
	sent map[string]*sotwSent
}

// sotwSent is what a state-of-the-world stream last sent of one type.
type sotwSent struct {
	// hash of the full current set of resources as of the last send (for
	// a partial EDS push, the whole generated set, not only what was sent).
	hash [32]byte
	// eds is the set of resources the proxy holds after the last send,
	// sorted by name (the generator's resources, shared with its cache: a
	// slice of pointers per connection); kept for EDS only, the type pushed
	// partially (see pushType). nil means unknown (nothing sent yet, or the
	// proxy NACKed a response), which makes the next push send the whole
	// set. It is replaced, never modified in place.
	eds []*discovery.Resource
}

func newSotwStream(s *Server, peer string, stream discovery.AggregatedDiscoveryService_StreamAggregatedResourcesServer) *sotwStream {
	ss := &sotwStream{
		s:      s,
		con:    newConnection(peer),
		stream: stream,
		reqs:   make(chan *discovery.DiscoveryRequest, 1),
		sent:   make(map[string]*sotwSent),
	}
	ss.con.protocol = ss
	return ss
}

func (ss *sotwStream) delta() bool { return false }

func (ss *sotwStream) push(typeURL string, req *proxypush.PushRequest, version string) error {
	return ss.pushType(typeURL, req, version, false)
}

// processRequest handles one DiscoveryRequest: it records the subscription
// and ACK/NACK state, and answers a new subscription or a changed resource
// name list.
func (ss *sotwStream) processRequest(req *discovery.DiscoveryRequest) error {
	typeURL := req.GetTypeUrl()
	if typeURL == "" {
		ss.s.log.Warn("request without type_url ignored", "connection", ss.con.id)
		return nil
	}
	if !ss.shouldRespond(req) {
		return nil
	}
	return ss.pushType(typeURL, proxyRequest(), ss.s.nextVersion(), true)
}

// shouldRespond updates the connection's watched resources from req and
// reports whether req asks for a response:
//   - a NACK of the last sent nonce is recorded and not answered (the proxy
//     keeps its previous config; re-sending the same thing would loop); any
//     NACK, stale or not, makes the next EDS push send the whole set;
//   - a request with a nonce other than the last sent one is stale: ignored;
//   - the first request for a type, or one with an empty nonce, is answered;
//   - an ACK is recorded and answered only if the resource names changed.
func (ss *sotwStream) shouldRespond(req *discovery.DiscoveryRequest) bool {
	s, con := ss.s, ss.con
	typeURL, nonce := req.GetTypeUrl(), req.GetResponseNonce()
	names := normalizeNames(req.GetResourceNames())

	if req.GetErrorDetail() != nil {
		if sent := ss.sent[typeURL]; sent != nil {
			// The proxy kept its previous version of some resources, so
			// the next push cannot send only what changed (pushType). This
			// holds for a stale NACK too: a partial response sent since
			// did not carry the rejected resources again.
			sent.eds = nil
		}
	}

	con.mu.Lock()
	defer con.mu.Unlock()
	w := con.watched[typeURL]

	if req.GetErrorDetail() != nil {
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

// pushType generates and sends one type. Unless force is set, it skips
// sending resources identical to the last sent ones, and an endpoints-only
// EDS push may send only what changed (pushEndpoints). A generator
// error is logged and the type skipped; only a send error is returned (it
// ends the stream).
func (ss *sotwStream) pushType(typeURL string, req *proxypush.PushRequest, version string, force bool) error {
	con := ss.con
	con.mu.RLock()
	names := slices.Clone(con.watched[typeURL].ResourceNames)
	con.mu.RUnlock()
	last := ss.sent[typeURL]

	start := time.Now()
	if typeURL == xdsapi.EndpointType && !force && isEndpointsOnly(req) && last != nil && last.eds != nil {
		return ss.pushEndpoints(names, last.eds, req, version, start)
	}
	res, ok := ss.s.generate(con, typeURL, names, req)
	if !ok {
		return nil
	}
	h, anys := hashResources(res)
	if !force && last != nil && h == last.hash {
		ss.s.log.Debug("push skipped, resources unchanged", "connection", con.id, "type", typeLabel(typeURL))
		return nil
	}
	var held []*discovery.Resource
	if typeURL == xdsapi.EndpointType {
		held = byName(res)
	}
	return ss.send(typeURL, anys, req, version, start, &sotwSent{hash: h, eds: held}, false)
}

// send sends anys as the response of one type, then records what the proxy
// holds (held) and awaits the ACK. Only a send error is returned.
func (ss *sotwStream) send(typeURL string, anys []*anypb.Any, req *proxypush.PushRequest,
	version string, start time.Time, held *sotwSent, partial bool) error {
	s, con := ss.s, ss.con
	resp := &discovery.DiscoveryResponse{
		VersionInfo: version,
		TypeUrl:     typeURL,
		Nonce:       s.nextNonce(),
		Resources:   anys,
	}
	sendStart := time.Now()
	if err := ss.stream.Send(resp); err != nil {
		if !isExpectedStreamEnd(err) {
			s.log.Warn("send failed", "connection", con.id, "type", typeLabel(typeURL), "error", err)
		}
		return err
	}
	now := time.Now()
	s.observeSend(typeURL, start, sendStart, now)

	// After a partial response too the proxy holds exactly held: a partial
	// one is sent only when every name sent before is still in the set,
	// and it carries every name whose version changed.
	ss.sent[typeURL] = held
	con.mu.Lock()
	w := con.watched[typeURL]
	w.VersionSent, w.NonceSent, w.LastSent = version, resp.Nonce, now
	con.awaitAck(resp.Nonce, req)
	con.mu.Unlock()
	s.log.Debug("pushed", "connection", con.id, "type", typeLabel(typeURL), "version", version, "resources", len(anys),
		"partial", partial, "reasons", req.Reason)
	return nil
}
