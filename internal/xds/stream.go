package xds

import (
	"context"
	"errors"
	"io"
	"net/netip"
	"slices"
	"strconv"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/straitmesh/strait/internal/nds"
	"github.com/straitmesh/strait/internal/proxypush"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// The stream lifecycle both protocols share. A stream handler (StreamAggregatedResources,
// DeltaAggregatedResources) creates its protocol's stream and Connection, starts a receive
// goroutine (receiveLoop) and runs the processing loop (processLoop):
//
//   - the receive goroutine reads requests, registers the connection on
//     the first one (initConnection), hands every request to the
//     processing loop, and unregisters the connection when the stream ends;
//   - the processing loop handles the requests and the pushes the push
//     workers hand over (pushConnection). It is the only sender on the
//     stream, the only writer of the connection's watched resources, and
//     the owner of the protocol's own state.

// processLoop is a stream's processing loop: it handles the requests the
// receive goroutine passes on reqs and the pushes the push workers hand
// over. It returns when reqs is closed (the receive error) or a request or
// push fails.
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

// receiveLoop is the receive goroutine: it reads requests with recv and
// forwards them to out, registering the connection on the first one and
// unregistering it on return. It closes out when it returns.
func receiveLoop[T interface{ GetNode() *core.Node }](ctx context.Context, s *Server, con *Connection, recv func() (T, error), out chan<- T) {
	defer close(out)
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
			if err := s.initConnection(ctx, req.GetNode(), con); err != nil {
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
func (s *Server) initConnection(ctx context.Context, node *core.Node, con *Connection) error {
	if node.GetId() == "" {
		return status.Error(codes.InvalidArgument, "first DiscoveryRequest has no node.id (want TYPE~IP~POD.NAMESPACE~DOMAIN)")
	}
	proxy, err := proxypush.ParseNodeID(node.GetId())
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	proxy.Metadata = nodeMetadata(node)
	proxy.Locality = localityString(node.GetLocality())
	proxy.PeerIP = peerIP(con.peer)
	if s.opts.Authenticate != nil {
		id, err := s.opts.Authenticate(ctx)
		if err != nil {
			s.log.Warn("stream not authenticated; its proxy has no verified identity", "peer", con.peer, "node", proxy.ID, "error", err)
		}
		proxy.Identity = id
	}
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

// pushConnection sends req's resource types to con: a full push sends every
// watched type in push order, an endpoints-only push only EDS and the NDS
// name table (a headless service's name resolves to its endpoints). The
// protocol skips the types whose resources did not change since the last
// send. Only the processing loop calls it.
func (s *Server) pushConnection(con *Connection, req *proxypush.PushRequest) error {
	types := con.watchedTypes()
	if !req.Full {
		types = slices.DeleteFunc(types, func(t string) bool { return t != xdsapi.EndpointType && t != nds.TypeURL })
	}
	version := s.nextVersion()
	for _, t := range types {
		if err := con.protocol.push(t, req, version); err != nil {
			return err
		}
	}
	return nil
}

// proxyRequest is the push request of an answer to the proxy's own request.
func proxyRequest() *proxypush.PushRequest {
	return &proxypush.PushRequest{Full: true, Reason: []proxypush.TriggerReason{proxypush.ProxyRequest}, Start: time.Now()}
}

// observeSend records the metrics of one response sent for typeURL.
func (s *Server) observeSend(typeURL string, start, sendStart, now time.Time) {
	label := typeLabel(typeURL)
	s.metrics.sendTime.Observe(now.Sub(sendStart).Seconds())
	s.metrics.pushTime.WithLabelValues(label).Observe(now.Sub(start).Seconds())
	s.metrics.pushes.WithLabelValues(label).Inc()
}

// generate runs the generator for one type, logging and counting a
// failure; ok is false when it failed (the caller skips the type).
func (s *Server) generate(con *Connection, typeURL string, names []string, req *proxypush.PushRequest) (res []*discovery.Resource, ok bool) {
	res, err := s.opts.Generator.Generate(con.proxy, typeURL, names, req)
	if err != nil {
		label := typeLabel(typeURL)
		s.metrics.generateFailures.WithLabelValues(label).Inc()
		s.log.Error("generate failed", "connection", con.id, "type", label, "error", err)
		return nil, false
	}
	return res, true
}

// peerIP is the IP of a peer address "IP:PORT" (IPv4-mapped IPv6 as
// IPv4); invalid when there is none.
func peerIP(addr string) netip.Addr {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// peerAddr is the remote address of a stream, or "" when gRPC does not know it.
func peerAddr(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}
