// Package proxy assembles strait-proxy, the data plane: from a bootstrap
// (package bootstrap) it builds the cluster manager, the listener manager
// (whose filter chains run the HTTP connection manager or tcp_proxy), the
// SDS secret provider, the ADS client and the admin endpoints, and owns
// what joins them: the applied xDS resources, the start-up order (clusters
// warm before listeners are asked for; ready once the listeners warm,
// startup.go) and telling the config dump (package configdump) of each
// applied update.
package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/straitmesh/strait/internal/memrelease"
	"github.com/straitmesh/strait/internal/proxy/accesslog"
	"github.com/straitmesh/strait/internal/proxy/admin"
	"github.com/straitmesh/strait/internal/proxy/bootstrap"
	"github.com/straitmesh/strait/internal/proxy/cluster"
	"github.com/straitmesh/strait/internal/proxy/configdump"
	"github.com/straitmesh/strait/internal/proxy/filters/http/registry"
	"github.com/straitmesh/strait/internal/proxy/hcm"
	"github.com/straitmesh/strait/internal/proxy/listener"
	"github.com/straitmesh/strait/internal/proxy/route"
	"github.com/straitmesh/strait/internal/proxy/stats"
	"github.com/straitmesh/strait/internal/proxy/tlsconf"
	"github.com/straitmesh/strait/internal/proxy/tracing"
	"github.com/straitmesh/strait/internal/proxy/xdsclient"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// netipZero is the original destination of a connection the proxy opens
// for itself (the xDS client's, a tracer's): it has none.
var netipZero netip.AddrPort

// Options configure a Proxy.
type Options struct {
	Bootstrap *bootstrapv3.Bootstrap
	// Concurrency is the number of accept workers per listener (>= 1).
	Concurrency int
	Logger      *slog.Logger
	// AdminAddress overrides the bootstrap's admin address (tests use :0).
	AdminAddress string
	// OriginalDst overrides SO_ORIGINAL_DST lookup (tests).
	OriginalDst listener.OriginalDstFunc
	// HTTPCodec selects the HTTP/1.1 codec (default hcm.CodecStrait).
	HTTPCodec hcm.Codec
	// XDSBackoff is the minimum ADS reconnect backoff (tests shorten it).
	XDSBackoff time.Duration
	// DrainTime is how long Run drains once its context ends (SIGTERM)
	// before it exits (--drain-time-s); 0 exits at once.
	DrainTime time.Duration
}

// Proxy is one running data plane.
type Proxy struct {
	// Set at creation, read-only.
	opts      Options
	log       *slog.Logger
	Stats     *stats.Store
	Clusters  *cluster.Manager
	Listeners *listener.Manager
	Routes    *route.Store
	http      *hcm.Server
	secrets   *tlsconf.Provider  // SDS secrets of TLS transport sockets
	logs      *accesslog.Files   // access log files of the filters
	tracers   *tracing.Reporters // span reporters of the HCMs' tracing
	hasADS    bool

	// dump builds /config_dump; it is told of every applied update, for
	// each resource's last_updated.
	dump *configdump.Dumper
	// memory returns the heap's free pages to the OS once the
	// configuration has settled.
	memory *memrelease.Releaser

	// init is the start-up and the server state: readiness, draining
	// and Envoy's server.state gauge.
	init *startup

	drainMu sync.Mutex // guards drainSeq, drainClosed and drainStop
	// drainSeq: an admin graceful drain started; drainStop stops its
	// listeners at its end; drainClosed: Close ran.
	drainSeq, drainClosed bool
	drainStop             *time.Timer

	quit     chan struct{} // closed by Quit
	quitOnce sync.Once

	admin  *admin.Server
	cancel context.CancelFunc
	done   chan struct{}
}

