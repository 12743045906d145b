// Package xdsclient is the proxy's ADS client: one state-of-the-world
// AggregatedDiscoveryService stream carrying CDS and LDS (wildcard), then
// EDS and RDS for the names those reference, and SDS for the secrets the
// TLS contexts take from ADS (a Gateway's credentialName), with Envoy's
// ACK/NACK rules and reconnection with backoff.
package xdsclient

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"sync/atomic"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/straitmesh/strait/internal/proxy/stats"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// Handler applies decoded, validated resources. An error rejects the whole
// response (NACK) and must leave the previous config in place. The returned
// names are the EDS (resp. RDS) resources the new config needs.
type Handler interface {
	ApplyClusters(version string, cs []*clusterv3.Cluster) (edsNames []string, err error)
	ApplyEndpoints(version string, clas []*endpointv3.ClusterLoadAssignment) error
	ApplyListeners(version string, ls []*listenerv3.Listener) (rdsNames []string, err error)
	ApplyRoutes(version string, rcs []*routev3.RouteConfiguration) error
}

// RejectionHandler is optionally implemented by a Handler: it learns the
// names of the resources of each response it rejected, as Envoy tells every
// subscription a rejected response was for (onConfigUpdateFailed).
type RejectionHandler interface {
	Rejected(typeURL string, names []string)
}

// SecretSubscriptions are the secrets that TLS contexts take from the ADS
// stream (sds_config {ads: {}}, Istio's for a Gateway's credentialName);
// tlsconf.Provider implements it.
type SecretSubscriptions interface {
	// ADSSecrets returns the secret names to subscribe to, sorted, and a
	// channel closed when they change.
	ADSSecrets() (names []string, changed <-chan struct{})
	// ApplySecrets applies one response's secrets; an error rejects the
	// response (NACK) and keeps the secrets as they were.
	ApplySecrets(version string, secrets []*tlsv3.Secret) error
}

// Options configure a Client.
type Options struct {
	Node *corev3.Node
	// NodeOnFirstRequestOnly is the ADS config source's
	// set_node_on_first_message_only: the node goes on the first request
	// of each stream only. Unset (Envoy's default), every request carries
	// it.
	NodeOnFirstRequestOnly bool
	Dial                   func(ctx context.Context) (net.Conn, error) // connects to the management server
	Handler                Handler
	// Secrets, when set, are subscribed to on the stream as their names
	// appear (nil: no SDS on ADS).
	Secrets SecretSubscriptions
	Logger  *slog.Logger
	Stats   *stats.Store
	// Backoff bounds between reconnection attempts; defaults 500ms and 30s.
	MinBackoff, MaxBackoff time.Duration
	// ListenersAfter, when not nil, holds the LDS subscription back until
	// it is closed, as Envoy's server starts its LDS subscription only
	// once the cluster manager has initialized (the clusters of the first
	// CDS response warmed: RunHelper in source/server/server.cc), so that
	// no listener serves before the clusters its routes name have their
	// endpoints. Once it is closed, every stream subscribes LDS at once.
	ListenersAfter <-chan struct{}
}

// typeState is per-type subscription state, owned by the Run goroutine.
type typeState struct {
	typeURL  string
	version  string   // last accepted version_info
	nonce    string   // last nonce received on the current stream
	names    []string // nil = wildcard
	wildcard bool
	sent     bool // a request was sent on the current stream
	success  *atomic.Uint64
	rejected *atomic.Uint64
	attempt  *atomic.Uint64
}

// Client is an ADS client. Run owns all of its mutable state.
type Client struct {
	opts      Options
	log       *slog.Logger
	types     map[string]*typeState
	order     []string
	connected *atomic.Int64
	// ldsHeld: ListenersAfter is not closed yet (owned by Run).
	ldsHeld bool
}

