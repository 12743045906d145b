// Command straitd is Strait's control plane: it reads the mesh's config
// (a directory of Istio YAML, or a Kubernetes API server's Services,
// EndpointSlices, Pods and Istio resources), serves Envoy v3 xDS over gRPC
// (plaintext on 15010, TLS on 15012 together with Istio's certificate API
// in front of its CA), and serves metrics and debug pages on the
// monitoring port.
package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"k8s.io/client-go/rest"

	caserver "github.com/straitmesh/strait/internal/ca/server"
	"github.com/straitmesh/strait/internal/inject"
	"github.com/straitmesh/strait/internal/jwks"
	"github.com/straitmesh/strait/internal/lifecycle"
	"github.com/straitmesh/strait/internal/meshconfig"
	"github.com/straitmesh/strait/internal/meshview"
	"github.com/straitmesh/strait/internal/proxypush"
	"github.com/straitmesh/strait/internal/registry/file"
	"github.com/straitmesh/strait/internal/registry/kube"
	"github.com/straitmesh/strait/internal/xds"
	"github.com/straitmesh/strait/internal/xds/gen"
)

// defaultGCPercent is straitd's garbage collection target when GOGC is not
// set. A control plane's live heap is mostly its caches, and it allocates
// in bursts (a connection storm, a config push to every proxy); with Go's
// default (100) the heap grows to twice the live heap between collections,
// and that peak is the process's memory footprint. 25 keeps the peak near
// 1.25 times the live heap for more frequent, short collections: in
// bench/xds (1000 proxies) peak RSS fell from 195 to about 160 MiB at no
// measurable cost in push latency and within the noise in CPU seconds.
const defaultGCPercent = 25

func main() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(defaultGCPercent)
	}
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
	meshFile       string // --mesh

	// meshScrapeInterval and meshWindow tune the mesh page (/debug/mesh).
	meshScrapeInterval time.Duration
	meshWindow         time.Duration

	// Kubernetes mode.
	kubeconfig   string
	namespace    string // the control plane's namespace (--namespace)
	configStatus bool   // write validationMessages on refused objects (--config-status)

	// Sidecar injection webhook.
	injectAddr        string
	injectConfigDir   string
	webhookCert       string
	webhookKey        string
	webhookConfigName string

	// The CA and the TLS port 15012 (addIdentityFlags, newSecureServer).
	identity identityFlags

	// Resolved by run (resolveMode), not flags.
	kubeMode      bool         // serve from the Kubernetes API server
	gatewayAPI    bool         // PILOT_ENABLE_GATEWAY_API
	injectAddrSet bool         // --inject-addr given explicitly
	injectLis     net.Listener // tests: the webhook's listener instead of injectAddr
	mesh          *meshconfig.Config
}

