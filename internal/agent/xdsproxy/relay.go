package xdsproxy

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"slices"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

type (
	downstreamStream = discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesServer
	upstreamStream   = discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient
)

// relay is one downstream ADS stream and the upstream stream(s) serving it.
//
// Ownership: every field is touched only by the goroutine running run,
// except that the upstream receive goroutine (recvUpstream) reads its own
// upstream and writes to down — and only one such goroutine exists at a
// time, because a new upstream is opened only after the previous one's
// receive goroutine has reported its end on upEnded.
type relay struct {
	p    *Proxy
	log  *slog.Logger
	down downstreamStream

	// node is the first node the proxy sent (Envoy sends it only on the
	// first request); it goes on the first request to every new upstream.
	node *corev3.Node
	// last holds the newest request per type URL, replayed in first-seen
	// order (CDS before EDS before LDS, as Envoy subscribes) on reconnect.
	last  map[string]*discoveryv3.DiscoveryRequest
	order []string

	up         upstreamStream // nil while disconnected
	upCancel   context.CancelFunc
	generation int  // of the current upstream, to drop stale reports
	connecting bool // an open is in flight
	delay      time.Duration

	// agentTypes are the agent's subscriptions (Options.Subscriptions) in
	// sorted order; accepted holds the version last ACKed for each, sent
	// again on a new upstream stream.
	agentTypes []string
	accepted   map[string]string
	// agentResps carries the responses of the agent's types from the
	// receive goroutine to run, which handles and ACKs them (a stream
	// takes one sender at a time).
	agentResps chan agentResponse
}

type agentResponse struct {
	generation int
	resp       *discoveryv3.DiscoveryResponse
}

type openResult struct {
	generation int
	stream     upstreamStream
	cancel     context.CancelFunc
	err        error
}

type upstreamEnd struct {
	generation int
	err        error
	// downstream is set when the end was a failed send to the proxy.
	downstream bool
	// gotResponse says the stream delivered at least one response, which
	// resets the backoff.
	gotResponse bool
}

func (p *Proxy) relay(down downstreamStream) error {
	p.metrics.downstreamActive.Add(1)
	p.metrics.downstreamTotal.Add(1)
	defer p.metrics.downstreamActive.Add(-1)

	ctx := down.Context()
	r := &relay{
		p:          p,
		log:        p.log,
		down:       down,
		last:       map[string]*discoveryv3.DiscoveryRequest{},
		delay:      p.opts.BackoffBase,
		agentTypes: slices.Sorted(maps.Keys(p.opts.Subscriptions)),
		accepted:   map[string]string{},
		agentResps: make(chan agentResponse),
	}
	reqs := make(chan *discoveryv3.DiscoveryRequest)
	downEnded := make(chan error, 1)
	go func() {
		for {
			req, err := down.Recv()
			if err != nil {
				downEnded <- err
				return
			}
			select {
			case reqs <- req:
			case <-ctx.Done():
				return
			}
		}
	}()
	err := r.run(ctx, reqs, downEnded)
	r.closeUpstream()
	return err
}

func (r *relay) run(ctx context.Context, reqs <-chan *discoveryv3.DiscoveryRequest, downEnded <-chan error) error {
	opened := make(chan openResult, 1)
	upEnded := make(chan upstreamEnd, 1)
	var retry <-chan time.Time

	for {
		select {
		case <-ctx.Done():
			return ctx.Err()

		case err := <-downEnded:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err

		case req := <-reqs:
			if r.p.opts.Subscriptions[req.GetTypeUrl()] != nil {
				// The agent's type: its responses would never reach the proxy.
				r.log.Warn("proxy asked for a type the agent subscribes to itself; ignored", "type", req.GetTypeUrl())
				continue
			}
			r.record(req)
			switch {
			case r.up != nil:
				// A failed Send means the stream is gone; its receive
				// goroutine reports the end and we reconnect from there.
				if err := r.up.Send(req); err == nil {
					r.p.metrics.requestsForwarded.Add(1)
				}
			case !r.connecting && retry == nil:
				r.open(ctx, opened)
			}

		case res := <-opened:
			r.connecting = false
			if res.generation != r.generation {
				if res.cancel != nil {
					res.cancel()
				}
				continue
			}
			if res.err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				r.p.metrics.upstreamFailures.Add(1)
				r.log.Warn("open upstream xds stream", "upstream", r.p.opts.UpstreamAddress, "error", res.err, "retry_in", r.delay)
				retry = r.backoff()
				continue
			}
			r.up, r.upCancel = res.stream, res.cancel
			r.p.metrics.upstreamConnects.Add(1)
			go r.recvUpstream(res.generation, res.stream, upEnded)
			r.replay()

		case ar := <-r.agentResps:
			if ar.generation == r.generation && r.up != nil {
				r.handleAgentResponse(ar.resp)
			}

		case end := <-upEnded:
			if end.generation != r.generation {
				continue
			}
			if end.downstream {
				return end.err
			}
			r.closeUpstream()
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if end.gotResponse {
				r.delay = r.p.opts.BackoffBase
			}
			r.p.metrics.upstreamFailures.Add(1)
			r.log.Warn("upstream xds stream ended; reconnecting", "upstream", r.p.opts.UpstreamAddress, "error", end.err, "retry_in", r.delay)
			retry = r.backoff()

		case <-retry:
			retry = nil
			r.open(ctx, opened)
		}
	}
}