// New builds a proxy from its bootstrap and binds its static listeners.
func New(o Options) (*Proxy, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Concurrency < 1 {
		o.Concurrency = 1
	}
	started := time.Now() // the bootstrap's and static resources' last_updated
	b := o.Bootstrap
	st := stats.New()
	p := &Proxy{opts: o, log: o.Logger.With("component", "proxy"), Stats: st, Routes: route.NewStoreWith(registry.Default()), done: make(chan struct{}), quit: make(chan struct{}),
		memory: memrelease.New()}
	cdsTimeout, err := xdsclient.InitialFetchTimeout(b.GetDynamicResources().GetCdsConfig())
	if err != nil {
		return nil, fmt.Errorf("bootstrap dynamic_resources.cds_config: %w", err)
	}
	ldsTimeout, err := xdsclient.InitialFetchTimeout(b.GetDynamicResources().GetLdsConfig())
	if err != nil {
		return nil, fmt.Errorf("bootstrap dynamic_resources.lds_config: %w", err)
	}
	// Istio's metadata exchange tells peers who this node is (its id and
	// workload metadata), on inbound chains and outbound clusters.
	local, err := listener.NewLocal(b.GetNode())
	if err != nil {
		return nil, fmt.Errorf("bootstrap node metadata: %w", err)
	}
	p.Clusters = cluster.NewManager(o.Logger, st)
	p.Clusters.SetExchangeFrame(local.Frame)
	// A Gateway credential's secret comes on the ADS stream (sds_config
	// {ads: {}}), which the ADS client subscribes to (Start).
	p.secrets = tlsconf.NewProvider(tlsconf.ProviderOptions{Node: b.GetNode(), Logger: o.Logger, Dial: p.dialCluster,
		ADS: b.GetDynamicResources().GetAdsConfig() != nil})
	p.Clusters.SetSecrets(p.secrets)
	p.http = hcm.NewServer(hcm.Options{Logger: o.Logger, Clusters: p.Clusters, Codec: o.HTTPCodec})
	p.logs = accesslog.NewFiles(accesslog.FilesOptions{Logger: o.Logger})
	p.tracers = tracing.NewReporters(tracing.ReportersOptions{Logger: o.Logger, Dial: p.dialCluster})
	p.Listeners = listener.NewManager(listener.Options{
		Logger: o.Logger, Stats: st, Routes: p.Routes, Clusters: p.Clusters, HTTP: p.http,
		Workers: o.Concurrency, OriginalDst: o.OriginalDst, DrainTime: o.DrainTime, Secrets: p.secrets,
		AccessLogs: p.logs, Local: local, Tracing: p.tracers,
		// With ADS, no listener accepts before the start-up is done
		// (startup.go).
		Held: b.GetDynamicResources().GetAdsConfig() != nil,
	})
	p.init = newStartup(p.log, p.Clusters, p.Listeners, cdsTimeout, ldsTimeout,
		st.Gauge("server.state"), st.Gauge("listener_manager.workers_started"))
	p.Clusters.OnWarmed(p.init.check)
	p.Listeners.OnWarmed(p.init.check)
	if err := p.Clusters.AddStatic(b.GetStaticResources().GetClusters()); err != nil {
		p.http.Close()
		p.secrets.Close()
		p.logs.Close()
		p.tracers.Close()
		return nil, err
	}
	if err := p.Listeners.AddStatic(b.GetStaticResources().GetListeners()); err != nil {
		p.http.Close()
		p.secrets.Close()
		p.logs.Close()
		p.tracers.Close()
		return nil, err
	}
	p.dump = configdump.New(configdump.Sources{Bootstrap: b, Started: started,
		Clusters: p.Clusters, Listeners: p.Listeners, Routes: p.Routes})
	p.dump.AppliedClusters(b.GetStaticResources().GetClusters())
	p.dump.AppliedListeners(b.GetStaticResources().GetListeners())
	p.hasADS = b.GetDynamicResources().GetAdsConfig() != nil
	if !p.hasADS {
		p.init.live()
	}
	return p, nil
}

// Start starts the admin server and the ADS client, which runs until ctx
// ends or Close.
func (p *Proxy) Start(ctx context.Context) error {
	addr := p.opts.AdminAddress
	if addr == "" {
		var err error
		if addr, err = bootstrap.AdminAddress(p.opts.Bootstrap); err != nil {
			return err
		}
	}
	a, err := admin.Start(admin.Options{Address: addr, Source: p, Stats: p.Stats, Logger: p.opts.Logger})
	if err != nil {
		return fmt.Errorf("admin: %w", err)
	}
	p.admin = a
	ctx, cancel := context.WithCancel(ctx)
	p.cancel = cancel
	if !p.hasADS {
		close(p.done)
		return nil
	}
	adsCluster, err := bootstrap.ADSCluster(p.opts.Bootstrap)
	if err != nil {
		return err
	}
	c := p.Clusters.Get(adsCluster.GetName())
	client := xdsclient.New(xdsclient.Options{
		Node:                   p.opts.Bootstrap.GetNode(),
		NodeOnFirstRequestOnly: p.opts.Bootstrap.GetDynamicResources().GetAdsConfig().GetSetNodeOnFirstMessageOnly(),
		Dial: func(ctx context.Context) (net.Conn, error) {
			ep, err := c.Pick(netipZero)
			if err != nil {
				return nil, err
			}
			return c.Dial(ctx, ep)
		},
		Handler:        p,
		Secrets:        p.secrets,
		Logger:         p.opts.Logger,
		Stats:          p.Stats,
		MinBackoff:     p.opts.XDSBackoff,
		ListenersAfter: p.init.clustersInit,
	})
	p.init.start()
	go func() {
		defer close(p.done)
		if err := client.Run(ctx); err != nil {
			p.opts.Logger.Error("xds client stopped", "component", "proxy", "error", err)
		}
	}()
	return nil
}

