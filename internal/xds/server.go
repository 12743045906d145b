// Package xds is Strait's xDS server: Envoy v3 aggregated discovery over
// gRPC, state of the world and delta, with a push pipeline in front of it:
//
//	ConfigUpdate(PushRequest) → debounce → PushQueue (one entry per
//	connection) → bounded push workers → per-connection push → Generator
//	→ DiscoveryResponse, ACK/NACK on the same stream.
//
// The server knows nothing about registries or how resources are built; it
// depends on the Generator interface, two optional generator features
// (PushFilter, EndpointsNarrower) and two optional hooks (ResolveProxy,
// Authorize), all supplied by main.
//
// The parts: Server and its push pipeline (debounce, pushQueue); the
// stream lifecycle both protocols share (receiveLoop, processLoop); state
// of the world (StreamAggregatedResources, with partial EDS in
// pushEndpoints) and delta xDS (DeltaAggregatedResources), each with its
// own stream type; Connection, what a connection holds whatever its
// protocol; and /debug (RegisterDebugHandlers).
package xds

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/straitmesh/strait/internal/proxypush"
)

// Defaults of Options, matching Istio's environment variables.
const (
	DefaultDebounceAfter = 100 * time.Millisecond // PILOT_DEBOUNCE_AFTER
	DefaultDebounceMax   = 10 * time.Second       // PILOT_DEBOUNCE_MAX
)

// DefaultPushThrottle is the default number of concurrent pushes
// (PILOT_PUSH_THROTTLE): ten per core, at least ten.
func DefaultPushThrottle() int { return max(10, 10*runtime.NumCPU()) }

// Options configure a Server. main fills them from flags and the
// environment; the package reads no environment itself.
type Options struct {
	// Generator builds resources; required.
	Generator Generator
	// ResolveProxy, if set, is called once per connection after the node id
	// was parsed, to enrich or validate the proxy (in file mode: find the
	// WorkloadEntry with the proxy's IP). An error rejects the stream with
	// codes.FailedPrecondition.
	ResolveProxy func(*proxypush.Proxy) error
	// Authenticate, if set, is called with a stream's context when it
	// opens, before ResolveProxy: who the stream authenticated as (the
	// proxy's Identity), nil when it did not. An error is logged and
	// leaves the identity unknown; it does not reject the stream.
	Authenticate func(context.Context) (*proxypush.Identity, error)
	// Authorize, if set, is called after ResolveProxy; an error rejects the
	// stream with codes.PermissionDenied.
	Authorize func(*proxypush.Proxy) error
	// PushFilter, if set, decides per connection whether a debounced push
	// concerns it (dependency tracking, Sidecar scoping); nil pushes every
	// request to every connection.
	PushFilter PushFilter
	// EndpointsNarrower, if set, names the load assignments an
	// endpoints-only push may have changed, so that a state-of-the-world
	// EDS push generates only those; nil generates every watched one.
	// Strait's generator implements both optional features: main passes it
	// as Generator, PushFilter and EndpointsNarrower.
	EndpointsNarrower EndpointsNarrower

	// DebounceAfter is the quiet period (PILOT_DEBOUNCE_AFTER); 0 means
	// DefaultDebounceAfter.
	DebounceAfter time.Duration
	// DebounceMax caps the debounce wait (PILOT_DEBOUNCE_MAX); 0 means
	// DefaultDebounceMax.
	DebounceMax time.Duration
	// SkipEDSDebounce lets endpoint-only requests bypass debounce; set it
	// when PILOT_ENABLE_EDS_DEBOUNCE=false. The zero value debounces them.
	SkipEDSDebounce bool
	// EDSLeadingEdge pushes an endpoint-only request (Full=false) at once,
	// without waiting for DebounceAfter, when the debouncer is idle:
	// nothing is pending and no request of any kind arrived during the
	// last DebounceAfter. The requests that follow within DebounceAfter
	// are debounced as usual (merged, capped by DebounceMax), so a burst
	// costs one extra push while an isolated endpoints change converges
	// DebounceAfter sooner. Full requests are always debounced, and
	// SkipEDSDebounce, when set, takes precedence. The zero value
	// debounces every request.
	EDSLeadingEdge bool
	// PushThrottle bounds concurrent pushes (PILOT_PUSH_THROTTLE); 0 means
	// DefaultPushThrottle().
	PushThrottle int

	// Registry receives the server's metrics; nil means they are kept but
	// not registered anywhere.
	Registry prometheus.Registerer
	// Logger is the server's logger; nil discards logs.
	Logger *slog.Logger
}

