// Package agent runs `strait-agent proxy sidecar`: it writes the proxy's
// bootstrap, relays xDS on a Unix socket, keeps the workload's certificate
// and serves it over SDS, answers the pod's DNS from the control plane's
// name table when DNS capture is on, serves health and merged metrics, and
// supervises the proxy until shutdown: strait-proxy on goroutines of this
// process (inprocess) or an executed proxy (strait-proxy or Envoy). The
// parts live in the subpackages settings, bootstrap, xdsproxy, sds, dns,
// caclient, status, supervisor and inprocess; this package only wires
// them.
package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/straitmesh/strait/internal/agent/bootstrap"
	"github.com/straitmesh/strait/internal/agent/inprocess"
	"github.com/straitmesh/strait/internal/agent/sds"
	"github.com/straitmesh/strait/internal/agent/settings"
	"github.com/straitmesh/strait/internal/agent/status"
	"github.com/straitmesh/strait/internal/agent/supervisor"
	"github.com/straitmesh/strait/internal/agent/xdsproxy"
	"github.com/straitmesh/strait/internal/lifecycle"
	"github.com/straitmesh/strait/internal/promscrape"
)

// Options are the agent's knobs that do not come from the pod's settings.
type Options struct {
	Logger *slog.Logger
	// StatusHost is the address the status ports bind (default all interfaces).
	StatusHost string
	// Starter runs the proxy (default: in the agent's process when the
	// settings' ProxyMode says so, else os/exec).
	Starter supervisor.Starter
	// XDSBackoffBase and XDSBackoffMax tune the upstream reconnect (0 = defaults).
	XDSBackoffBase, XDSBackoffMax time.Duration
	// TerminateTimeout is how long the proxy gets after SIGTERM (0 = default).
	TerminateTimeout time.Duration
	// With DNS capture: the DNS proxy's address (default 127.0.0.1:15053),
	// the resolv.conf naming its upstreams (default /etc/resolv.conf) and
	// how long readiness waits for the first name table (default 5s).
	DNSAddr         string
	ResolvConf      string
	DNSReadyTimeout time.Duration
}