// record keeps the proxy's newest request per type for replay.
func (r *relay) record(req *discoveryv3.DiscoveryRequest) {
	r.p.observeRequest(req)
	if r.node == nil && req.GetNode() != nil {
		r.node = req.GetNode()
	}
	t := req.GetTypeUrl()
	if _, seen := r.last[t]; !seen {
		r.order = append(r.order, t)
	}
	r.last[t] = req
}

// open starts opening a new upstream stream; the result arrives on opened.
// WaitForReady makes the call wait (with the ClientConn's own backoff)
// until the control plane is reachable.
func (r *relay) open(ctx context.Context, opened chan<- openResult) {
	r.generation++
	r.connecting = true
	gen := r.generation
	go func() {
		upCtx, cancel := context.WithCancel(ctx)
		s, err := r.p.client.StreamAggregatedResources(upCtx, grpc.WaitForReady(true))
		if err != nil {
			cancel()
			opened <- openResult{generation: gen, err: err}
			return
		}
		opened <- openResult{generation: gen, stream: s, cancel: cancel}
	}()
}

// replay re-sends the newest request of every type to a fresh upstream:
// versions are kept (so an unchanged control plane can skip the resend),
// the old stream's nonce and error are dropped, and the node goes on the
// first message.
func (r *relay) replay() {
	for i, t := range r.order {
		req := proto.Clone(r.last[t]).(*discoveryv3.DiscoveryRequest)
		req.ResponseNonce = ""
		req.ErrorDetail = nil
		req.Node = nil
		if i == 0 {
			req.Node = r.node
		}
		if err := r.up.Send(req); err != nil {
			return // the receive goroutine reports the end
		}
		r.p.metrics.requestsForwarded.Add(1)
	}
	for i, t := range r.agentTypes {
		req := &discoveryv3.DiscoveryRequest{TypeUrl: t, VersionInfo: r.accepted[t]}
		if i == 0 && len(r.order) == 0 {
			req.Node = r.node
		}
		if err := r.up.Send(req); err != nil {
			return
		}
	}
	if len(r.order) > 0 {
		r.log.Info("upstream xds stream open; subscriptions replayed", "upstream", r.p.opts.UpstreamAddress, "types", len(r.order), "agent_types", len(r.agentTypes))
	}
}

// handleAgentResponse gives a response of one of the agent's types to its
// handler and ACKs it, or NACKs it with the handler's error, keeping the
// version last accepted.
func (r *relay) handleAgentResponse(resp *discoveryv3.DiscoveryResponse) {
	t := resp.GetTypeUrl()
	req := &discoveryv3.DiscoveryRequest{TypeUrl: t, ResponseNonce: resp.GetNonce()}
	if err := r.p.opts.Subscriptions[t](resp); err != nil {
		r.p.metrics.nacks.Add(1)
		r.log.Warn("agent subscription rejected a response", "type", t, "version", resp.GetVersionInfo(), "error", err)
		req.ErrorDetail = &status.Status{Code: int32(codes.InvalidArgument), Message: err.Error()}
	} else {
		r.accepted[t] = resp.GetVersionInfo()
	}
	req.VersionInfo = r.accepted[t]
	_ = r.up.Send(req) // a failed send: the receive goroutine reports the end
}

// recvUpstream forwards responses to the proxy unchanged until either
// side fails, then reports once on ended.
func (r *relay) recvUpstream(gen int, up upstreamStream, ended chan<- upstreamEnd) {
	got := false
	for {
		resp, err := up.Recv()
		if err != nil {
			ended <- upstreamEnd{generation: gen, err: err, gotResponse: got}
			return
		}
		got = true
		if r.p.opts.Subscriptions[resp.GetTypeUrl()] != nil {
			select {
			case r.agentResps <- agentResponse{generation: gen, resp: resp}:
			case <-up.Context().Done():
				ended <- upstreamEnd{generation: gen, err: up.Context().Err(), gotResponse: got}
				return
			}
			continue
		}
		if err := r.down.Send(resp); err != nil {
			ended <- upstreamEnd{generation: gen, err: err, downstream: true, gotResponse: got}
			return
		}
		r.p.metrics.responsesForwarded.Add(1)
		r.p.memory.Changed()
	}
}

func (r *relay) closeUpstream() {
	if r.upCancel != nil {
		r.upCancel()
	}
	r.up, r.upCancel = nil, nil
}

// backoff returns a timer for the next attempt and doubles the delay.
func (r *relay) backoff() <-chan time.Time {
	d := r.delay
	r.delay = min(2*r.delay, r.p.opts.BackoffMax)
	return time.After(d)
}