// New returns a Client; call Run to start it.
func New(o Options) *Client {
	if o.MinBackoff == 0 {
		o.MinBackoff = 500 * time.Millisecond
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = 30 * time.Second
	}
	c := &Client{opts: o, log: o.Logger.With("component", "xds-client"), types: map[string]*typeState{},
		ldsHeld: o.ListenersAfter != nil}
	add := func(typeURL, prefix string, wildcard bool) {
		c.types[typeURL] = &typeState{
			typeURL:  typeURL,
			wildcard: wildcard,
			success:  o.Stats.Counter(prefix + ".update_success"),
			rejected: o.Stats.Counter(prefix + ".update_rejected"),
			attempt:  o.Stats.Counter(prefix + ".update_attempt"),
		}
		c.order = append(c.order, typeURL)
	}
	add(xdsapi.ClusterType, "cluster_manager.cds", true)
	add(xdsapi.ListenerType, "listener_manager.lds", true)
	add(xdsapi.EndpointType, "cluster_manager.eds", false)
	add(xdsapi.RouteType, "http.rds", false)
	if o.Secrets != nil {
		add(xdsapi.SecretType, "sds", false)
	}
	c.connected = o.Stats.Gauge("control_plane.connected_state")
	return c
}

// Run connects and keeps the stream up until ctx is done.
func (c *Client) Run(ctx context.Context) error {
	cc, err := grpc.NewClient("passthrough:///xds-grpc",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return c.opts.Dial(ctx) }),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(xdsapi.MaxMessageSize)),
	)
	if err != nil {
		return fmt.Errorf("xds client: %w", err)
	}
	defer cc.Close()
	client := discoveryv3.NewAggregatedDiscoveryServiceClient(cc)
	backoff := c.opts.MinBackoff
	for {
		gotResponse, err := c.runStream(ctx, client)
		c.connected.Store(0)
		if ctx.Err() != nil {
			return nil
		}
		if gotResponse {
			backoff = c.opts.MinBackoff
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		c.log.Warn("ads stream ended; reconnecting", "error", err, "in", wait)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		backoff = min(backoff*2, c.opts.MaxBackoff)
	}
}

type recvResult struct {
	resp *discoveryv3.DiscoveryResponse
	err  error
}