func newRootCmd() *cobra.Command {
	var f flags
	cmd := &cobra.Command{
		Use:   "straitd (--config-dir DIR | --kubeconfig FILE)",
		Short: "Strait's control plane: serves Envoy xDS built from Istio configuration",
		Long: `straitd watches a directory of Istio YAML (ServiceEntry, WorkloadEntry,
VirtualService, DestinationRule, ...) or a Kubernetes API server (Services,
EndpointSlices, Pods and the Istio CRDs; --kubeconfig, or the in-cluster
config in a pod), or both, and serves Envoy v3 xDS (ADS) to the mesh's
proxies. In Kubernetes mode (or with --inject-addr) it also serves the
sidecar injection webhook. On --secure-xds-addr (15012) it serves xDS over
TLS and Istio's certificate API: its CA (a self-signed root kept in
--ca-dir, or a plugged-in CA in --cacerts-dir) signs workload certificates
for callers that prove their identity with a Kubernetes service-account
token (TokenReview, audience istio-ca) or a token from
"straitctl token create".

Environment:
  PILOT_ENABLE_GATEWAY_API   watch the Gateway API kinds (default true)
  POD_NAMESPACE              default of --namespace (else istio-system)
  PILOT_DEBOUNCE_AFTER       quiet period before a push (default 100ms)
  PILOT_DEBOUNCE_MAX         longest a push waits for quiet (default 10s)
  PILOT_ENABLE_EDS_DEBOUNCE  false lets endpoint-only pushes skip debounce (default true)
  PILOT_PUSH_THROTTLE        concurrent pushes (default max(10, 10 x cores))
  GOGC                       Go's garbage collection target (default 25 here)
  STRAIT_EDS_LEADING_EDGE    push an endpoints-only change that follows a quiet
                             period at once; later ones within the quiet period
                             are debounced (default true; false: Istio's behaviour)`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			f.injectAddrSet = cmd.Flags().Changed("inject-addr")
			f.identity.trustDomainSet = cmd.Flags().Changed("trust-domain")
			f.identity.cacertsDirSet = cmd.Flags().Changed("cacerts-dir")
			return run(ctx, f, os.LookupEnv)
		},
	}
	ns := os.Getenv("POD_NAMESPACE")
	if ns == "" {
		ns = defaultNamespace
	}
	cmd.Flags().StringVar(&f.configDir, "config-dir", "", "directory of Istio YAML to serve (required in file mode; optional in Kubernetes mode, served together with the cluster)")
	cmd.Flags().StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig of the Kubernetes API server to serve the mesh from (Kubernetes mode; in a pod the in-cluster config is used when neither --config-dir nor --kubeconfig is given)")
	cmd.Flags().StringVar(&f.namespace, "namespace", ns, "the control plane's namespace: the mesh root namespace (its selector-less Sidecar is the default), the injector ConfigMap, the leader-election Lease, the webhook certificate's names, never injected")
	cmd.Flags().StringVar(&f.injectAddr, "inject-addr", inject.DefaultWebhookAddr, "HTTPS address of the sidecar injection webhook (/inject); on by default in Kubernetes mode, off in file mode unless given; empty disables")
	cmd.Flags().StringVar(&f.injectConfigDir, "inject-config-dir", inject.DefaultConfigDir, "directory of the injector's config and values files (watched); without them, the istio-sidecar-injector ConfigMap in --namespace is used in Kubernetes mode")
	cmd.Flags().StringVar(&f.webhookCert, "webhook-cert", "", "serving certificate (PEM) of the webhook, reloaded on change; empty: a self-signed pair")
	cmd.Flags().StringVar(&f.webhookKey, "webhook-key", "", "key (PEM) of --webhook-cert")
	cmd.Flags().StringVar(&f.webhookConfigName, "webhook-config-name", defaultWebhookConfigName, "MutatingWebhookConfiguration whose caBundle straitd keeps up to date with its self-signed CA (Kubernetes mode); empty: never written")
	cmd.Flags().StringVar(&f.xdsAddr, "xds-addr", ":15010", "address of the plaintext xDS gRPC server")
	cmd.Flags().StringVar(&f.monitoringAddr, "monitoring-addr", ":15014", "address of the metrics, debug and health HTTP server: /metrics and /healthz/ready are open; /debug/* and pprof answer loopback callers, and others with a bearer token of --namespace (a service-account token for audience istio-ca, or straitctl token create)")
	cmd.Flags().DurationVar(&f.meshScrapeInterval, "mesh-scrape-interval", 5*time.Second, "the mesh page ("+meshview.Path+" on the monitoring port): how often straitd scrapes every connected proxy's istio_* metrics (port 15090) while the page is viewed")
	cmd.Flags().DurationVar(&f.meshWindow, "mesh-window", time.Minute, "the mesh page: the window its rates, success rates and p99s are computed over")
	cmd.Flags().StringVar(&f.meshFile, "mesh", "", "mesh config file: Istio's MeshConfig YAML, or the istio ConfigMap manifest (its data.mesh); reloaded when it changes; a field Strait does not implement is refused by name (at start: straitd exits; on reload: the previous config stays). Without it, in Kubernetes mode, the istio ConfigMap of --namespace is read and watched. Its rootNamespace, when set, is the root namespace instead of --namespace")
	cmd.Flags().StringVar(&f.domain, "domain", "cluster.local", "cluster DNS domain")
	cmd.Flags().BoolVar(&f.configStatus, "config-status", true, "Kubernetes mode: write on each Istio object straitd refuses or finds invalid why, in status.validationMessages (one replica writes, elected with the Lease "+statusLeaseName+"); false: the reasons are only logged")
	cmd.Flags().StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	addIdentityFlags(cmd.Flags(), &f.identity)
	return cmd
}