// Validate reports the first invalid option.
func (o Options) Validate() error {
	if o.Generator == nil {
		return errors.New("xds options: Generator is required")
	}
	if o.DebounceAfter < 0 {
		return fmt.Errorf("xds options: DebounceAfter %v is negative", o.DebounceAfter)
	}
	if o.DebounceMax < 0 {
		return fmt.Errorf("xds options: DebounceMax %v is negative", o.DebounceMax)
	}
	if o.PushThrottle < 0 {
		return fmt.Errorf("xds options: PushThrottle %d is negative (want a positive number of concurrent pushes)", o.PushThrottle)
	}
	return nil
}

func (o Options) withDefaults() Options {
	if o.DebounceAfter == 0 {
		o.DebounceAfter = DefaultDebounceAfter
	}
	if o.DebounceMax == 0 {
		o.DebounceMax = DefaultDebounceMax
	}
	if o.PushThrottle == 0 {
		o.PushThrottle = DefaultPushThrottle()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Server is the ADS server. Create it with New, register it on a
// grpc.Server with Register, and run its push pipeline with Run.
type Server struct {
	discovery.UnimplementedAggregatedDiscoveryServiceServer

	// Set by New, read-only afterwards.
	opts    Options
	log     *slog.Logger
	metrics *metrics
	// filter and narrower are the optional features (Options.PushFilter,
	// Options.EndpointsNarrower); nil when not set. Nothing else looks at
	// the options for them.
	filter   PushFilter
	narrower EndpointsNarrower
	queue    *PushQueue
	pushCh   chan *proxypush.PushRequest
	done     chan struct{} // closed when Run returns
	instance string        // random per process, prefixes nonces

	versions atomic.Uint64
	nonces   atomic.Uint64
	conIDs   atomic.Uint64
	running  atomic.Bool

	// mu guards clients, the connections that passed initConnection, by
	// connection id.
	mu      sync.RWMutex
	clients map[string]*Connection
}

// New returns a Server. It does not start anything.
func New(opts Options) (*Server, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	m, err := newMetrics(opts.Registry)
	if err != nil {
		return nil, err
	}
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return &Server{
		opts:     opts,
		filter:   opts.PushFilter,
		narrower: opts.EndpointsNarrower,
		log:      opts.Logger.With("component", "xds"),
		metrics:  m,
		queue:    NewPushQueue(),
		pushCh:   make(chan *proxypush.PushRequest, 100),
		done:     make(chan struct{}),
		instance: hex.EncodeToString(b[:]),
		clients:  make(map[string]*Connection),
	}, nil
}

// Register adds the ADS service to g.
func (s *Server) Register(g *grpc.Server) {
	discovery.RegisterAggregatedDiscoveryServiceServer(g, s)
}

// Run runs the debounce goroutine and the push workers until ctx is done,
// then waits for in-flight pushes to be handed over and returns ctx's error.
// Call it once.
func (s *Server) Run(ctx context.Context) error {
	if !s.running.CompareAndSwap(false, true) {
		return errors.New("xds server: Run called twice")
	}
	defer close(s.done)
	var wg sync.WaitGroup
	wg.Go(func() {
		debounce(ctx, s.pushCh, debounceOptions{
			after:          s.opts.DebounceAfter,
			max:            s.opts.DebounceMax,
			skipEDS:        s.opts.SkipEDSDebounce,
			edsLeadingEdge: s.opts.EDSLeadingEdge,
		}, s.pushAll)
	})
	wg.Go(func() { s.sendPushes(ctx) })
	<-ctx.Done()
	s.queue.ShutDown()
	wg.Wait()
	return ctx.Err()
}

// ConfigUpdate asks for a push to every connected proxy. It only hands req
// to the debounce goroutine. It does not modify req; a zero req.Start is
// taken as now. After Run has returned, requests are dropped.
func (s *Server) ConfigUpdate(req *proxypush.PushRequest) {
	if req == nil {
		return
	}
	if req.Start.IsZero() {
		r := *req
		r.Start = time.Now()
		req = &r
	}
	select {
	case s.pushCh <- req:
	case <-s.done:
	}
}

// pushAll puts req on the push queue for every connection. It runs on the
// debounce goroutine.
func (s *Server) pushAll(req *proxypush.PushRequest, events int, waited time.Duration) {
	if events > 1 || waited > 0 {
		s.metrics.debounceTime.Observe(waited.Seconds())
	}
	s.mu.RLock()
	cons := make([]*Connection, 0, len(s.clients))
	for _, c := range s.clients {
		cons = append(cons, c)
	}
	s.mu.RUnlock()
	queued := 0
	for _, c := range cons {
		r := req
		if s.filter != nil {
			var ok bool
			if r, ok = s.filter.NeedsPush(c.proxy, req); !ok {
				continue
			}
		}
		s.queue.Enqueue(c, r)
		queued++
	}
	s.metrics.pushTriggers.WithLabelValues(pushKind(req)).Inc()
	s.log.Debug("push", "full", req.Full, "reasons", req.Reason, "merged_events", events,
		"connections", len(cons), "queued", queued)
}

// PushFilter narrows a push to the connections it concerns.
type PushFilter interface {
	// NeedsPush returns the request to push to proxy (req itself, or a
	// copy with less or more to do), or false when the proxy does not
	// depend on the change. It must not modify req, and must be fast: it
	// runs for every connection on the debounce goroutine.
	NeedsPush(proxy *proxypush.Proxy, req *proxypush.PushRequest) (*proxypush.PushRequest, bool)
}

// PushFilterFunc adapts a function to a PushFilter.
type PushFilterFunc func(proxy *proxypush.Proxy, req *proxypush.PushRequest) (*proxypush.PushRequest, bool)

// NeedsPush calls f.
func (f PushFilterFunc) NeedsPush(proxy *proxypush.Proxy, req *proxypush.PushRequest) (*proxypush.PushRequest, bool) {
	return f(proxy, req)
}

var _ PushFilter = PushFilterFunc(nil)

func pushKind(req *proxypush.PushRequest) string {
	if req.Full {
		return "full"
	}
	return "eds"
}

// sendPushes is Istio's doSendPushes (pilot/pkg/xds/discovery.go): it hands each dequeued push to its
// connection's processing loop, with at most PushThrottle in flight.
func (s *Server) sendPushes(ctx context.Context) {
	sem := make(chan struct{}, s.opts.PushThrottle)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		con, req, queued, shutdown := s.queue.Dequeue()
		if shutdown {
			return
		}
		s.metrics.queueTime.Observe(queued.Seconds())
		wg.Go(func() {
			defer func() { <-sem }()
			defer s.queue.MarkDone(con)
			ev := &pushEvent{req: req, done: make(chan struct{})}
			select {
			case con.pushCh <- ev:
			case <-con.stop:
				return
			case <-ctx.Done():
				return
			}
			select {
			case <-ev.done:
			case <-con.stop:
			case <-ctx.Done():
			}
		})
	}
}

// nextVersion returns the version of a new push: a decimal counter that
// increases with every push of this server process.
func (s *Server) nextVersion() string {
	return strconv.FormatUint(s.versions.Add(1), 10)
}

// nextNonce returns a nonce unique across pushes and server processes.
func (s *Server) nextNonce() string {
	return s.instance + "-" + strconv.FormatUint(s.nonces.Add(1), 10)
}