// dialCluster connects to one endpoint of a cluster by name (the SDS
// cluster of TLS contexts, e.g. Istio's sds-grpc).
func (p *Proxy) dialCluster(ctx context.Context, name string) (net.Conn, error) {
	c := p.Clusters.Get(name)
	if c == nil {
		return nil, fmt.Errorf("cluster %q is not defined (the bootstrap must declare the SDS cluster)", name)
	}
	ep, err := c.Pick(netipZero)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: %w", name, err)
	}
	return c.Dial(ctx, ep)
}

// AdminAddr returns the bound admin address (after Start).
func (p *Proxy) AdminAddr() net.Addr { return p.admin.Addr() }

// Close stops the ADS client, admin and listeners, and closes the
// connections being served (HTTP and tcp_proxy), cutting the requests in
// flight: the end of a SIGTERM drain.
func (p *Proxy) Close() error {
	if p.cancel != nil {
		p.cancel()
		<-p.done
	}
	var errs []error
	if p.admin != nil {
		errs = append(errs, p.admin.Close())
	}
	p.init.stop()
	p.memory.Stop()
	p.drainMu.Lock()
	p.drainClosed = true
	if p.drainStop != nil {
		p.drainStop.Stop()
	}
	p.drainMu.Unlock()
	p.Listeners.EndDrains() // every connection closes, tcp_proxy ones too
	p.Listeners.Close()
	p.tracers.Close() // flushes its queues while the collectors' clusters are up
	p.Clusters.Close()
	p.secrets.Close()
	errs = append(errs, p.http.Close())
	errs = append(errs, p.logs.Close()) // after the connections that log
	return errors.Join(errs...)
}

// Run starts the proxy and blocks until ctx is done or Quit. When ctx ends
// (SIGTERM) it drains for up to DrainTime first (Drain); Quit exits at
// once. Configuration keeps arriving while draining.
func (p *Proxy) Run(ctx context.Context) error {
	if err := p.Start(context.WithoutCancel(ctx)); err != nil {
		p.Close() //nolint:contextcheck // Close shuts down on its own clock
		return err
	}
	select {
	case <-ctx.Done():
		p.Drain(p.opts.DrainTime)
	case <-p.quit:
	}
	return p.Close() //nolint:contextcheck // Close shuts down on its own clock
}

// drainPoll is how often Drain looks whether connections are left.
const drainPoll = 50 * time.Millisecond

// drainQuiet is how long Drain must see no HTTP connection before it ends
// early. A draining listener answers every request with "connection:
// close", so under steady load its count touches zero between one
// client's connection and its next; ending there refused the clients that
// still had the endpoint (pilot-agent, likewise, only looks for zero
// connections after its minimum drain duration: Istio's
// pkg/envoy/agent.go, terminate).
const drainQuiet = time.Second

// Drain drains every listener gracefully (they keep accepting, so that a
// client that has not yet seen the endpoint go still gets answers, each
// with "connection: close") and returns once no HTTP connection has been
// open, nor come and gone, for drainQuiet, after d, or on Quit, whichever
// comes first. Readiness fails from the start.
func (p *Proxy) Drain(d time.Duration) {
	p.init.setDraining()
	p.Listeners.DrainListeners(false, true)
	if d <= 0 {
		return
	}
	p.log.Info("draining", "drain_time", d)
	t := time.NewTimer(d)
	defer t.Stop()
	tick := time.NewTicker(drainPoll)
	defer tick.Stop()
	_, lastTaken := p.http.Connections()
	var quietSince time.Time // zero while connections come
	for {
		select {
		case <-t.C:
			p.log.Info("drain time over", "connections_left", p.http.Active())
			return
		case <-p.quit:
			return
		case now := <-tick.C:
			active, taken := p.http.Connections()
			switch {
			case active != 0 || taken != lastTaken: // open now, or came and went since the last poll
				quietSince = time.Time{}
				lastTaken = taken
			case quietSince.IsZero():
				quietSince = now
			case now.Sub(quietSince) >= drainQuiet:
				p.log.Info("drained: no connection left", "quiet", drainQuiet)
				return
			}
		}
	}
}