// run starts every part and returns when ctx is done (nil) or a part fails.
func run(ctx context.Context, f flags, lookupEnv func(string) (string, bool)) error {
	if err := resolveMode(&f, lookupEnv); err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		return fmt.Errorf("--log-level %q: want debug, info, warn or error", f.logLevel)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	// Zero (a flags value built in a test) means the mesh page's default.
	f.meshScrapeInterval, f.meshWindow = cmp.Or(f.meshScrapeInterval, 5*time.Second), cmp.Or(f.meshWindow, time.Minute)
	if f.meshScrapeInterval < 0 || f.meshWindow < 2*f.meshScrapeInterval {
		return fmt.Errorf("--mesh-scrape-interval %s, --mesh-window %s: want an interval above 0 and a window of at least two intervals (a rate compares two scrapes)", f.meshScrapeInterval, f.meshWindow)
	}

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
	var kubeConfig *rest.Config
	if f.kubeMode {
		var err error
		if kubeConfig, err = kube.ConfigFromKubeconfig(f.kubeconfig); err != nil {
			return err
		}
	}
	// The mesh config: --mesh, else in Kubernetes mode the istio
	// ConfigMap of the control plane's namespace, else Istio's defaults.
	meshCfg := meshconfig.Default()
	switch {
	case f.meshFile != "":
		var err error
		if meshCfg, err = meshconfig.Load(f.meshFile); err != nil {
			return fmt.Errorf("--mesh: %w", err)
		}
		log.Info("mesh config loaded", "file", f.meshFile, "settings", meshCfg.String())
	case kubeConfig != nil:
		loadCtx, cancelLoad := context.WithTimeout(ctx, 30*time.Second)
		var err error
		meshCfg, err = kube.LoadMeshConfig(loadCtx, kubeConfig, f.namespace)
		cancelLoad()
		if err != nil {
			return fmt.Errorf("mesh config: %w", err)
		}
		log.Info("mesh config loaded", "configmap", f.namespace+"/"+kube.MeshConfigMapName, "settings", meshCfg.String())
	}
	f.mesh = meshCfg
	if err := resolveTrustDomain(&f.identity, meshCfg); err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	var static *file.Registry
	if f.configDir != "" {
		var err error
		opts := file.Options{Dir: f.configDir, Domain: f.domain, RootNamespace: f.namespace, Mesh: meshCfg, Logger: logger}
		if !f.kubeMode {
			// File mode's Gateway credentials: CONFIG_DIR/credentials/NAMESPACE/NAME,
			// as `straitctl local up` lays them out for its gateway pods.
			opts.CredentialsDir = filepath.Join(f.configDir, "credentials")
		}
		if static, err = file.New(opts); err != nil {
			return err
		}
	}
	var (
		source       gen.Source
		resolveProxy func(*proxypush.Proxy) error
		kreg         *kube.Registry
	)
	if f.kubeMode {
		var err error
		kreg, err = kube.New(kube.Options{Config: kubeConfig, Domain: f.domain, RootNamespace: f.namespace, Mesh: meshCfg, Static: static, GatewayAPI: f.gatewayAPI, Logger: logger})
		if err != nil {
			return err
		}
		source, resolveProxy = kreg, kreg.ResolveProxy
	} else {
		source, resolveProxy = static, static.ResolveProxy
	}
	// jwtRules' key sets are fetched here and inlined in the proxies'
	// config, as istiod does by default; a refresh that changes one
	// pushes to every proxy.
	var server *xds.Server
	keySets := jwks.New(jwks.Options{Logger: logger, RefreshInterval: push.JWKSRefreshInterval, OnChange: func() {
		server.ConfigUpdate(&proxypush.PushRequest{Full: true, Reason: []proxypush.TriggerReason{proxypush.GlobalUpdate}})
	}})
	generator := gen.NewWithOptions(source, gen.Options{KeySets: keySets})
	reg.MustRegister(generator.Collector())
	var (
		generate   xds.Generator  = generator
		pushFilter xds.PushFilter = generator
	)
	if kreg != nil {
		// Kubernetes mode: the Gateways' credentials come from Secrets,
		// served over ADS.
		cg := credentialGenerator{Generator: generator, secrets: kreg}
		generate, pushFilter = cg, cg
	}
	// The TLS server (15012) with the CA's authenticators, made below;
	// its streams' tokens authenticate the proxies (xdsIdentity).
	var secure *secureServer
	authenticate := xdsIdentity(func() []caserver.Authenticator {
		if secure == nil {
			return nil
		}
		return secure.authn
	})
	server, err := xds.New(xds.Options{
		Generator:         generate,
		PushFilter:        pushFilter,
		EndpointsNarrower: generator,
		ResolveProxy:      resolveProxy,
		Authenticate:      authenticate,
		DebounceAfter:     push.DebounceAfter,
		DebounceMax:       push.DebounceMax,
		SkipEDSDebounce:   !push.EnableEDSDebounce,
		EDSLeadingEdge:    push.EDSLeadingEdge,
		PushThrottle:      push.PushThrottle,
		Registry:          reg,
		Logger:            logger,
	})
	if err != nil {
		return err
	}

	grpcServer := grpc.NewServer(xds.ServerOptions()...)
	server.Register(grpcServer)
	if f.identity.secureXDSAddr != "" || f.identity.secureLis != nil {
		if secure, err = newSecureServer(f, kubeConfig, reg, logger); err != nil {
			return err
		}
		server.Register(secure.grpc)
	}

	var ready atomic.Bool
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	server.RegisterDebugHandlers(mux)
	meshPage, err := meshview.NewScraper(meshview.Options{Proxies: server, Interval: f.meshScrapeInterval, Window: f.meshWindow, Logger: logger.With("component", "meshview")})
	if err != nil {
		return err
	}
	mux.Handle("GET "+meshview.Path, meshPage.Handler())
	// Go's profiler, as istiod serves it: /debug/pprof/heap, /profile, ...
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("GET /healthz/ready", func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Load() || (kreg != nil && !kreg.HasSynced()) {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	// /debug/* and pprof only to loopback or a token of the control
	// plane's namespace; /metrics and /healthz/ready to anyone.
	guard := &debugGuard{next: mux, namespace: f.namespace, log: log}
	if secure != nil {
		guard.authn = secure.authn
	}
	httpServer := &http.Server{Handler: guard, ReadHeaderTimeout: 10 * time.Second}

	parts, ctx := lifecycle.New(ctx)
	defer parts.Stop()
	parts.Go("xds push pipeline", server.Run)
	parts.Go("jwks resolver", keySets.Run)
	parts.Go("mesh page scraper", meshPage.Run)
	if kreg != nil {
		parts.Go("kube registry", func(ctx context.Context) error { return kreg.Run(ctx, server.ConfigUpdate) })
		if f.configStatus || f.gatewayAPI {
			// Refused and invalid Istio objects say so on their status,
			// and the Gateway API's Gateways get their gateway deployed;
			// one replica writes.
			parts.Go("config status writer", func(ctx context.Context) error {
				return kube.RunAsLeader(ctx, kube.LeaderOptions{
					Config: kubeConfig, Namespace: f.namespace, Name: statusLeaseName, Logger: logger,
				}, func(ctx context.Context) {
					var wg sync.WaitGroup
					if f.gatewayAPI {
						wg.Go(func() {
							if err := kreg.DeployGateways(ctx); err != nil {
								log.Error("gateway deployer", "error", err)
							}
						})
					}
					if f.configStatus {
						if err := kreg.WriteStatus(ctx); err != nil {
							log.Error("config status writer", "error", err)
						}
					}
					wg.Wait()
				})
			})
		}
		if static != nil {
			parts.Go("file registry", func(ctx context.Context) error { return static.Run(ctx, kreg.StaticChanged) })
		}
	} else {
		parts.Go("file registry", func(ctx context.Context) error { return static.Run(ctx, server.ConfigUpdate) })
	}
	// The mesh config is reloaded when its source changes; each registry
	// rebuilds its snapshot and every proxy gets a full push.
	setMesh := func(m *meshconfig.Config) {
		if m.TrustDomain != f.identity.trustDomain && secure != nil {
			log.Error("the mesh config's trustDomain changed; the CA keeps signing the old one until straitd restarts, and sidecars refuse its certificates",
				"trust_domain", m.TrustDomain, "ca_trust_domain", f.identity.trustDomain)
		}
		if static != nil {
			static.SetMesh(m)
		}
		if kreg != nil {
			kreg.SetMesh(m)
		}
	}
	switch {
	case f.meshFile != "":
		parts.Go("mesh config watcher", func(ctx context.Context) error {
			return meshconfig.Watch(ctx, f.meshFile, meshCfg, setMesh, logger)
		})
	case kubeConfig != nil:
		parts.Go("mesh ConfigMap watcher", func(ctx context.Context) error {
			return kube.WatchMeshConfig(ctx, kubeConfig, f.namespace, meshCfg, setMesh, logger)
		})
	}
	if f.injectAddr != "" || f.injectLis != nil {
		if err := startInjector(ctx, f, kubeConfig, logger, parts); err != nil {
			parts.Fail("sidecar injection webhook", err)
		}
	}
	parts.Go("xds server", func(context.Context) error { return grpcServer.Serve(xdsLis) })
	secureAddr := ""
	if secure != nil {
		secureAddr = secure.lis.Addr().String()
		parts.Go("secure xds and CA server", secure.serve)
		parts.Go("CA directory watch", secure.ca.Watch)
		if secure.rootPublisher != nil {
			parts.Go("root certificate publisher", secure.rootPublisher.Run)
		}
	}
	parts.Go("monitoring server", func(context.Context) error {
		if err := httpServer.Serve(monLis); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	ready.Store(true)
	log.Info("serving", "xds", xdsLis.Addr().String(), "secure_xds", secureAddr, "monitoring", monLis.Addr().String(),
		"config_dir", f.configDir, "kubernetes", f.kubeMode, "inject", f.injectAddr != "" || f.injectLis != nil, "debounce_after", push.DebounceAfter, "debounce_max", push.DebounceMax,
		"eds_debounce", push.EnableEDSDebounce, "eds_leading_edge", push.EDSLeadingEdge, "push_throttle", push.PushThrottle)

	<-ctx.Done()
	ready.Store(false)
	log.Info("shutting down")
	// ADS streams never end on their own, so a graceful gRPC stop would only
	// wait out its timeout; proxies reconnect to the next straitd anyway.
	grpcServer.Stop()
	shutdownCtx, cancelShutdown := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancelShutdown()
	if err := httpServer.Shutdown(shutdownCtx); err != nil {
		log.Warn("monitoring server shutdown", "error", err)
	}
	if err := parts.Wait(); err != nil {
		return err
	}
	log.Info("stopped")
	return nil
}

// The parts main wires must fit together.
var (
	_ xds.Generator         = (*gen.Generator)(nil)
	_ xds.PushFilter        = (*gen.Generator)(nil)
	_ xds.EndpointsNarrower = (*gen.Generator)(nil)
	_ gen.Source            = (*file.Registry)(nil)
	_ gen.Source            = (*kube.Registry)(nil)
)
