// Command straitd is Strait's control plane: it reads the mesh's config
// (today: a directory of Istio YAML), serves Envoy v3 xDS over gRPC, and
// serves metrics and debug pages on the monitoring port.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"github.com/straitmesh/strait/internal/registry/file"
	"github.com/straitmesh/strait/internal/xds"
	"github.com/straitmesh/strait/internal/xds/gen"
)

func main() {
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "straitd:", err)
		os.Exit(1)
	}
}

// flags are straitd's command-line flags.
type flags struct {
	configDir      string
	xdsAddr        string
	monitoringAddr string
	domain         string
	logLevel       string
}

func newRootCmd() *cobra.Command {
	var f flags
	cmd := &cobra.Command{
		Use:   "straitd --config-dir DIR",
		Short: "Strait's control plane: serves Envoy xDS built from Istio configuration",
		Long: `straitd watches a directory of Istio YAML (ServiceEntry, WorkloadEntry,
VirtualService, DestinationRule, ...) and serves Envoy v3 xDS (ADS) to the
mesh's proxies.

Environment:
  PILOT_DEBOUNCE_AFTER       quiet period before a push (default 100ms)
  PILOT_DEBOUNCE_MAX         longest a push waits for quiet (default 10s)
  PILOT_ENABLE_EDS_DEBOUNCE  false lets endpoint-only pushes skip debounce (default true)
  PILOT_PUSH_THROTTLE        concurrent pushes (default max(10, 10 x cores))`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return run(ctx, f, os.LookupEnv)
		},
	}
	cmd.Flags().StringVar(&f.configDir, "config-dir", "", "directory of Istio YAML to serve (file mode; required)")
	cmd.Flags().StringVar(&f.xdsAddr, "xds-addr", ":15010", "address of the plaintext xDS gRPC server")
	cmd.Flags().StringVar(&f.monitoringAddr, "monitoring-addr", ":15014", "address of the metrics, debug and health HTTP server")
	cmd.Flags().StringVar(&f.domain, "domain", "cluster.local", "cluster DNS domain")
	cmd.Flags().StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	return cmd
}

// run starts every part and returns when ctx is done (nil) or a part fails.
func run(ctx context.Context, f flags, lookupEnv func(string) (string, bool)) error {
	if f.configDir == "" {
		return errors.New("--config-dir is required: the directory of Istio YAML (ServiceEntry, WorkloadEntry, ...) to serve")
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		return fmt.Errorf("--log-level %q: want debug, info, warn or error", f.logLevel)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	push, err := pushSettingsFromEnv(lookupEnv)
	if err != nil {
		return err
	}

	xdsLis, err := net.Listen("tcp", f.xdsAddr)
	if err != nil {
		return fmt.Errorf("--xds-addr: %w", err)
	}
	defer xdsLis.Close()
	monLis, err := net.Listen("tcp", f.monitoringAddr)
	if err != nil {
		return fmt.Errorf("--monitoring-addr: %w", err)
	}
	defer monLis.Close()

	return serve(ctx, f, push, logger, xdsLis, monLis)
}

// serve builds the control plane on the given listeners and runs it until
// ctx is done (nil) or a part fails.
func serve(ctx context.Context, f flags, push pushSettings, logger *slog.Logger, xdsLis, monLis net.Listener) error {
	log := logger.With("component", "straitd")
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	registry, err := file.New(file.Options{Dir: f.configDir, Domain: f.domain, Logger: logger})
	if err != nil {
		return err
	}
	generator := gen.New(registry)
	server, err := xds.New(xds.Options{
		Generator:       generator,
		PushFilter:      generator,
		ResolveProxy:    registry.ResolveProxy,
		DebounceAfter:   push.DebounceAfter,
		DebounceMax:     push.DebounceMax,
		SkipEDSDebounce: !push.EnableEDSDebounce,
		PushThrottle:    push.PushThrottle,
		Registry:        reg,
		Logger:          logger,
	})
	if err != nil {
		return err
	}

	grpcServer := grpc.NewServer()
	server.Register(grpcServer)

	var ready atomic.Bool
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	server.RegisterDebugHandlers(mux)
	mux.HandleFunc("GET /healthz/ready", func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Load() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	httpServer := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	// part runs fn on its own goroutine; the first failure stops everything.
	part := func(name string, fn func() error) {
		wg.Go(func() {
			if err := fn(); err != nil {
				cancel(fmt.Errorf("%s: %w", name, err))
			}
		})
	}
	part("xds push pipeline", func() error {
		if err := server.Run(ctx); !errors.Is(err, context.Canceled) {
			return err
		}
		return nil
	})
	part("file registry", func() error { return registry.Run(ctx, server.ConfigUpdate) })
	part("xds server", func() error { return grpcServer.Serve(xdsLis) })
	part("monitoring server", func() error {
		if err := httpServer.Serve(monLis); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	ready.Store(true)
	log.Info("serving", "xds", xdsLis.Addr().String(), "monitoring", monLis.Addr().String(),
		"config_dir", f.configDir, "debounce_after", push.DebounceAfter, "debounce_max", push.DebounceMax,
		"eds_debounce", push.EnableEDSDebounce, "push_throttle", push.PushThrottle)

	<-ctx.Done()
	ready.Store(false)
	log.Info("shutting down")
	// ADS streams never end on their own, so a graceful gRPC stop would only
	// wait out its timeout; proxies reconnect to the next straitd anyway.
	grpcServer.Stop()
	shutdownCtx, cancelShutdown := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelShutdown()
	if err := httpServer.Shutdown(shutdownCtx); err != nil {
		log.Warn("monitoring server shutdown", "error", err)
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	log.Info("stopped")
	return nil
}

// The parts main wires must fit together.
var (
	_ xds.Generator  = (*gen.Generator)(nil)
	_ xds.PushFilter = (*gen.Generator)(nil)
	_ gen.Source     = (*file.Registry)(nil)
)