// Ready implements admin.Source.
func (p *Proxy) Ready() bool { return p.init.isReady() }

// Initializing implements admin.Source: the clusters are initialized and
// the start-up waits for the listeners.
func (p *Proxy) Initializing() bool { return p.init.initializing() }

// Draining implements admin.Source.
func (p *Proxy) Draining() bool { return p.init.isDraining() }

// DrainListeners implements admin.Source (Envoy's POST /drain_listeners):
// see listener.Manager.DrainListeners. A graceful drain stops the
// listeners it covers from accepting once the drain time has passed,
// unless r.SkipExit; as in Envoy, a graceful request once a graceful
// drain has started is ignored.
func (p *Proxy) DrainListeners(r admin.DrainRequest) {
	p.init.setDraining()
	if !r.Graceful {
		p.Listeners.DrainListeners(r.InboundOnly, false)
		return
	}
	p.drainMu.Lock()
	defer p.drainMu.Unlock()
	if p.drainSeq || p.drainClosed {
		return
	}
	p.drainSeq = true
	p.Listeners.DrainListeners(r.InboundOnly, true)
	if r.SkipExit {
		return
	}
	d := p.Listeners.DrainTime()
	p.drainStop = time.AfterFunc(d, func() {
		p.log.Info("drain time over; listeners stop accepting", "inbound_only", r.InboundOnly, "drain_time", d)
		p.Listeners.DrainListeners(r.InboundOnly, false)
	})
}

// Quit implements admin.Source: Run returns (after Close) and Drain stops
// waiting.
func (p *Proxy) Quit() { p.quitOnce.Do(func() { close(p.quit) }) }

// Quitting is closed once Quit was called.
func (p *Proxy) Quitting() <-chan struct{} { return p.quit }

// ConfigDump implements admin.Source, in Envoy's /config_dump shape
// (configdump.Dumper.Dump).
func (p *Proxy) ConfigDump(r admin.DumpRequest) (*adminv3.ConfigDump, error) {
	return p.dump.Dump(r)
}

// ApplyClusters implements xdsclient.Handler.
func (p *Proxy) ApplyClusters(version string, cs []*clusterv3.Cluster) ([]string, error) {
	names, err := p.Clusters.ApplyCDS(version, cs)
	if err != nil {
		return nil, err
	}
	p.dump.AppliedClusters(cs)
	p.memory.Changed()
	p.init.clustersCame()
	return names, nil
}

// ApplyEndpoints implements xdsclient.Handler.
func (p *Proxy) ApplyEndpoints(version string, clas []*endpointv3.ClusterLoadAssignment) error {
	if err := p.Clusters.ApplyEDS(version, clas); err != nil {
		return err
	}
	p.memory.Changed()
	p.init.check()
	return nil
}

// ApplyListeners implements xdsclient.Handler.
func (p *Proxy) ApplyListeners(version string, ls []*listenerv3.Listener) ([]string, error) {
	names, err := p.Listeners.ApplyLDS(version, ls)
	if err != nil {
		return nil, err
	}
	p.dump.AppliedListeners(ls)
	p.memory.Changed()
	p.init.listenersCame()
	return names, nil
}

// ApplyRoutes implements xdsclient.Handler.
func (p *Proxy) ApplyRoutes(version string, rcs []*routev3.RouteConfiguration) error {
	if err := p.Routes.Apply(version, rcs); err != nil {
		return err
	}
	p.dump.AppliedRoutes(rcs)
	p.memory.Changed()
	p.Listeners.RoutesUpdated() // warming listeners whose routes came start serving
	p.init.check()
	return nil
}

// Rejected implements xdsclient.RejectionHandler: listeners warming for a
// rejected route configuration stop waiting for it.
func (p *Proxy) Rejected(typeURL string, names []string) {
	switch typeURL {
	case xdsapi.RouteType:
		p.Listeners.RoutesRejected(names)
		p.init.check()
	case xdsapi.ClusterType:
		// A rejected first response ends the wait for it, as in Envoy
		// (CdsApiImpl and LdsApiImpl::onConfigUpdateFailed).
		p.init.clustersCame()
	case xdsapi.ListenerType:
		p.init.listenersCame()
	}
}

var (
	_ xdsclient.Handler          = (*Proxy)(nil)
	_ xdsclient.RejectionHandler = (*Proxy)(nil)
	_ admin.Source               = (*Proxy)(nil)
)
