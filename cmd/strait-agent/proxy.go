package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/straitmesh/strait/internal/agent"
	"github.com/straitmesh/strait/internal/agent/settings"
	"github.com/straitmesh/strait/internal/debugserve"
	"github.com/straitmesh/strait/internal/proxypush"
)

// newProxyCmd is `strait-agent proxy sidecar|router`: the long-running
// agent beside the application (pilot-agent's `proxy sidecar`), or of a
// gateway (pilot-agent's `proxy router`: the node type router, whose
// listeners straitd builds from the Gateways that select the workload;
// nothing is captured, the proxy binds the servers' ports itself).
func newProxyCmd() *cobra.Command {
	var (
		domain      string
		concurrency int
		ignored     string
	)
	cmd := &cobra.Command{
		Use:   "proxy sidecar|router",
		Short: "Run the sidecar or gateway agent: write the bootstrap, relay xDS, serve health and metrics, run strait-proxy",
		Long: `Run the sidecar agent (proxy sidecar) or a gateway's (proxy router).

A router's node id is router~INSTANCE_IP~POD_NAME.POD_NAMESPACE~DOMAIN;
straitd sends it the listeners of the Gateways whose selector matches the
labels of its WorkloadEntry (the one at INSTANCE_IP), which it binds on
0.0.0.0; no traffic is captured. Certificates named by the Gateways'
serverCertificate/privateKey/caCertificates are read by this agent and
served to the proxy over SDS.

Environment: POD_NAME, POD_NAMESPACE, INSTANCE_IP, SERVICE_ACCOUNT,
PROXY_CONFIG (JSON ProxyConfig; discoveryAddress defaults to Istio's
istiod.istio-system.svc:15012, e.g. {"discoveryAddress":"straitd.istio-system.svc:15012"}),
ISTIO_META_* (node metadata), MINIMUM_DRAIN_DURATION (e.g. 5s), XDS_SOCKET_PATH,
STRAIT_AGENT_DEBUG_ADDR (loopback host:port: Go's pprof profiles and runtime
figures; unset, the Go runtime's heap profiling is off; STRAIT_PROXY_DEBUG_ADDR,
passed on to an executed proxy, does the same there), STRAIT_PROXY_MODE (below).

The proxy: by default strait-proxy runs inside this process (one Go runtime and
one binary's pages instead of two), from the same command line it would be
executed with; its logs go to this process's stderr. A panic in it ends the
agent, and so the sidecar container, which the kubelet restarts; a proxy that
stops with an error (a port in use) is restarted by the agent, as an executed
one is. STRAIT_PROXY_MODE=exec executes ProxyConfig binaryPath instead (default
strait-proxy beside the agent), as does any binaryPath that is not strait-proxy
(Envoy); STRAIT_PROXY_MODE=inprocess insists on the in-process proxy.
The process runs Go code on at most the proxy's --concurrency cores (0: the
CPU limit's); with an executed proxy the agent takes at most 2 (GOMAXPROCS,
when set, decides instead) and the proxy sets its own.
The ProxyConfig is merged from defaults, /etc/istio/config/mesh, PROXY_CONFIG and
the proxy.istio.io/config annotation in /etc/istio/pod/annotations, in that order.

Workload identity: xDS is plaintext on port 15010, TLS on 15012 (or with
XDS_ROOT_CA, or when ./var/run/secrets/istio/root-cert.pem exists), trusting
that root. When the CA (CA_ADDR, default discoveryAddress; CA_ROOT_CA) is
TLS, the agent requests a certificate for
spiffe://TRUST_DOMAIN/ns/POD_NAMESPACE/sa/SERVICE_ACCOUNT with the token at
./var/run/secrets/tokens/istio-token (JWT_POLICY=first-party-jwt: the legacy
service-account token), renews it at ~80% of SECRET_TTL (24h) and serves it
over SDS on ./var/run/secrets/workload-spiffe-uds/socket. ISTIOD_SAN
overrides the server name checked on both connections. PILOT_CERT_PROVIDER
may only be istiod (the default); Istio's other providers are refused.

DNS: with ISTIO_META_DNS_CAPTURE=true (or in proxyMetadata) the agent serves
the pod's DNS on 127.0.0.1:15053 (what strait-agent iptables --redirect-dns
captures): mesh names from straitd's name table, the rest forwarded to the
nameservers in /etc/resolv.conf. ServiceEntries without addresses answer with
the addresses straitd allocated them (240.240.0.0/16), on which the proxy
listens; ISTIO_META_DNS_AUTO_ALLOCATE is accepted and changes nothing more.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("want one proxy type argument (sidecar or router), got %d", len(args))
			}
			if args[0] != string(proxypush.SidecarProxy) && args[0] != string(proxypush.Router) {
				return fmt.Errorf("proxy type %q is not supported; use \"sidecar\" or \"router\"", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
			// First, so that heap profiling is off before the start's allocations.
			stopDebug, err := debugserve.FromEnv(os.Getenv, "STRAIT_AGENT_DEBUG_ADDR", logger) // unset: heap profiling off
			if err != nil {
				return err
			}
			defer stopDebug()
			src := settings.Sources{Domain: domain, ProxyType: proxypush.NodeType(args[0])}
			if cmd.Flags().Changed("concurrency") {
				src.Concurrency = &concurrency
			}
			cfg, err := settings.Load(src)
			if err != nil {
				return err
			}
			if cfg.ProxyMode == settings.ProxyInProcess {
				inProcessProcs(os.Getenv, cfg.Concurrency) // procs.go
			} else {
				capProcs(os.Getenv)
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			return agent.Run(ctx, cfg, agent.Options{Logger: logger})
		},
	}
	f := cmd.Flags()
	f.StringVar(&domain, "domain", "", "DNS domain of the node id (default POD_NAMESPACE.svc.cluster.local)")
	f.IntVar(&concurrency, "concurrency", settings.DefaultConcurrency, "proxy worker threads; overrides ProxyConfig.concurrency (0 = one per core)")
	// Istio's injected sidecar passes these; accepted and ignored.
	for _, name := range []string{"proxyLogLevel", "proxyComponentLogLevel", "log_output_level"} {
		f.StringVar(&ignored, name, "", "accepted for Istio compatibility; ignored")
		_ = f.MarkHidden(name) // fails only for a flag not defined just above
	}
	return cmd
}