func (c *Client) runStream(ctx context.Context, client discoveryv3.AggregatedDiscoveryServiceClient) (gotResponse bool, _ error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := client.StreamAggregatedResources(ctx, grpc.WaitForReady(true))
	if err != nil {
		return false, err
	}
	// The stream is open: connected, before the first request is sent
	// (a management server that reads the requests sees the gauge at 1).
	c.connected.Store(1)
	s := &streamState{stream: stream, node: c.opts.Node, nodeOnce: c.opts.NodeOnFirstRequestOnly}
	for _, t := range c.types {
		t.nonce, t.sent = "", false
	}
	var secretsChanged <-chan struct{}
	if c.opts.Secrets != nil {
		c.types[xdsapi.SecretType].names, secretsChanged = c.opts.Secrets.ADSSecrets()
	}
	// Subscribe: CDS and LDS always (wildcard), EDS/RDS when we know names.
	for _, typ := range c.order {
		t := c.types[typ]
		if !t.wildcard && len(t.names) == 0 || typ == xdsapi.ListenerType && c.ldsHeld {
			continue
		}
		if err := s.send(t, nil); err != nil {
			return false, err
		}
	}
	recv := make(chan recvResult, 1)
	go func() {
		for {
			resp, err := stream.Recv()
			select {
			case recv <- recvResult{resp, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	for {
		var gate <-chan struct{}
		if c.ldsHeld {
			gate = c.opts.ListenersAfter
		}
		select {
		case <-ctx.Done():
			return gotResponse, ctx.Err()
		case <-gate:
			c.ldsHeld = false
			c.log.Info("clusters initialized; subscribing to listeners")
			if err := s.send(c.types[xdsapi.ListenerType], nil); err != nil {
				return gotResponse, err
			}
		case <-secretsChanged:
			var names []string
			names, secretsChanged = c.opts.Secrets.ADSSecrets()
			if t := c.types[xdsapi.SecretType]; len(names) > 0 && !slices.Equal(names, t.names) {
				// Never an empty list, which would mean wildcard: a secret
				// no longer named keeps its stale subscription, as EDS.
				t.names = names
				if err := s.send(t, nil); err != nil {
					return gotResponse, err
				}
			}
		case r := <-recv:
			if r.err != nil {
				return gotResponse, r.err
			}
			gotResponse = true
			if err := c.handle(s, r.resp); err != nil {
				return gotResponse, err
			}
		}
	}
}

type streamState struct {
	stream   discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient
	node     *corev3.Node // sent on the next request; nil once sent, with nodeOnce
	nodeOnce bool         // set_node_on_first_message_only
}

func (s *streamState) send(t *typeState, detail error) error {
	req := &discoveryv3.DiscoveryRequest{
		VersionInfo:   t.version,
		ResponseNonce: t.nonce,
		TypeUrl:       t.typeURL,
		ResourceNames: t.names,
	}
	if s.node != nil {
		req.Node = s.node
		if s.nodeOnce {
			s.node = nil // only the first request of a stream carries the node
		}
	}
	if detail != nil {
		req.ErrorDetail = &statuspb.Status{Code: int32(codes.InvalidArgument), Message: detail.Error()}
	}
	t.sent = true
	return s.stream.Send(req)
}

// handle applies one response and ACKs or NACKs it.
func (c *Client) handle(s *streamState, resp *discoveryv3.DiscoveryResponse) error {
	t := c.types[resp.GetTypeUrl()]
	if t == nil {
		c.log.Warn("ignoring response of unsubscribed type", "type", resp.GetTypeUrl())
		return nil
	}
	t.nonce = resp.GetNonce()
	t.attempt.Add(1)
	deps, err := c.apply(resp)
	if err != nil {
		t.rejected.Add(1)
		c.log.Warn("rejecting xds update", "type", shortType(t.typeURL), "version", resp.GetVersionInfo(), "error", err)
		if rh, ok := c.opts.Handler.(RejectionHandler); ok {
			rh.Rejected(t.typeURL, resourceNames(t.typeURL, resp.GetResources()))
		}
		return s.send(t, err)
	}
	t.version = resp.GetVersionInfo()
	t.success.Add(1)
	c.log.Debug("applied xds update", "type", shortType(t.typeURL), "version", t.version, "resources", len(resp.GetResources()))
	if err := s.send(t, nil); err != nil {
		return err
	}
	if deps == nil {
		return nil
	}
	dt := c.types[deps.typeURL]
	if slices.Equal(dt.names, deps.names) && (dt.sent || len(deps.names) == 0) {
		return nil
	}
	if len(deps.names) == 0 {
		// An empty list would mean wildcard; keep the stale subscription.
		return nil
	}
	dt.names = deps.names
	return s.send(dt, nil)
}

type dependents struct {
	typeURL string
	names   []string
}

func (c *Client) apply(resp *discoveryv3.DiscoveryResponse) (*dependents, error) {
	ms, err := decode(resp.GetTypeUrl(), resp.GetResources())
	if err != nil {
		return nil, err
	}
	h, v := c.opts.Handler, resp.GetVersionInfo()
	switch resp.GetTypeUrl() {
	case xdsapi.ClusterType:
		names, err := h.ApplyClusters(v, as[*clusterv3.Cluster](ms))
		if err != nil {
			return nil, err
		}
		return &dependents{xdsapi.EndpointType, names}, nil
	case xdsapi.ListenerType:
		names, err := h.ApplyListeners(v, as[*listenerv3.Listener](ms))
		if err != nil {
			return nil, err
		}
		return &dependents{xdsapi.RouteType, names}, nil
	case xdsapi.EndpointType:
		return nil, h.ApplyEndpoints(v, as[*endpointv3.ClusterLoadAssignment](ms))
	case xdsapi.RouteType:
		return nil, h.ApplyRoutes(v, as[*routev3.RouteConfiguration](ms))
	case xdsapi.SecretType:
		return nil, c.opts.Secrets.ApplySecrets(v, as[*tlsv3.Secret](ms))
	}
	return nil, errors.New("unreachable")
}