// Run runs the agent until ctx is done (SIGTERM), then drains, stops the
// proxy and returns nil. It returns an error if a part cannot start.
func Run(ctx context.Context, cfg *settings.Config, opts Options) error {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("component", "agent")
	pc := cfg.Proxy
	adminPort := int(pc.GetProxyAdminPort())

	b, err := bootstrap.Build(bootstrap.Options{
		NodeID:        cfg.NodeID(),
		Cluster:       cfg.ServiceCluster(),
		Metadata:      cfg.NodeMetadata(),
		Labels:        cfg.Labels,
		AdminPort:     adminPort,
		XDSSocketPath: cfg.XDSSocketPath,
		SDSSocketPath: cfg.Identity.WorkloadSocketPath,
		Locality:      cfg.Locality(),
	})
	if err != nil {
		return err
	}
	if err := bootstrap.Write(cfg.BootstrapPath(), b); err != nil {
		return err
	}
	log.Info("wrote bootstrap", "path", cfg.BootstrapPath(), "node", cfg.NodeID(), "discovery_address", pc.GetDiscoveryAddress())
	secrets := newSecretStore(cfg)
	xdsDial, err := xdsDialOptions(cfg, secrets)
	if err != nil {
		return err
	}
	log.Info("discovery", "address", pc.GetDiscoveryAddress(), "tls", len(xdsDial) > 0, "root", cfg.Identity.XDSRootCert)

	dnsProxy, err := newDNSProxy(cfg, opts)
	if err != nil {
		return err
	}
	xds, err := xdsproxy.New(xdsproxy.Options{
		UpstreamAddress: pc.GetDiscoveryAddress(),
		BackoffBase:     opts.XDSBackoffBase,
		BackoffMax:      opts.XDSBackoffMax,
		DialOptions:     xdsDial,
		Logger:          opts.Logger,
		Subscriptions:   dnsSubscriptions(dnsProxy),
	})
	if err != nil {
		return err
	}
	xdsLis, err := xdsproxy.ListenUnix(cfg.XDSSocketPath)
	if err != nil {
		xds.Stop()
		return err
	}
	// The servers (xDS relay, status ports) outlive ctx: the proxy uses
	// them while it drains. They stop after it; one that fails stops the
	// proxy, and the agent returns its error.
	serving, servingCtx := lifecycle.New(context.WithoutCancel(ctx))
	defer func() {
		serving.Stop()
		_ = serving.Wait() // an early return has its own error
	}()
	serving.Go("xds proxy", func(ctx context.Context) error {
		defer context.AfterFunc(ctx, xds.Stop)()
		return xds.Serve(xdsLis)
	})
	base := opts.Logger
	if base == nil {
		base = slog.Default()
	}
	if err := startIdentity(cfg, secrets, base, serving); err != nil {
		return err
	}
	dnsReady := startDNS(dnsProxy, opts, log, serving)

	starter := opts.Starter
	if starter == nil {
		starter = supervisor.Exec{}
		if cfg.ProxyMode == settings.ProxyInProcess {
			starter = inprocess.Starter{}
		}
	}
	log.Info("proxy mode", "mode", string(cfg.ProxyMode), "binary_path", pc.GetBinaryPath())
	// st is set below, before sup.Run, the only caller of OnDrain.
	var st *status.Server
	sup := supervisor.New(supervisor.Options{
		Command: supervisor.Command{
			Path: pc.GetBinaryPath(),
			Args: supervisor.ProxyArgs(cfg.BootstrapPath(), cfg.Concurrency, cfg.ProxyDrainTime()),
		},
		Starter: starter,
		OnDrain: func() {
			st.SetDraining()
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := st.DrainInbound(dctx); err != nil {
				log.Warn("proxy not drained; it stops at the end of the drain duration", "error", err)
			}
		},
		DrainDuration:    cfg.DrainDuration,
		TerminateTimeout: terminateTimeout(opts.TerminateTimeout, cfg.ProxyDrainTime()),
		Logger:           opts.Logger,
	})
	st = status.New(status.Options{
		AdminURL:  "http://127.0.0.1:" + strconv.Itoa(adminPort),
		XDSSynced: xds.Synced,
		DNSReady:  dnsReady,
		AgentMetrics: func(w io.Writer) error {
			if err := xds.WriteMetrics(w); err != nil {
				return err
			}
			_, err := fmt.Fprintf(w, "# HELP strait_agent_proxy_restarts_total Times the proxy exited unexpectedly and was restarted.\n"+
				"# TYPE strait_agent_proxy_restarts_total counter\nstrait_agent_proxy_restarts_total %d\n", sup.Restarts())
			return err
		},
		AppTargets: appTargets(cfg.AppMetrics),
		Logger:     opts.Logger,
	})
	type statusPort struct {
		port    int
		handler http.Handler
	}
	servers := []statusPort{{cfg.ReadinessPort, st.ReadyHandler()}}
	if p := int(pc.GetStatusPort()); p != 0 {
		h := st.Handler()
		if secrets != nil {
			// The certificates (never the key) for straitctl proxy-config secret.
			mux := http.NewServeMux()
			mux.Handle("GET /debug/secrets", sds.DebugHandler(secrets))
			mux.Handle("/", h)
			h = mux
		}
		servers = append(servers, statusPort{p, h})
	}
	for _, s := range servers {
		addr := net.JoinHostPort(opts.StatusHost, strconv.Itoa(s.port))
		lis, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("status server: %w", err)
		}
		srv := &http.Server{Handler: s.handler, ReadHeaderTimeout: 5 * time.Second}
		serving.Go("status server "+addr, func(ctx context.Context) error {
			defer context.AfterFunc(ctx, func() {
				sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
				defer cancel()
				_ = srv.Shutdown(sctx)
			})()
			if err := srv.Serve(lis); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		})
		log.Info("serving status", "addr", lis.Addr().String())
	}

	supCtx, stopProxy := context.WithCancel(ctx)
	defer stopProxy()
	context.AfterFunc(servingCtx, stopProxy)
	if err := sup.Run(supCtx); err != nil {
		return err
	}
	serving.Stop()
	if err := serving.Wait(); err != nil {
		return err
	}
	log.Info("agent stopped")
	return nil
}

// terminateTimeout is how long the proxy gets after SIGTERM: the given
// value, else long enough for the drain the proxy was started with
// (--drain-time-s) plus a margin, and at least 30 s.
func terminateTimeout(given, drainTime time.Duration) time.Duration {
	if given > 0 {
		return given
	}
	return max(30*time.Second, drainTime+5*time.Second)
}

func appTargets(ts []promscrape.Target) []status.AppTarget {
	out := make([]status.AppTarget, len(ts))
	for i, t := range ts {
		out[i] = status.AppTarget{Port: t.Port, Path: t.Path}
	}
	return out
}
