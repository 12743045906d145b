// Package xdsproxy relays the proxy's ADS stream from the agent's Unix
// socket to the control plane. Each downstream stream gets its own upstream
// stream; when the upstream breaks it is re-opened with backoff and the
// last request of every type is replayed, so the downstream stream (and
// the proxy's subscriptions) survive a control-plane restart. The agent's
// own subscriptions (Options.Subscriptions: the DNS proxy's name table)
// ride on the same upstream stream.
package xdsproxy

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/straitmesh/strait/internal/memrelease"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// Options configure a Proxy.
type Options struct {
	// UpstreamAddress is the control plane's host:port (ProxyConfig.discoveryAddress).
	UpstreamAddress string
	// BackoffBase and BackoffMax bound the delay between upstream stream
	// attempts (defaults 100ms and 15s); the delay doubles per failure and
	// resets once a response arrives.
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// DialOptions are appended to the defaults (plaintext, backoff, message size).
	DialOptions []grpc.DialOption
	Logger      *slog.Logger
	// Subscriptions are the agent's own resource types, by type URL, as
	// pilot-agent subscribes to the NDS name table on the proxy's stream
	// (pkg/istio-agent/xds_proxy.go): on every upstream stream the relay
	// opens it asks for each type after replaying the proxy's requests,
	// hands each response of the type to its handler instead of the proxy,
	// and ACKs it, or NACKs it with the handler's error. Handlers run on
	// the stream's relay goroutine, one at a time; they must not block.
	Subscriptions map[string]func(*discoveryv3.DiscoveryResponse) error
}

// Proxy is the xDS relay. Its exported methods are safe for concurrent use.
type Proxy struct {
	// Set at creation, read-only.
	opts     Options
	log      *slog.Logger
	upstream *grpc.ClientConn
	client   discoveryv3.AggregatedDiscoveryServiceClient
	server   *grpc.Server

	// Health: set once the proxy ACKs a CDS / LDS response, never cleared.
	cdsAcked atomic.Bool
	ldsAcked atomic.Bool

	metrics metrics
	// memory returns the heap's free pages (gRPC's buffers of the largest
	// responses relayed) once the responses have stopped coming.
	memory *memrelease.Releaser
}

// New creates the relay. It does not connect until a downstream stream
// sends its first request.
func New(opts Options) (*Proxy, error) {
	if opts.UpstreamAddress == "" {
		return nil, errors.New("xdsproxy: empty upstream address")
	}
	if opts.BackoffBase <= 0 {
		opts.BackoffBase = 100 * time.Millisecond
	}
	if opts.BackoffMax <= 0 {
		opts.BackoffMax = 15 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	dial := append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: backoff.Config{
				BaseDelay:  opts.BackoffBase,
				Multiplier: 1.6,
				Jitter:     0.2,
				MaxDelay:   opts.BackoffMax,
			},
			MinConnectTimeout: 5 * time.Second,
		}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(xdsapi.MaxMessageSize), grpc.MaxCallSendMsgSize(xdsapi.MaxMessageSize)),
	}, opts.DialOptions...)
	cc, err := grpc.NewClient(opts.UpstreamAddress, dial...)
	if err != nil {
		return nil, fmt.Errorf("xdsproxy: upstream %s: %w", opts.UpstreamAddress, err)
	}
	p := &Proxy{
		opts:     opts,
		log:      opts.Logger.With("component", "xdsproxy"),
		upstream: cc,
		client:   discoveryv3.NewAggregatedDiscoveryServiceClient(cc),
		server:   grpc.NewServer(grpc.MaxRecvMsgSize(xdsapi.MaxMessageSize), grpc.MaxSendMsgSize(xdsapi.MaxMessageSize)),
		memory:   memrelease.New(),
	}
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(p.server, &adsServer{p: p})
	return p, nil
}

// ListenUnix listens on path, replacing a stale socket left by an earlier
// run and creating the directory.
func ListenUnix(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("xds socket: %w", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("xds socket: remove stale %s: %w", path, err)
	}
	lis, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("xds socket: %w", err)
	}
	return lis, nil
}

// Serve accepts downstream (proxy) connections on lis until Stop.
func (p *Proxy) Serve(lis net.Listener) error {
	p.log.Info("serving xds", "socket", lis.Addr().String(), "upstream", p.opts.UpstreamAddress)
	return p.server.Serve(lis)
}

// Stop closes the listener, every downstream and upstream stream, and the
// upstream connection. ADS streams never end on their own, so this does
// not wait for them.
func (p *Proxy) Stop() {
	p.server.Stop()
	p.upstream.Close()
	p.memory.Stop()
}

// Synced reports whether the proxy has ACKed a CDS and an LDS response
// at least once (since the agent started).
func (p *Proxy) Synced() (cds, lds bool) { return p.cdsAcked.Load(), p.ldsAcked.Load() }

// observeRequest updates health from a downstream request. An ACK carries
// the nonce of the response it answers and no error_detail.
func (p *Proxy) observeRequest(req *discoveryv3.DiscoveryRequest) {
	if req.GetResponseNonce() == "" || req.GetErrorDetail() != nil {
		if req.GetErrorDetail() != nil {
			p.metrics.nacks.Add(1)
		}
		return
	}
	switch req.GetTypeUrl() {
	case xdsapi.ClusterType:
		p.cdsAcked.Store(true)
	case xdsapi.ListenerType:
		p.ldsAcked.Store(true)
	}
}

// adsServer is the gRPC face of the Proxy. Delta xDS is not relayed yet:
// the embedded Unimplemented server answers it with codes.Unimplemented.
type adsServer struct {
	discoveryv3.UnimplementedAggregatedDiscoveryServiceServer
	p *Proxy
}

func (s *adsServer) StreamAggregatedResources(down discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesServer) error {
	return s.p.relay(down)
}

var _ discoveryv3.AggregatedDiscoveryServiceServer = (*adsServer)(nil)
